"""The job kinds with their request and response models (the names alone: ``kinds.py``).

A kind names what a job asks for; its payload is that kind's request JSON and its result body
that kind's response JSON. The API submits only these kinds; the worker's dispatch table
(``service.serving.handler``) and the budget's estimators (``service.serving.budget``) are
keyed by them and built with :func:`for_every_kind`, so a kind added here without a handler or
an estimator fails at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from pydantic import BaseModel

from service.kinds import JOB_KINDS, JobKind
from service.protocol.audit import AuditRequest, AuditResponse, PopMCQRequest, PopMCQResponse
from service.protocol.base import Metered
from service.protocol.calibrate import (
    ProbabilityCalibrationRequest,
    ProbabilityCalibrationResponse,
)
from service.protocol.code import RunCodeRequest, RunCodeResponse
from service.protocol.compare import CompareRequest, CompareResponse
from service.protocol.decision_results import DecisionResponse
from service.protocol.decisions import DecisionRequest
from service.protocol.judge import (
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
    SplitRequest,
    SplitResponse,
)
from service.protocol.mcq import (
    CalibrationRequest,
    CalibrationResponse,
    MCQAnswerRequest,
    MCQAnswerResponse,
    MCQBatchRequest,
    MCQBatchResponse,
)
from service.protocol.pooling import (
    ClassificationResponse,
    ClassifyRequest,
    PoolingRequest,
    PoolingResponse,
)
from service.protocol.reward import RewardRequest, RewardResponse
from service.protocol.reward_results import RewardsResponse
from service.protocol.rewards import RewardsRequest


@dataclass(frozen=True)
class JobSpec:
    """A job kind with its payload (``request``) and result body (``response``) models."""

    kind: JobKind
    request: type[BaseModel]
    response: type[Metered]


T = TypeVar("T")


def for_every_kind(table: Mapping[JobKind, T], what: str) -> Mapping[JobKind, T]:
    """``table`` if it has an entry for every job kind and no other, else a ``TypeError``.

    Example: ``RUNS = for_every_kind({...}, "handler")`` at import, so a new kind without a
    handler stops the process before it serves anything.
    """
    missing = [k for k in JOB_KINDS if k not in table]
    unknown = [k for k in table if k not in JOB_KINDS]
    if missing or unknown:
        raise TypeError(
            f"the {what} table must cover exactly the job kinds of service/kinds.py; "
            f"missing: {missing or 'none'}, unknown: {unknown or 'none'}"
        )
    return table


JOBS: Final[Mapping[JobKind, JobSpec]] = for_every_kind(
    {
        spec.kind: spec
        for spec in (
            JobSpec("outcome", OutcomeRequest, OutcomeResponse),
            JobSpec("process", ProcessRequest, ProcessResponse),
            JobSpec("split", SplitRequest, SplitResponse),
            JobSpec("score", ScoreRequest, ScoreResponse),
            JobSpec("rerank", RerankRequest, RerankResponse),
            JobSpec("mcq_answer", MCQAnswerRequest, MCQAnswerResponse),
            JobSpec("mcq_batch", MCQBatchRequest, MCQBatchResponse),
            JobSpec("mcq_calibrate", CalibrationRequest, CalibrationResponse),
            JobSpec("calibrate", ProbabilityCalibrationRequest, ProbabilityCalibrationResponse),
            JobSpec("mcq_audit", AuditRequest, AuditResponse),
            JobSpec("mcq_popmcq", PopMCQRequest, PopMCQResponse),
            JobSpec("reward", RewardRequest, RewardResponse),
            JobSpec("classify", ClassifyRequest, ClassificationResponse),
            JobSpec("pooling", PoolingRequest, PoolingResponse),
            JobSpec("decision", DecisionRequest, DecisionResponse),
            JobSpec("compare", CompareRequest, CompareResponse),
            JobSpec("rewards", RewardsRequest, RewardsResponse),
            JobSpec("run_code", RunCodeRequest, RunCodeResponse),
        )
    },
    "job spec",
)
