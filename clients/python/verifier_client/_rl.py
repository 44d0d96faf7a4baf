"""What the trainer hooks share: turning a trainer's sample into (question, response), one
call per group of samples that share a question and a reference (``POST /v1/score``), and what
a sample's judgment says about who decided it.

A GRPO step sends each prompt's completions together; scored as one ``/v1/score`` call they
are one job, and their judgments share the prompt's prefix in the engine. A group of one
sample, a group the service refuses (each is then sent alone, so only the refused sample is
skipped), and options ``/v1/score`` does not apply per response go through the per-sample
endpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, Final, Literal

from verifier_client import models as m
from verifier_client._client import AsyncClient, Client
from verifier_client.errors import BadRequestError, RateLimitError, ResponseValidationError

Method = Literal["outcome", "process", "compare"]
Mode = Literal["direct", "reasoning", "single_pass"]
Verifier = Literal["model", "rule", "hybrid"]
OnTimeout = Literal["none", "zero", "raise"]
Message = Mapping[str, Any]

# The service's default limits.max_documents: a larger group is sent as several calls.
MAX_GROUP: Final = 512
# method="compare": the most responses one comparison reads (pairwise in both orders: 16, so
# 240 reads; listwise: the letters A-Z).
COMPARE_GROUP: Final = {"pairwise": 16, "listwise": 26}
# Options /v1/score applies to each response as the per-sample call does. Any other option the
# per-sample request takes (early_stop, or max_eval_tokens, a budget for the whole request)
# keeps the per-sample calls. return_rationale changes no score.
GROUPED_OPTIONS: Final = (
    frozenset(m.ScoreRequest.model_fields)
    - {"question", "responses", "method", "alpha", "max_eval_tokens", "budget_policy"}
) | {"return_rationale"}
# How long cancelled late calls get to end before the client that sent them closes.
LATE_CANCEL_WAIT_S: Final = 5.0


class RewardTimeout(TimeoutError):
    """A reward call passed its ``timeout_s`` and the hook was told ``on_timeout="raise"``."""


def text_of(value: str | Sequence[Message]) -> str:
    """A plain string, or the contents of a message list joined (conversational format)."""
    if isinstance(value, str):
        return value
    return "\n".join(str(m.get("content") or "") for m in value)


def question_of(prompt: str | Sequence[Message]) -> str:
    """A plain prompt, or the last user message of a conversation."""
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if m.get("role") == "user"]
    return text_of(users[-1:] or list(prompt))


def reference_of(value: Any) -> str | None:
    """A dataset's answer as the service's ``reference``: text or a number; empty = none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"a reference is a string or a number, not {type(value).__name__}")
    text = str(value)
    return text if text.strip() else None


def check_method(method: Method, mode: Mode, verifier: Any = None) -> None:
    """Refuse, before any call, a combination the service would refuse for every sample."""
    if method != "process" and mode == "single_pass":
        raise ValueError("mode='single_pass' is a process mode; use method='process'")
    if method == "compare" and verifier in ("rule", "hybrid"):
        raise ValueError(
            f"verifier={verifier!r} with method='compare': a comparison is read by the model "
            "(the reference is shown to it); use verifier='model' or leave it unset"
        )
    if method == "process" and verifier in ("rule", "hybrid"):
        raise ValueError(
            f"verifier={verifier!r} with method='process': steps are always judged by the "
            "model (the reference is context for each); use verifier='model' or "
            "method='outcome'"
        )


def judge_fields(
    method: Method, mode: Mode, question: str, response: str, reference: str | None = None
) -> dict[str, Any]:
    """One sample's request fields (``method="compare"``: a sample alone is an outcome)."""
    check_method(method, mode)
    fields: dict[str, Any] = {"question": question, "response": response, "mode": mode}
    if reference is not None:
        fields["reference"] = reference
    return fields


@dataclass(frozen=True, slots=True)
class Judged:
    """One sample's reward and who decided it.

    ``score`` is the reward (None: the service refused the sample, or its deadline passed with
    ``on_timeout="none"``); ``model_score`` is the model's P(correct) where the model judged.
    """

    score: float | None
    decided_by_rule: bool = False
    rule_equivalent: bool | None = None
    model_score: float | None = None

    @classmethod
    def of(cls, resp: m.OutcomeResponse | m.ProcessResponse) -> Judged:
        if isinstance(resp, m.ProcessResponse):
            return cls(resp.aggregate, model_score=resp.aggregate)
        return cls._outcome(resp.score, resp.decided_by, resp.rule)

    @classmethod
    def of_result(cls, result: m.ScoreResult, method: Method) -> Judged:
        """One response of a ``/v1/score`` answer, as its per-sample call would have said."""
        if method == "process":
            return cls(result.process, model_score=result.process)
        if method == "compare":
            return cls(result.final, model_score=result.final)
        return cls._outcome(result.outcome, result.decided_by, result.rule)

    @classmethod
    def _outcome(
        cls, score: float | None, decided_by: str | None, rule: m.RuleInfo | None
    ) -> Judged:
        return cls(
            score,
            decided_by_rule=decided_by == "rule",
            rule_equivalent=None if rule is None else rule.equivalent,
            model_score=score if decided_by == "model" else None,
        )

    def logs(self) -> dict[str, float]:
        """Numbers for a trainer's logs (0 where a judge did not run or could not decide)."""
        return {
            "decided_by_rule": float(self.decided_by_rule),
            "rule_equivalent": float(bool(self.rule_equivalent)),
            "model_score": self.model_score or 0.0,
        }


