"""Typed dependencies and the one path every model-using request takes.

Routes validate and check limits; ``run_job`` then authorises the tenant's quota, plans the
token budget, submits a job to the queue, waits for its result and records what it cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, Request, Response
from pydantic import BaseModel

import service.budget as budget
from service.auth import KeyRecord, Reservation, reserve, settle
from service.calibrations import CalibrationStore, MemoryCalibrations
from service.config import LimitSettings, Settings
from service.errors import BudgetTooSmall, InvalidRequest, NotReady, PayloadTooLarge
from service.protocol import BudgetInfo, JudgeOptions, Usage
from service.queue.base import Job, JobQueue, new_job_id
from service.queue.kinds import JobKind
from service.queue.worker import Worker
from service.serving.services import Services
from service.telemetry import Metrics

R = TypeVar("R", bound=BaseModel)


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    status: Literal["starting", "ready", "failed"] = "starting"
    detail: str | None = None
    queue: JobQueue | None = None
    services: Services | None = None  # only where this process hosts a worker
    worker: Worker | None = None
    redis: Any = None  # auth and quota client (redis.asyncio.Redis) when Redis is configured
    calibrations: CalibrationStore = field(default_factory=MemoryCalibrations)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # ends the helper loops
    exit_code: int = 0  # 1 once the engine died: the process exits 1 for its supervisor
    request_exit: Callable[[], None] | None = None  # set by `verifier serve`: stop the server


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.svc
    return state


StateDep = Annotated[AppState, Depends(get_state)]


def get_queue(state: StateDep) -> JobQueue:
    if state.queue is None or state.status != "ready":
        detail = f": {state.detail}" if state.detail else ""
        raise NotReady(f"the service is {state.status}{detail}; retry when GET /ready says ready")
    return state.queue


QueueDep = Annotated[JobQueue, Depends(get_queue)]


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


def tenant_of(request: Request) -> KeyRecord | None:
    """The API key record the auth middleware attached (None with auth off)."""
    record: KeyRecord | None = getattr(request.state, "api_key", None)
    return record


def tenant_name(request: Request) -> str:
    """The tenant of the request's key ("default" with auth off)."""
    record = tenant_of(request)
    return record.tenant if record else "default"


def _plan(state: AppState, kind: JobKind, req: BaseModel, tenant: str) -> budget.BudgetPlan:
    try:
        plan = budget.plan(kind, req)
    except BudgetTooSmall as exc:
        state.metrics.budget(tenant, "refused").inc(exc.estimate)
        state.metrics.decision(tenant, "refused").inc()
        raise
    if plan.degraded:
        state.metrics.decision(tenant, "degraded").inc()
    return plan


async def run_job(
    state: AppState,
    queue: JobQueue,
    request: Request,
    response: Response,
    kind: JobKind,
    req: BaseModel,
    response_type: type[R],
    endpoint: str,
) -> R:
    """Plan, reserve quota, submit, wait, settle, record; the response carries budget info."""
    record = tenant_of(request)
    tenant = tenant_name(request)
    plan = _plan(state, kind, req, tenant)
    estimate = plan.estimate.total
    reservation: Reservation | None = None
    if record is not None and state.redis is not None:
        reservation = await reserve(
            state.redis, state.settings.queue.redis_prefix, record, estimate
        )
    state.metrics.budget(tenant, "granted").inc(estimate)
    job = Job(
        id=new_job_id(),
        kind=kind,
        payload=plan.request.model_dump(mode="json"),
        deadline=time.time() + state.settings.limits.request_timeout_s,
        tenant=tenant,
        est_tokens=estimate,
    )
    response.headers["X-Job-Id"] = job.id
    spent = 0
    try:
        result = await queue.submit(job, idempotency_key=request.headers.get("idempotency-key"))
        result.raise_for_error()
        resp = response_type.model_validate(result.body)
        usage: Usage = resp.usage  # type: ignore[attr-defined]
        # A replay ran nothing: its usage is the first request's, already charged and counted.
        spent = 0 if result.replayed else usage.total_tokens
    finally:
        if reservation is not None:
            await settle(state.redis, state.settings.queue.redis_prefix, reservation, spent)
    state.metrics.budget(tenant, "spent").inc(spent)
    if result.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    else:
        state.metrics.record_usage(endpoint, str(getattr(resp, "model", "")), usage)
    limit = getattr(plan.request, "max_eval_tokens", None)
    if limit is not None:
        resp.budget = BudgetInfo(  # type: ignore[attr-defined]
            max_eval_tokens=limit, estimate=estimate, degraded=plan.degraded, note=plan.note
        )
    return resp
