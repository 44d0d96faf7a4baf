"""The job handler a worker runs, and its dispatch table from job kind to serving call.

A job's payload is its kind's request JSON; its result body is the response JSON. The API
process validates and plans; this is where a job meets scoring and the engine. The worker
(``service.queue.worker``) knows only "a handler turns a job into a result"; the composition
root (``service.app``) hands it a :class:`JobRunner`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from service.engine.adapters import current_adapter
from service.errors import InvalidRequest, ServiceError
from service.kinds import JobKind
from service.ops.telemetry import WorkerMetrics
from service.protocol.base import Metered, adapter_of
from service.protocol.jobs import JOBS, for_every_kind
from service.queue.base import Job, JobResult
from service.serving.context import current_tenant, job_arrival
from service.serving.services import Services

# How a kind's request runs; the request is the kind's JobSpec.request, validated.
Run = Callable[[Services, Any], Awaitable[Metered]]

RUNS: Final[Mapping[JobKind, Run]] = for_every_kind(
    {
        "outcome": lambda s, r: s.outcome.judge(r),
        "process": lambda s, r: s.process.judge(r),
        "split": lambda s, r: s.split.handle(r),
        "score": lambda s, r: s.score.score(r),
        "rerank": lambda s, r: s.score.rerank(r),
        "mcq_answer": lambda s, r: s.mcq.answer(r),
        "mcq_batch": lambda s, r: s.mcq.answer_batch(r),
        "mcq_calibrate": lambda s, r: s.mcq.calibrate(r),
        "calibrate": lambda s, r: s.calibrate.fit(r),
        "mcq_audit": lambda s, r: s.audit.run(r),
        "mcq_popmcq": lambda s, r: s.popmcq.run(r),
        "reward": lambda s, r: s.reward.reward(r),
        "classify": lambda s, r: s.pooling.classify(r),
        "pooling": lambda s, r: s.pooling.pooling(r),
        "decision": lambda s, r: s.decisions.decide(r),
        "compare": lambda s, r: s.compare.compare(r),
        "rewards": lambda s, r: s.rewards.rewards(r),
        "run_code": lambda s, r: s.code.run_code(r),
    },
    "handler",
)


class JobRunner:
    """The worker's handler: JSON payload in, JSON body out."""

    def __init__(
        self,
        services: Services,
        metrics: WorkerMetrics | None = None,
        crash_kind: JobKind | None = None,
    ) -> None:
        self._services = services
        self._metrics = metrics
        self._crash_kind = crash_kind

    async def __call__(self, job: Job) -> JobResult:
        if job.kind == self._crash_kind:
            # Fault injection (tests only): die like a segfaulting worker, mid-batch.
            os._exit(70)
        if self._metrics is not None:
            self._metrics.queue_wait.observe(max(0.0, time.time() - job.enqueued_at))
        # Cached judgments and calibrations are scoped by tenant (each job has its own task).
        current_tenant.set(job.tenant)
        job_arrival.set(job.enqueued_at)
        try:
            req = JOBS[job.kind].request.model_validate(job.payload)
        except ValidationError as exc:
            return JobResult.from_error(InvalidRequest(f"invalid job payload: {exc}"))
        # The adapter every engine request of this job runs under (engine.adapters).
        current_adapter.set(adapter_of(getattr(req, "model", None)))
        try:
            resp = await RUNS[job.kind](self._services, req)
        except ServiceError as exc:
            return JobResult.from_error(exc)
        return JobResult.success(resp.model_dump(mode="json"))
