"""The serving objects over one engine, and the job handler a worker runs.

A job's payload is the request JSON; its result body is the response JSON. The API process
validates and plans; this is where a job meets scoring and the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from service.aio import CLOSE_TIMEOUT_S, bounded
from service.calibrations import CalibrationStore, MemoryCalibrations
from service.config import RewardSettings
from service.engine.base import Engine
from service.errors import InvalidRequest, ServiceError
from service.protocol import (
    OutcomeRequest,
    ProcessRequest,
    RerankRequest,
    ScoreRequest,
    SplitRequest,
)
from service.protocol_audit import AuditRequest, PopMCQRequest
from service.protocol_mcq import CalibrationRequest, MCQAnswerRequest, MCQBatchRequest
from service.protocol_reward import RewardRequest
from service.queue.base import Job, JobOutcome
from service.serving.audit import AuditServing
from service.serving.cache import CachingEngine, JudgmentStore
from service.serving.context import current_tenant
from service.serving.mcq import MCQServing
from service.serving.outcome import OutcomeServing
from service.serving.popmcq import PopMCQServing
from service.serving.process import ProcessServing, SplitServing
from service.serving.reward import RewardServing
from service.serving.score import ScoreServing
from service.telemetry import Metrics


@dataclass
class Services:
    """Everything that needs the engine, built once it answered."""

    engine: Engine
    outcome: OutcomeServing
    split: SplitServing
    process: ProcessServing
    score: ScoreServing
    mcq: MCQServing
    audit: AuditServing
    popmcq: PopMCQServing
    reward: RewardServing
    judgments: JudgmentStore | None = None

    @classmethod
    def build(
        cls,
        engine: Engine,
        model_name: str,
        judgments: JudgmentStore | None = None,
        calibrations: CalibrationStore | None = None,
        reward: RewardSettings | None = None,
    ) -> Services:
        """Serving objects over ``engine``; with a store, judgments go through the cache."""
        if judgments is not None:
            engine = CachingEngine(engine, judgments)
        outcome = OutcomeServing(engine, model_name)
        split = SplitServing(engine)
        process = ProcessServing(engine, split, model_name)
        score = ScoreServing(outcome, process, model_name)
        mcq = MCQServing(engine, model_name, calibrations or MemoryCalibrations())
        rewards = RewardServing(outcome, engine.tokenizer, reward or RewardSettings())
        return cls(
            engine=engine,
            audit=AuditServing(engine, model_name),
            popmcq=PopMCQServing(engine, model_name, mcq),
            outcome=outcome,
            split=split,
            process=process,
            score=score,
            mcq=mcq,
            reward=rewards,
            judgments=judgments,
        )

    async def close(self) -> None:
        """Shut the engine down (bounded inside), then the judgment store."""
        await self.engine.shutdown()
        if self.judgments is not None:
            await bounded(self.judgments.close(), CLOSE_TIMEOUT_S, "closing the judgment cache")


Route = tuple[type[BaseModel], Callable[[Services, Any], Awaitable[BaseModel]]]

# kind -> (request model, how to run it); the API submits jobs of exactly these kinds.
ROUTES: dict[str, Route] = {
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
        self, services: Services, metrics: Metrics | None = None, crash_kind: str = ""
    ) -> None:
        self._services = services
        self._metrics = metrics
        self._crash_kind = crash_kind

    async def __call__(self, job: Job) -> JobOutcome:
        if self._crash_kind and job.kind == self._crash_kind:
            # Fault injection (tests only): die like a segfaulting worker, mid-batch.
            os._exit(70)
        if self._metrics is not None:
            self._metrics.queue_wait.observe(max(0.0, time.time() - job.enqueued_at))
        # Cached judgments and calibrations are scoped by tenant (each job has its own task).
        current_tenant.set(job.tenant)
        route = ROUTES.get(job.kind)
        if route is None:
            return JobOutcome.from_error(InvalidRequest(f"unknown job kind {job.kind!r}"))
        model, run = route
        try:
            req = model.model_validate(job.payload)
        except ValidationError as exc:
            return JobOutcome.from_error(InvalidRequest(f"invalid job payload: {exc}"))
        try:
            resp = await run(self._services, req)
        except ServiceError as exc:
            return JobOutcome.from_error(exc)
        return JobOutcome.success(resp.model_dump(mode="json"))
