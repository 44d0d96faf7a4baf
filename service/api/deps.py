"""Typed dependencies: routes reach what the lifespan built only through these."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Annotated, Literal, TypeVar

from fastapi import Depends, Request

from service.config import LimitSettings, Settings
from service.engine.base import Engine
from service.errors import DeadlineExceeded, InvalidRequest, NotReady, PayloadTooLarge
from service.protocol import JudgeOptions, Usage
from service.serving.outcome import OutcomeServing
from service.serving.process import ProcessServing, SplitServing
from service.serving.score import ScoreServing
from service.telemetry import Metrics

T = TypeVar("T")


@dataclass
class Services:
    """What exists once the engine answered its probe."""

    engine: Engine
    outcome: OutcomeServing
    split: SplitServing
    process: ProcessServing
    score: ScoreServing

    @classmethod
    def build(cls, engine: Engine, model_name: str) -> Services:
        outcome = OutcomeServing(engine, model_name)
        split = SplitServing(engine)
        process = ProcessServing(engine, split, model_name)
        score = ScoreServing(outcome, process, model_name)
        return cls(engine=engine, outcome=outcome, split=split, process=process, score=score)


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    status: Literal["starting", "ready", "failed"] = "starting"
    detail: str | None = None
    services: Services | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.svc
    return state


StateDep = Annotated[AppState, Depends(get_state)]


def get_services(state: StateDep) -> Services:
    if state.services is None or state.status != "ready":
        detail = f": {state.detail}" if state.detail else ""
        raise NotReady(f"the engine is {state.status}{detail}; retry when GET /ready says ready")
    return state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def check_texts(limits: LimitSettings, **texts: str) -> None:
    """413 for any text over the configured size, naming the field and the setting."""
    for name, text in texts.items():
        if len(text) > limits.max_text_chars:
            raise PayloadTooLarge(
                f"{name} has {len(text)} characters, over the limit of {limits.max_text_chars} "
                "(VERIFIER_LIMITS__MAX_TEXT_CHARS)"
            )


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
    if options.samples > limits.max_samples:
        raise InvalidRequest(
            f"samples={options.samples} is over the limit of {limits.max_samples} "
            "(VERIFIER_LIMITS__MAX_SAMPLES)"
        )
    if options.reasoning_tokens > limits.max_reasoning_tokens:
        raise InvalidRequest(
            f"reasoning_tokens={options.reasoning_tokens} is over the limit of "
            f"{limits.max_reasoning_tokens} (VERIFIER_LIMITS__MAX_REASONING_TOKENS)"
        )


def record(state: AppState, endpoint: str, model: str, usage: Usage) -> None:
    state.metrics.record_usage(endpoint, model, usage)


async def with_deadline(work: Awaitable[T], seconds: float) -> T:
    """Run ``work`` or answer 504; cancelling it aborts the engine requests it made."""
    try:
        return await asyncio.wait_for(work, timeout=seconds)
    except TimeoutError as exc:
        raise DeadlineExceeded(f"no result within {seconds:.0f} s") from exc
