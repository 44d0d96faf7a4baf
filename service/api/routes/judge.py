"""POST /v1/judge/*: thin routers (validate, submit through the queue)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import (
    Metered,
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
)
from service.protocol.compare import CompareRequest, CompareResponse

router = APIRouter(prefix="/v1/judge", tags=["judge"], responses=ERRORS)


@router.post("/outcome", response_model=OutcomeResponse)
async def judge_outcome(req: OutcomeRequest, job: JobDep) -> Metered:
    """Score P(correct) of one response to one question (docs/methods.md A.2)."""
    return await job.run("outcome", req)


@router.post("/process", response_model=ProcessResponse)
async def judge_process(req: ProcessRequest, job: JobDep) -> Metered:
    """Score every step of a solution and aggregate (docs/methods.md A.3)."""
    return await job.run("process", req)


@router.post("/compare", response_model=CompareResponse)
async def judge_compare(req: CompareRequest, job: JobDep) -> Metered:
    """Compare responses to one question, pairwise or listwise, position bias removed
    (docs/methods.md H)."""
    await job.check_calibration(req.calibration_id, "pride", [len(req.responses)])
    return await job.run("compare", req)
