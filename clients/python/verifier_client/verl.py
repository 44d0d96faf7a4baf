"""A ``compute_score`` for verl's custom reward function.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)``
and takes a float or a dict with ``"score"``; async functions are awaited (verl's documented
way to reach a remote verifier). Configure it with

    reward.custom_reward_function.path=<site-packages>/verifier_client/verl.py
    reward.custom_reward_function.name=compute_score
    +reward.reward_kwargs.base_url=http://verifier:8000

The question is read from ``extra_info["question"]`` (verl's GSM8K/MATH preprocessing puts it
there), else ``extra_info["prompt"]``. ``ground_truth`` is the reference: the answer is checked
by rule where the rule decides (no engine call), by the model otherwise
(``+reward.reward_kwargs.verifier=model`` makes the model judge every sample with the reference
in its prompt; ``use_reference=False`` ignores it).

verl calls ``compute_score`` once per sample, so the connections are kept, one client per
event loop and service. ``await aclose()`` closes the running loop's clients; call it before
that loop ends (a loop that ends first leaves their sockets to the garbage collector).

verl's batch reward manager (``reward_manager`` ``batch``) calls a function once per batch,
``f(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=..., **reward_kwargs)``,
and takes a list back: ``compute_score_batch`` sends the samples sharing a question and a
reference as one ``POST /v1/score`` call (one job, the question's prefix shared in the engine).
It is synchronous, as that manager calls it; its connections are kept, one client per service,
and ``close()`` closes them.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from verifier_client._client import AsyncClient, Client
from verifier_client._rl import (
    Judged,
    Method,
    Mode,
    OnTimeout,
    RewardTimeout,
    Sample,
    Scoring,
    Verifier,
    check_method,
    judge_async,
    on_deadline,
    question_of,
    reference_of,
    score_batch_sync,
)
from verifier_client._specs import Specs, remaining, rewards_async, rewards_sync, spec_fields

__all__ = ["RewardTimeout", "aclose", "close", "compute_score", "compute_score_batch"]

DEFAULT_URL = "http://127.0.0.1:8000"
# Keyed by the loop itself, weakly: a new loop that reuses a dead one's id() must not get the
# dead loop's client.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncClient]
] = weakref.WeakKeyDictionary()
# compute_score_batch's clients, one per service (a sync client serves every thread).
_sync_clients: dict[tuple[str, str | None], Client] = {}
_sync_lock = threading.Lock()


def _client(base_url: str, api_key: str | None) -> AsyncClient:
    """One client per event loop and service."""
    mine = _clients.setdefault(asyncio.get_running_loop(), {})
    client = mine.get((base_url, api_key))
    if client is None:
        client = mine[(base_url, api_key)] = AsyncClient(base_url, api_key=api_key)
    return client


async def aclose() -> None:
    """Close the running loop's clients (the next ``compute_score`` opens new ones)."""
    mine = _clients.pop(asyncio.get_running_loop(), {})
    for client in mine.values():
        await client.aclose()


def close() -> None:
    """Close ``compute_score_batch``'s clients (the next call opens new ones)."""
    with _sync_lock:
        clients = list(_sync_clients.values())
        _sync_clients.clear()
    for client in clients:
        client.close()


def _sync_client(base_url: str, api_key: str | None) -> Client:
    with _sync_lock:
        client = _sync_clients.get((base_url, api_key))
        if client is None:
            client = _sync_clients[(base_url, api_key)] = Client(base_url, api_key=api_key)
        return client


