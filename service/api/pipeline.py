"""The one path every model-using request takes.

Routes ``return await job.run("<kind>", req)`` with a :data:`JobDep`: check the limits the
request's model declares (:func:`service.api.limits.enforce`), plan the token budget, reserve
the tenant's quota, submit a job to the queue, wait for its result, settle the quota and
record what it cost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from math import inf
from typing import Annotated

from fastapi import Depends, Request, Response
from pydantic import BaseModel

import service.serving.budget as budget
from service.api.deps import AppState, QueueDep, StateDep, tenant_name, tenant_of
from service.api.disconnect import race_disconnect
from service.api.limits import enforce
from service.config import Settings
from service.errors import (
    BudgetTooSmall,
    ClientDisconnected,
    ConcurrencyLimited,
    InvalidRequest,
    ModelNotFound,
    Overloaded,
)
from service.kinds import JobKind
from service.protocol import BudgetInfo, Metered
from service.protocol.base import adapter_id, adapter_of
from service.protocol.calibrate import ProbabilityCalibration
from service.protocol.jobs import JOBS
from service.queue.base import Job, JobQueue, new_job_id
from service.stores import calibrations, concurrency, probability_calibrations
from service.stores.auth import Reservation, reserve, settle

logger = logging.getLogger(__name__)

# How long a request whose client left waits for its job's worker to report what it spent
# (the worker notices the cancel within about 0.2 s and aborts its engine requests at once).
SETTLE_WAIT_S = 2.0
SETTLE_POLL_S = 0.1


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


async def spent_after_disconnect(
    queue: JobQueue, tenant: str, job_id: str, wait_s: float = SETTLE_WAIT_S
) -> int | None:
    """The tokens a job cancelled by its caller's disconnect spent, as its worker answered;
    None when no counted answer arrived within ``wait_s`` (the job never ran, its worker is
    older or slow, or the queue is down)."""

    async def poll() -> int | None:
        while True:
            result = await queue.lookup(tenant, job_id)
            if result is not None:
                return result.spent_tokens
            await asyncio.sleep(SETTLE_POLL_S)

    task = asyncio.ensure_future(poll())
    # A plain wait, not wait_for: a lookup that swallows its cancellation is left behind.
    done, _ = await asyncio.wait((task,), timeout=wait_s)
    if not done:
        task.cancel()
        return None
    if task.cancelled() or task.exception() is not None:
        logger.warning("could not read what job %s spent: %r", job_id, task.exception())
        return None
    return task.result()


def served_model(settings: Settings, model: str | None) -> str:
    """The id of what answers a request naming ``model``: a served model, or
    '<served>:<adapter>' for one of its LoRA adapters. With one model (no ``models``), a name
    without ':' is that model whatever it says, as OpenAI-shaped clients send their own names;
    with ``models``, and for any name with ':', a name not served is a 404 naming what is."""
    if model is None or (not settings.models and adapter_of(model) is None):
        return settings.model_name
    if model in settings.model_names:  # no adapter: no engine settings to build per request
        return model
    ids = served_ids(settings)
    if model not in ids:
        raise ModelNotFound(f"no model {model!r} here; served: {', '.join(ids)}")
    return model


def served_ids(settings: Settings) -> list[str]:
    """Each served model's id, each followed by its adapters' ('<served>:<adapter>')."""
    ids = []
    for name, one in settings.by_model().items():
        adapters = sorted(one.engine.lora_adapters)
        ids += [name, *(adapter_id(name, adapter) for adapter in adapters)]
    return ids


def _endpoint(request: Request) -> str:
    """The metric label: the matched route's template (never the raw path: bounded labels)."""
    return str(request.scope["route"].path)


