"""What the trainer hooks share: turning a trainer's sample into (question, response), one
judgment call per sample, and what a sample's judgment says about who decided it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from verifier_client import models as m
from verifier_client._client import AsyncClient, Client
from verifier_client.errors import BadRequestError, RateLimitError

Method = Literal["outcome", "process"]
Mode = Literal["direct", "reasoning", "single_pass"]
Verifier = Literal["model", "rule", "hybrid"]
OnTimeout = Literal["none", "zero", "raise"]
Message = Mapping[str, Any]


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


def judge_fields(
    method: Method, mode: Mode, question: str, response: str, reference: str | None = None
) -> dict[str, Any]:
    if method != "process" and mode == "single_pass":
        raise ValueError("mode='single_pass' is a process mode; use method='process'")
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
        rule = resp.rule
        return cls(
            resp.score,
            decided_by_rule=resp.decided_by == "rule",
            rule_equivalent=None if rule is None else rule.equivalent,
            model_score=resp.score if resp.decided_by == "model" else None,
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