EMPTY = Judged(0.0)  # an empty response earns 0 without a call
SKIPPED = Judged(None)


def on_deadline(on_timeout: OnTimeout, timeout_s: float | None) -> Judged:
    """What a sample whose call passed its deadline gets."""
    if on_timeout == "raise":
        raise RewardTimeout(f"the verifier did not answer within timeout_s={timeout_s}")
    return SKIPPED if on_timeout == "none" else EMPTY


def settle(
    judged: Sequence[Judged | None], on_timeout: OnTimeout, timeout_s: float | None
) -> list[Judged]:
    """A batch's judgments, a late sample's (None) replaced by what ``on_timeout`` says."""
    return [on_deadline(on_timeout, timeout_s) if j is None else j for j in judged]


def _refused(exc: BadRequestError) -> bool:
    """The service refused this sample itself (422, 413): skip it, do not stop training."""
    return not isinstance(exc, RateLimitError)


def judge_sync(
    client: Client,
    method: Method,
    mode: Mode,
    question: str,
    response: str,
    reference: str | None = None,
    **options: Any,
) -> Judged:
    """One sample's judgment; ``SKIPPED`` when the service refused it; 0 for an empty response."""
    if not response.strip():
        return EMPTY
    fields = {**judge_fields(method, mode, question, response, reference), **options}
    try:
        if method == "process":
            return Judged.of(client.process(**fields))
        return Judged.of(client.outcome(**fields))
    except BadRequestError as exc:
        if _refused(exc):
            return SKIPPED
        raise


async def judge_async(
    client: AsyncClient,
    method: Method,
    mode: Mode,
    question: str,
    response: str,
    reference: str | None = None,
    **options: Any,
) -> Judged:
    """The async twin of ``judge_sync``."""
    if not response.strip():
        return EMPTY
    fields = {**judge_fields(method, mode, question, response, reference), **options}
    try:
        if method == "process":
            return Judged.of(await client.process(**fields))
        return Judged.of(await client.outcome(**fields))
    except BadRequestError as exc:
        if _refused(exc):
            return SKIPPED
        raise


# --- a batch: one call per group of samples with one question and one reference -------------


@dataclass(frozen=True, slots=True)
class Sample:
    question: str
    response: str
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Group:
    """Samples with one question and one reference, scored by one call."""

    question: str
    reference: str | None
    indices: tuple[int, ...]  # the samples' positions in the batch
    responses: tuple[str, ...]


def groups_of(samples: Sequence[Sample], size: int) -> list[Group]:
    """The samples by (question, reference) in order of first appearance, at most ``size`` to
    a group; an empty response is in none (it earns 0 without a call)."""
    by_key: dict[tuple[str, str | None], list[int]] = {}
    for i, s in enumerate(samples):
        if s.response.strip():
            by_key.setdefault((s.question, s.reference), []).append(i)
    groups = []
    for (question, reference), indices in by_key.items():
        for start in range(0, len(indices), size):
            part = indices[start : start + size]
            responses = tuple(samples[i].response for i in part)
            groups.append(Group(question, reference, tuple(part), responses))
    return groups