@dataclass
class JobCall:
    """What a route needs to run a job: the app state, its request and response (each job goes
    to the queue of the model that answers it, ``AppState.queue_of``)."""

    state: AppState
    request: Request
    response: Response

    async def check_calibration(
        self, model: str | None, calibration_id: str | None, method: str, ks: Sequence[int]
    ) -> None:
        """Refuse a missing calibration, or one fitted for another method, option count or
        model, before anything is queued or charged (the worker checks again)."""
        await calibrations.fitting(
            self.state.calibrations,
            tenant_name(self.request),
            calibration_id,
            method,
            ks,
            served_model(self.state.settings, model),
        )

    async def probability_calibration(
        self, model: str | None, calibration_id: str | None, target: str, mode: str
    ) -> ProbabilityCalibration | None:
        """The probability calibration this request's answer goes through (named, the
        tenant's default, or none); a named one that is missing or fitted for another
        target, mode or model is refused before anything is queued or charged."""
        return await probability_calibrations.applicable(
            self.state.probability_calibrations,
            tenant_name(self.request),
            calibration_id,
            target,
            mode,
            served_model(self.state.settings, model),
        )

    @asynccontextmanager
    async def reward_slots(self, items: int) -> AsyncIterator[None]:
        """Hold ``items`` of the tenant's reward slots while the body runs (a 429 at the cap);
        the answer carries the cap and the tenant's items in flight."""
        state = self.state
        limit = state.settings.reward.max_concurrent_items
        if limit == 0 or items == 0:
            yield
            return
        tenant = tenant_name(self.request)
        if items > limit:
            raise InvalidRequest(
                f"this call has {items} items and a tenant may have at most {limit} in flight "
                "(VERIFIER_REWARD__MAX_CONCURRENT_ITEMS); split it into smaller calls"
            )
        label = state.metrics.tenant_label(tenant)
        try:
            lease = await state.reward_slots.acquire(tenant, items, limit)
        except ConcurrencyLimited:
            state.metrics.reward_concurrency_refused.labels(label).inc()
            raise
        gauge = state.metrics.reward_items_in_flight.labels(label)
        gauge.inc(items)
        self.response.headers.update(concurrency.headers(limit, lease.in_use))
        try:
            yield
        finally:
            gauge.dec(items)
            await state.reward_slots.release(lease)

    def admit(self, req: BaseModel) -> str:
        """Refuse a request for a model not served (404) or over a limit (413 or 422) before
        anything is planned or queued; the name of the model that answers it."""
        served = served_model(self.state.settings, getattr(req, "model", None))
        enforce(req, self.state.settings.limits)
        return served.partition(":")[0]

    async def run(
        self,
        kind: JobKind,
        req: BaseModel,
        *,
        endpoint: str | None = None,
        timeout_s: float | None = None,
    ) -> Metered:
        """Check limits, plan, reserve quota, submit, wait, settle, record; the response carries
        budget info.

        ``endpoint`` is the metric label; the route's template unless given (aliases of one
        endpoint share one label). ``timeout_s`` shortens the job's deadline below the request
        timeout (a job not answered by then is a ``DeadlineExceeded``).
        """
        model = self.admit(req)
        queue = self.state.queue_of(model)
        state, request, response = self.state, self.request, self.response
        record = tenant_of(request)
        tenant = tenant_name(request)
        plan = _plan(state, kind, req, tenant)
        estimate = plan.estimate.total
        prefix = state.settings.redis.prefix
        reservation: Reservation | None = None
        if record is not None and state.redis is not None:
            reservation = await reserve(state.redis, prefix, record, estimate)
        state.metrics.budget(tenant, "granted").inc(estimate)
        job = Job(
            id=new_job_id(),
            kind=kind,
            payload=plan.request.model_dump(mode="json"),
            deadline=time.time() + min(state.settings.limits.request_timeout_s, timeout_s or inf),
            tenant=tenant,
            est_tokens=estimate,
        )
        response.headers["X-Job-Id"] = job.id
        spent = 0
        try:
            submit = queue.submit(job, idempotency_key=request.headers.get("idempotency-key"))
            result = await race_disconnect(request.receive, submit)
            result.raise_for_error()
            resp = JOBS[kind].response.model_validate(result.body)
            # A replay ran nothing: its usage is the first request's, already charged.
            spent = 0 if result.replayed else resp.usage.total_tokens
        except Overloaded:
            state.metrics.queue_full.labels(model).inc()
            raise
        except ClientDisconnected:
            # The worker answers the aborted job with what it spent; without that answer in
            # time, charge the estimate rather than nothing, so hanging up never saves quota.
            counted = await spent_after_disconnect(queue, tenant, job.id)
            spent = estimate if counted is None else counted
            state.metrics.jobs_cancelled.labels("client_disconnect").inc()
            state.metrics.budget(tenant, "spent").inc(spent)
            raise
        finally:
            if reservation is not None and state.redis is not None:
                await settle(state.redis, prefix, reservation, spent)
        state.metrics.budget(tenant, "spent").inc(spent)
        if result.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        else:
            label = endpoint or _endpoint(request)
            state.metrics.record_usage(label, str(getattr(resp, "model", "")), resp.usage)
        limit = getattr(plan.request, "max_eval_tokens", None)
        if limit is not None:
            resp.budget = BudgetInfo(
                max_eval_tokens=limit, estimate=estimate, degraded=plan.degraded, note=plan.note
            )
        return resp


async def job_call(
    request: Request, response: Response, state: StateDep, _ready: QueueDep
) -> JobCall:
    """The route's JobCall; ``QueueDep`` refuses (503) until the service is ready."""
    return JobCall(state, request, response)


JobDep = Annotated[JobCall, Depends(job_call)]
