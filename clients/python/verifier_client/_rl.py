"""What the trainer hooks share: turning a trainer's sample into (question, response), and
one judgment call per sample."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from verifier_client._client import AsyncClient, Client
from verifier_client.errors import BadRequestError, RateLimitError

Method = Literal["outcome", "process"]
Mode = Literal["direct", "reasoning", "single_pass"]
Message = Mapping[str, Any]


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


def judge_fields(method: Method, mode: Mode, question: str, response: str) -> dict[str, Any]:
    if method != "process" and mode == "single_pass":
        raise ValueError("mode='single_pass' is a process mode; use method='process'")
    return {"question": question, "response": response, "mode": mode}


def _refused(exc: BadRequestError) -> bool:
    """The service refused this sample itself (422, 413): skip it, do not stop training."""
    return not isinstance(exc, RateLimitError)


def score_sync(
    client: Client, method: Method, mode: Mode, question: str, response: str, **options: Any
) -> float | None:
    """P(correct) of one sample; None when the service refused it; 0 for an empty response."""
    if not response.strip():
        return 0.0
    fields = {**judge_fields(method, mode, question, response), **options}
    try:
        if method == "process":
            return client.process(**fields).aggregate
        return client.outcome(**fields).score
    except BadRequestError as exc:
        if _refused(exc):
            return None
        raise


async def score_async(
    client: AsyncClient,
    method: Method,
    mode: Mode,
    question: str,
    response: str,
    **options: Any,
) -> float | None:
    """The async twin of ``score_sync``."""
    if not response.strip():
        return 0.0
    fields = {**judge_fields(method, mode, question, response), **options}
    try:
        if method == "process":
            return (await client.process(**fields)).aggregate
        return (await client.outcome(**fields)).score
    except BadRequestError as exc:
        if _refused(exc):
            return None
        raise
