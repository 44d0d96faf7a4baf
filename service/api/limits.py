"""Request limits checked before a job is queued: sizes are 413, counts and options 422."""

from __future__ import annotations

from service.config import LimitSettings
from service.errors import InvalidRequest, PayloadTooLarge
from service.protocol import JudgeOptions, ScoreOptions
from service.protocol.judge import ReferenceOptions


def check_texts(limits: LimitSettings, **texts: str) -> None:
    """413 for any text over the configured size, naming the field and the setting."""
    for name, text in texts.items():
        if len(text) > limits.max_text_chars:
            raise PayloadTooLarge(
                f"{name} has {len(text)} characters, over the limit of {limits.max_text_chars} "
                "(VERIFIER_LIMITS__MAX_TEXT_CHARS)"
            )


def check_reference_texts(limits: LimitSettings, **texts: str | None) -> None:
    """A reference or criteria over the text limit is a 422 naming the field (a reference is
    refused as invalid, not as a large payload: it is one field of a judging request)."""
    for name, text in texts.items():
        if text is not None and len(text) > limits.max_text_chars:
            raise InvalidRequest(
                f"{name} has {len(text)} characters, over the limit of {limits.max_text_chars} "
                "(VERIFIER_LIMITS__MAX_TEXT_CHARS); send the final answer or a shorter solution"
            )


def check_reference(limits: LimitSettings, req: ReferenceOptions) -> None:
    check_reference_texts(limits, reference=req.reference, criteria=req.criteria)


def check_many(limits: LimitSettings, name: str, texts: list[str]) -> None:
    check_texts(limits, **{f"{name}[{i}]": t for i, t in enumerate(texts)})


def check_counts(limits: LimitSettings, *, documents: int = 0, max_steps: int = 0) -> None:
    if documents > limits.max_documents:
        raise InvalidRequest(
            f"{documents} documents, over the limit of {limits.max_documents} "
            "(VERIFIER_LIMITS__MAX_DOCUMENTS); send them in several requests"
        )
    if max_steps > limits.max_steps:
        raise InvalidRequest(
            f"max_steps={max_steps} or that many steps is over the limit of {limits.max_steps} "
            "(VERIFIER_LIMITS__MAX_STEPS)"
        )


def check_judge_options(limits: LimitSettings, options: JudgeOptions) -> None:
    check_samples(limits, options.samples)
    check_reasoning_tokens(limits, options.reasoning_tokens)


def check_samples(limits: LimitSettings, samples: int) -> None:
    if samples > limits.max_samples:
        raise InvalidRequest(
            f"samples={samples} is over the limit of {limits.max_samples} "
            "(VERIFIER_LIMITS__MAX_SAMPLES)"
        )


def check_reasoning_tokens(limits: LimitSettings, reasoning_tokens: int) -> None:
    if reasoning_tokens > limits.max_reasoning_tokens:
        raise InvalidRequest(
            f"reasoning_tokens={reasoning_tokens} is over the limit of "
            f"{limits.max_reasoning_tokens} (VERIFIER_LIMITS__MAX_REASONING_TOKENS)"
        )


def check_documents(
    limits: LimitSettings, question: str, texts: list[str], opts: ScoreOptions
) -> None:
    """The checks of /v1/score and the rerank routes: many documents under one question."""
    check_counts(limits, documents=len(texts), max_steps=opts.max_steps)
    check_texts(limits, question=question)
    check_many(limits, "documents", texts)
    check_reference(limits, opts)
    check_judge_options(limits, opts)