def _question(extra_info: dict[str, Any] | None) -> str:
    info = extra_info or {}
    for key in ("question", "prompt"):
        value = info.get(key)
        if value:
            return question_of(value)
    raise ValueError(
        "verifier_client.verl.compute_score needs the question in extra_info['question'] (or "
        "extra_info['prompt']): add it in the dataset's preprocessing"
    )


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    base_url: str = DEFAULT_URL,
    api_key: str | None = None,
    mode: Mode = "direct",
    method: Method = "outcome",
    verifier: Verifier | None = None,
    use_reference: bool = True,
    timeout_s: float | None = None,
    on_timeout: OnTimeout = "none",
    specs: Specs | None = None,
    **judge_options: Any,
) -> dict[str, Any]:
    """``{"score", "judged", "decided_by_rule", "rule_equivalent", "model_score"}``.

    ``specs`` maps a ``data_source`` to its verification spec (``{"gsm8k": {"type":
    "math"}, "arc": {"type": "choice"}}``, the ground truth filled in as its gold value); a
    ground truth that is a spec itself is used as it is. Those samples go through
    ``/v1/rewards``, each by its own check.

    verl needs a number for every sample: a sample the service refused, or one past
    ``timeout_s`` with ``on_timeout`` "none" or "zero", scores 0 with ``judged`` 0;
    ``on_timeout="raise"`` raises ``RewardTimeout``. verl logs the other keys per sample.
    ``judge_options`` go into every request (e.g. ``calibration_id="pcal_..."``: the score
    through a probability calibration of this tenant, docs/api.md).
    """
    question = _question(extra_info)
    client = _client(base_url, api_key)
    fields = spec_fields(ground_truth, data_source, specs)
    if fields is not None:
        item = {"prompt": question, "response": solution_str, **fields}
        try:
            done = await asyncio.wait_for(
                rewards_async(client, [item], mode, judge_options), timeout_s
            )
        except TimeoutError:
            return _late(on_timeout, timeout_s)
        return _result(done[0])  # timed out or failed in the service: 0, judged 0
    reference = reference_of(ground_truth) if use_reference else None
    if verifier is not None:
        judge_options["verifier"] = verifier
    check_method(method, mode, judge_options.get("verifier"))
    call = judge_async(client, method, mode, question, solution_str, reference, **judge_options)
    try:
        return _result(await asyncio.wait_for(call, timeout_s))
    except TimeoutError:
        return _late(on_timeout, timeout_s)


def _result(judged: Judged, late: bool = False) -> dict[str, Any]:
    return {
        "score": 0.0 if judged.score is None else judged.score,
        "judged": float(judged.score is not None and not late),
        **judged.logs(),
    }


def _late(on_timeout: OnTimeout, timeout_s: float | None) -> dict[str, Any]:
    """A sample past its deadline: 0 and not judged, or ``RewardTimeout``."""
    return _result(on_deadline(on_timeout, timeout_s), late=True)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    *,
    base_url: str = DEFAULT_URL,
    api_key: str | None = None,
    mode: Mode = "direct",
    method: Method = "outcome",
    verifier: Verifier | None = None,
    use_reference: bool = True,
    timeout_s: float | None = None,
    on_timeout: OnTimeout = "none",
    concurrency: int = 16,
    specs: Specs | None = None,
    **judge_options: Any,
) -> list[dict[str, Any]]:
    """``compute_score``'s dict for every sample of a batch, in order, for verl's batch reward
    manager; one request per group of samples sharing a question and a reference, at most
    ``concurrency`` in flight. ``timeout_s`` bounds the whole batch: the samples of a group
    not answered by then score as ``on_timeout`` says (0 with ``judged`` 0, or
    ``RewardTimeout``). ``specs`` as for ``compute_score``: those samples go as one
    ``/v1/rewards`` call."""
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: at least one request must be in flight")
    if verifier is not None:
        judge_options["verifier"] = verifier
    scoring = Scoring(method, mode, judge_options)
    infos = [None] * len(solution_strs) if extra_infos is None else list(extra_infos)
    fields = [spec_fields(t, d, specs) for t, d in zip(ground_truths, data_sources, strict=True)]
    items = {
        i: {"prompt": _question(info), "response": solution, **f}
        for i, (solution, info, f) in enumerate(zip(solution_strs, infos, fields, strict=True))
        if f is not None
    }
    plain = [i for i in range(len(solution_strs)) if i not in items]
    samples = [
        Sample(
            _question(infos[i]),
            solution_strs[i],
            reference_of(ground_truths[i]) if use_reference else None,
        )
        for i in plain
    ]
    client = _sync_client(base_url, api_key)
    start = time.monotonic()
    # A pool per batch: a late call keeps its thread until it ends, never the next batch's.
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verifier-verl")
    try:
        by_spec = pool.submit(rewards_sync, client, list(items.values()), mode, judge_options)
        judged: list[Judged | None] = [None] * len(solution_strs)
        for i, j in zip(
            plain, score_batch_sync(client, scoring, pool, samples, timeout_s), strict=True
        ):
            judged[i] = j
        try:
            left = remaining(timeout_s, start, time.monotonic())
            spec_judged: list[Judged | None] = list(by_spec.result(timeout=left))
        except FutureTimeout:
            spec_judged = [None] * len(items)
        for i, j in zip(items, spec_judged, strict=True):
            judged[i] = j
    finally:
        pool.shutdown(wait=False)
    return [_late(on_timeout, timeout_s) if j is None else _result(j) for j in judged]
