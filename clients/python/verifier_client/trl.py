"""A reward function for TRL's GRPOTrainer.

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=...,
**dataset_columns, trainer_state=..., log_extra=..., log_metric=...)`` and takes
``list[float | None]`` back (None: no reward for that sample); async reward functions are
awaited. Prompts and completions are strings (standard format) or message lists
(conversational format); both are handled.

    from verifier_client.trl import reward_function
    reward = reward_function("http://verifier:8000", reference_column="answer")
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

With ``reference_column`` each completion is verified against its row's answer: by rule where
the rule decides (no engine call), by the model otherwise. Who decided is logged per sample
through TRL's ``log_extra`` (columns ``verifier_decided_by_rule``, ``verifier_rule_equivalent``,
``verifier_model_score`` in the completions table) and ``log_metric`` (the share decided by
rule), when the trainer passes them.

The completions of one prompt (a GRPO group) with one reference go to the service as one
``POST /v1/score`` call: one job, whose judgments share the prompt's prefix in the engine.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from verifier_client._client import AsyncClient, Client
from verifier_client._rl import (
    Judged,
    Message,
    Method,
    Mode,
    OnTimeout,
    RewardTimeout,
    Sample,
    Scoring,
    Verifier,
    question_of,
    reference_of,
    score_batch_async,
    score_batch_sync,
    settle,
    text_of,
)
from verifier_client._specs import merged, remaining, rewards_async, rewards_sync, spec_fields

__all__ = ["RewardTimeout", "reward_function"]

Prompt = str | Sequence[Message]
SyncReward = Callable[..., list[float | None]]
AsyncReward = Callable[..., Awaitable[list[float | None]]]
LOG_PREFIX = "verifier_"
LATE_CALL_GRACE_S = 1.0


def reward_function(
    base_url: str,
    *,
    mode: Mode = "direct",
    method: Method = "outcome",
    reference_column: str | None = None,
    spec_column: str | None = None,
    verifier: Verifier | None = None,
    timeout_s: float | None = None,
    on_timeout: OnTimeout = "none",
    api_key: str | None = None,
    concurrency: int = 16,
    group_calls: bool = True,
    asynchronous: bool = False,
    client_options: dict[str, Any] | None = None,
    **judge_options: Any,
) -> SyncReward | AsyncReward:
    """A TRL reward function scoring each completion with the verifier: P(correct) in [0, 1].

    ``mode``: direct | reasoning (| single_pass with ``method="process"``); ``method``:
    outcome (one judgment) or process (per step, aggregated; the reference is context).
    ``reference_column``: the dataset column holding each row's answer (TRL passes columns
    by name); ``verifier``: model | rule | hybrid (default: hybrid with a reference).
    ``spec_column``: a column whose rows may hold a verification spec of /v1/rewards
    (``{"type": "choice", "answer": "B"}``, or components and a formula); those rows go
    through ``/v1/rewards`` in one call, each by its own spec, the others as before.
    ``timeout_s``: the deadline of one call (a batch waits at most this long); a sample past
    it gets None (``on_timeout="none"``, TRL's "no reward"), 0 (``"zero"``), or the call raises
    ``RewardTimeout`` (``"raise"``). ``concurrency``: requests in flight at most.
    ``group_calls``: one ``/v1/score`` request per group of completions sharing a prompt and a
    reference (False: one request per completion). ``judge_options`` go into every request
    (e.g. ``reasoning_tokens=128``, or ``calibration_id="pcal_..."`` for calibrated
    probabilities, docs/api.md). ``asynchronous=True`` returns an async function (TRL
    awaits those concurrently with the other reward functions).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: at least one request must be in flight")
    opts = dict(client_options or {})
    if timeout_s is not None:
        # The hook's own deadline fires first; the HTTP timeout only ends a call left behind.
        opts.setdefault("timeout", timeout_s + LATE_CALL_GRACE_S)
    if verifier is not None:
        judge_options = {**judge_options, "verifier": verifier}
    scoring = Scoring(method, mode, judge_options, grouped=group_calls)
    plan = _Plan(scoring, reference_column, timeout_s, on_timeout, spec_column)
    if asynchronous:
        return _async_reward(base_url, api_key, concurrency, opts, plan)
    client = Client(base_url, api_key=api_key, **opts)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verifier-reward")

    def verifier_reward(
        prompts: Sequence[Prompt], completions: Sequence[Prompt], **columns: Any
    ) -> list[float | None]:
        start = time.monotonic()
        samples = plan.samples(prompts, completions, columns)
        items = plan.spec_items(prompts, completions, columns)
        spec_call = pool.submit(rewards_sync, client, list(items.values()), mode, judge_options)
        plain = [s for i, s in enumerate(samples) if i not in items]
        judged = score_batch_sync(client, scoring, pool, plain, timeout_s)
        try:
            left = remaining(timeout_s, start, time.monotonic())
            by_spec: list[Judged | None] = list(spec_call.result(timeout=left))
        except FutureTimeout:
            by_spec = [None] * len(items)
        judged = merged(len(samples), list(items), by_spec, judged)
        return plan.report(settle(judged, on_timeout, timeout_s), columns)

    # The connections and threads live as long as the function; they close with it, not at
    # the interpreter's exit.
    weakref.finalize(verifier_reward, client.close)
    weakref.finalize(verifier_reward, pool.shutdown, wait=False)
    return verifier_reward


class _Plan:
    """What every call of one reward function does the same way."""

    def __init__(
        self,
        scoring: Scoring,
        reference_column: str | None,
        timeout_s: float | None,
        on_timeout: OnTimeout,
        spec_column: str | None = None,
    ) -> None:
        self.scoring = scoring
        self.spec_column = spec_column
        self.reference_column = reference_column
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout

    def references(self, columns: dict[str, Any], n: int) -> list[str | None]:
        if self.reference_column is None:
            return [None] * n
        if self.reference_column not in columns:
            known = sorted(k for k in columns if k not in ("trainer_state", "completion_ids"))
            raise KeyError(
                f"reference_column={self.reference_column!r} is not among the dataset columns "
                f"TRL passed ({known}); keep the column in the dataset"
            )
        return [reference_of(v) for v in columns[self.reference_column]]

    def spec_items(
        self, prompts: Sequence[Prompt], completions: Sequence[Prompt], columns: dict[str, Any]
    ) -> dict[int, dict[str, Any]]:
        """The /v1/rewards items of the rows whose spec column holds a spec, by position."""
        if self.spec_column is None:
            return {}
        if self.spec_column not in columns:
            raise KeyError(
                f"spec_column={self.spec_column!r} is not among the dataset columns TRL passed; "
                "keep the column in the dataset"
            )
        out = {}
        rows = zip(prompts, completions, columns[self.spec_column], strict=True)
        for i, (prompt, completion, spec) in enumerate(rows):
            fields = spec_fields(spec, None, None)
            if fields is not None:
                out[i] = {"prompt": question_of(prompt), "response": text_of(completion), **fields}
        return out

    def samples(
        self, prompts: Sequence[Prompt], completions: Sequence[Prompt], columns: dict[str, Any]
    ) -> list[Sample]:
        refs = self.references(columns, len(completions))
        return [
            Sample(question_of(p), text_of(c), ref)
            for p, c, ref in zip(prompts, completions, refs, strict=True)
        ]

    def report(self, judged: list[Judged], columns: dict[str, Any]) -> list[float | None]:
        """The rewards; who decided each goes to TRL's completions table and metrics."""
        log_extra = columns.get("log_extra")
        log_metric = columns.get("log_metric")
        if callable(log_extra):
            logs = [j.logs() for j in judged]
            for key in ("decided_by_rule", "rule_equivalent", "model_score"):
                log_extra(LOG_PREFIX + key, [row[key] for row in logs])
        if callable(log_metric) and judged:
            share = sum(j.decided_by_rule for j in judged) / len(judged)
            log_metric(LOG_PREFIX + "decided_by_rule", share)
        return [j.score for j in judged]


def _async_reward(
    base_url: str,
    api_key: str | None,
    concurrency: int,
    opts: dict[str, Any],
    plan: _Plan,
) -> AsyncReward:
    async def verifier_reward(
        prompts: Sequence[Prompt], completions: Sequence[Prompt], **columns: Any
    ) -> list[float | None]:
        start = time.monotonic()
        samples = plan.samples(prompts, completions, columns)
        items = plan.spec_items(prompts, completions, columns)
        plain = [s for i, s in enumerate(samples) if i not in items]
        # TRL calls this once per batch, so a client per call costs one connection setup per
        # batch; it is closed before the call returns, whichever loop TRL awaits it on (an
        # httpx.AsyncClient must not outlive or cross its loop). Late calls are cancelled and
        # awaited (bounded) before it closes.
        async with AsyncClient(base_url, api_key=api_key, **opts) as client:
            spec_call = asyncio.ensure_future(
                rewards_async(client, list(items.values()), plan.scoring.mode, plan.scoring.options)
            )
            judged = await score_batch_async(
                client, plan.scoring, plain, concurrency, plan.timeout_s
            )
            left = remaining(plan.timeout_s, start, time.monotonic())
            done, _ = await asyncio.wait((spec_call,), timeout=left)
            if not done:
                spec_call.cancel()
                await asyncio.wait((spec_call,), timeout=LATE_CALL_GRACE_S)
            by_spec = spec_call.result() if done else [None] * len(items)
        judged = merged(len(samples), list(items), by_spec, judged)
        return plan.report(settle(judged, plan.on_timeout, plan.timeout_s), columns)

    return verifier_reward
