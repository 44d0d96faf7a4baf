"""The job handler a worker runs, and its dispatch table from job kind to serving call.

A job's payload is its kind's request JSON; its result body is the response JSON. The API
process validates and plans; this is where a job meets scoring and the engine. The worker
(``service.queue.worker``) knows only "a handler turns a job into a result"; the composition
root (``service.app``) hands it a :class:`JobRunner`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from service.errors import InvalidRequest, ServiceError
from service.ops.telemetry import Metrics
from service.protocol import (
    OutcomeRequest,
    ProcessRequest,
    RerankRequest,
    ScoreRequest,
    SplitRequest,
)
from service.protocol.audit import AuditRequest, PopMCQRequest
from service.protocol.jobs import JobKind
from service.protocol.mcq import CalibrationRequest, MCQAnswerRequest, MCQBatchRequest
from service.protocol.reward import RewardRequest
from service.queue.base import Job, JobResult
from service.serving.context import current_tenant
from service.serving.services import Services

Route = tuple[type[BaseModel], Callable[[Services, Any], Awaitable[BaseModel]]]

# kind -> (request model, how to run it); every JobKind, no other (tests/unit/test_job_kinds.py).
ROUTES: Final[dict[JobKind, Route]] = {
    "outcome": (OutcomeRequest, lambda s, r: s.outcome.judge(r)),
    "process": (ProcessRequest, lambda s, r: s.process.judge(r)),
    "split": (SplitRequest, lambda s, r: s.split.handle(r)),
    "score": (ScoreRequest, lambda s, r: s.score.score(r)),
    "rerank": (RerankRequest, lambda s, r: s.score.rerank(r)),
    "mcq_answer": (MCQAnswerRequest, lambda s, r: s.mcq.answer(r)),
    "mcq_batch": (MCQBatchRequest, lambda s, r: s.mcq.answer_batch(r)),
    "mcq_calibrate": (CalibrationRequest, lambda s, r: s.mcq.calibrate(r)),
    "mcq_audit": (AuditRequest, lambda s, r: s.audit.run(r)),
    "mcq_popmcq": (PopMCQRequest, lambda s, r: s.popmcq.run(r)),
    "reward": (RewardRequest, lambda s, r: s.reward.reward(r)),
}


class JobRunner:
    """The worker's handler: JSON payload in, JSON body out."""

    def __init__(
        self, services: Services, metrics: Metrics | None = None, crash_kind: JobKind | None = None
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
        model, run = ROUTES[job.kind]  # a Job's kind is a JobKind, and ROUTES has every one
        try:
            req = model.model_validate(job.payload)
        except ValidationError as exc:
            return JobResult.from_error(InvalidRequest(f"invalid job payload: {exc}"))
        try:
            resp = await run(self._services, req)
        except ServiceError as exc:
            return JobResult.from_error(exc)
        return JobResult.success(resp.model_dump(mode="json"))
