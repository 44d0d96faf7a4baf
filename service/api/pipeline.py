"""The one path every model-using request takes.

Routes validate and check limits; ``run_job`` then plans the token budget, reserves the
tenant's quota, submits a job to the queue, waits for its result, settles the quota and records
what it cost.
"""

from __future__ import annotations

import time
from typing import TypeVar

from fastapi import Request, Response
from pydantic import BaseModel

import service.serving.budget as budget
from service.api.deps import AppState, tenant_name, tenant_of
from service.errors import BudgetTooSmall
from service.protocol import BudgetInfo, Usage
from service.protocol.jobs import JobKind
from service.queue.base import Job, JobQueue, new_job_id
from service.stores.auth import Reservation, reserve, settle

R = TypeVar("R", bound=BaseModel)


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