class Scoring:
    """How a hook scores its samples: ``method``, ``mode`` and the options of every request.

    ``grouped``: one ``/v1/score`` call per group of samples sharing a question and a reference
    (it stays off when an option is one ``/v1/score`` does not apply per response); else one
    call per sample. ``method="compare"`` always groups: a group's responses are compared with
    each other (at most ``COMPARE_GROUP`` to a call); a sample alone in its group is judged
    as an outcome.
    """

    def __init__(
        self, method: Method, mode: Mode, options: dict[str, Any], *, grouped: bool = True
    ) -> None:
        check_method(method, mode, options.get("verifier"))
        self.method = method
        self.mode = mode
        self.options = options
        single = m.ProcessRequest if method == "process" else m.OutcomeRequest
        sent = set(options) & set(single.model_fields)  # the client drops the rest
        self.grouped = grouped and sent <= GROUPED_OPTIONS
        self.group_size = MAX_GROUP
        if method == "compare":
            if not grouped:
                raise ValueError("method='compare' compares a group's completions in one call")
            self.grouped = True
            spec = options.get("compare") or {}
            self.group_size = COMPARE_GROUP[spec.get("mode", "pairwise")]

    def groups(self, samples: Sequence[Sample]) -> list[Group]:
        return groups_of(samples, self.group_size if self.grouped else 1)

    def score_fields(self, group: Group) -> dict[str, Any]:
        fields: dict[str, Any] = {
            **self.options,
            "question": group.question,
            "responses": list(group.responses),
            "method": self.method,
            "mode": self.mode,
        }
        if group.reference is not None:
            fields["reference"] = group.reference
        return fields

    def judged(self, group: Group, resp: m.ScoreResponse) -> list[Judged]:
        """Each response's judgment, in the group's order (the answer's ``index``)."""
        n = len(group.responses)
        by_index = {r.index: r for r in resp.results}
        if len(resp.results) != n or set(by_index) != set(range(n)):
            raise ResponseValidationError(
                f"POST /v1/score: {len(resp.results)} results with indices "
                f"{sorted(by_index)} for {n} responses"
            )
        return [Judged.of_result(by_index[i], self.method) for i in range(n)]


def score_group_sync(client: Client, scoring: Scoring, group: Group) -> list[Judged]:
    """A group's judgments: one ``/v1/score`` call, or one per-sample call for a group of one."""
    if len(group.responses) > 1:
        try:
            return scoring.judged(group, client.score(**scoring.score_fields(group)))
        except BadRequestError as exc:
            if not _refused(exc):
                raise
            # One response the service refuses refuses its group: each alone, so only the
            # refused ones are skipped (in this call's slot: at most N calls in flight).
    return [
        judge_sync(
            client,
            scoring.method,
            scoring.mode,
            group.question,
            r,
            group.reference,
            **scoring.options,
        )
        for r in group.responses
    ]


async def score_group_async(client: AsyncClient, scoring: Scoring, group: Group) -> list[Judged]:
    """The async twin of ``score_group_sync``."""
    if len(group.responses) > 1:
        try:
            return scoring.judged(group, await client.score(**scoring.score_fields(group)))
        except BadRequestError as exc:
            if not _refused(exc):
                raise
    return [
        await judge_async(
            client,
            scoring.method,
            scoring.mode,
            group.question,
            r,
            group.reference,
            **scoring.options,
        )
        for r in group.responses
    ]


def _scatter(
    n: int, groups: Sequence[Group], results: Sequence[list[Judged] | None]
) -> list[Judged | None]:
    """Each group's judgments at its samples' positions; None for a late group's samples;
    ``EMPTY`` for an empty response (in no group)."""
    out: list[Judged | None] = [EMPTY] * n
    for group, judged in zip(groups, results, strict=True):
        values = judged if judged is not None else [None] * len(group.indices)
        for i, value in zip(group.indices, values, strict=True):
            out[i] = value
    return out


def score_batch_sync(
    client: Client,
    scoring: Scoring,
    pool: Executor,
    samples: Sequence[Sample],
    timeout_s: float | None,
) -> list[Judged | None]:
    """Every sample's judgment, a call per group on ``pool`` (its workers bound the calls in
    flight); None for a sample whose group was not answered within ``timeout_s``. A late call
    is left to end on its own (a thread cannot be cancelled)."""
    groups = scoring.groups(samples)
    jobs = [pool.submit(score_group_sync, client, scoring, g) for g in groups]
    wait_futures(jobs, timeout=timeout_s)
    return _scatter(len(samples), groups, [j.result() if j.done() else None for j in jobs])


async def score_batch_async(
    client: AsyncClient,
    scoring: Scoring,
    samples: Sequence[Sample],
    concurrency: int,
    timeout_s: float | None,
) -> list[Judged | None]:
    """The async twin of ``score_batch_sync``: at most ``concurrency`` calls in flight; a late
    group's call is cancelled and awaited (bounded) before this returns."""
    groups = scoring.groups(samples)
    slots = asyncio.Semaphore(concurrency)

    async def one(group: Group) -> list[Judged]:
        async with slots:
            return await score_group_async(client, scoring, group)

    tasks = [asyncio.create_task(one(g)) for g in groups]
    try:
        done: set[asyncio.Task[list[Judged]]] = set()
        if tasks:
            done, late = await asyncio.wait(tasks, timeout=timeout_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=LATE_CANCEL_WAIT_S)
    finally:
        for task in tasks:
            task.cancel()  # a no-op once done; a caller cancelled mid-batch leaves none behind
    return _scatter(len(samples), groups, [t.result() if t in done else None for t in tasks])
