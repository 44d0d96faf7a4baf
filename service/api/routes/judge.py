"""POST /v1/judge/*: thin routers (validate, submit through the queue)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import calibrated
from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import (
    Metered,
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
)
from service.protocol.calibrated import is_probability_calibration
from service.protocol.compare import CompareRequest, CompareResponse

router = APIRouter(prefix="/v1/judge", tags=["judge"], responses=ERRORS)


@router.post("/outcome", response_model=OutcomeResponse)
async def judge_outcome(req: OutcomeRequest, job: JobDep) -> Metered:
    """Score P(correct) of one response to one question (docs/methods.md A.2), through a
    probability calibration when one applies (docs/methods.md J)."""
    cal = await job.probability_calibration(req.model, req.calibration_id, "outcome", req.mode)
    resp = await job.run("outcome", req)
    assert isinstance(resp, OutcomeResponse)  # the outcome job's response model
    return calibrated.outcome(resp, cal)


@router.post("/process", response_model=ProcessResponse)
async def judge_process(req: ProcessRequest, job: JobDep) -> Metered:
    """Score every step of a solution and aggregate (docs/methods.md A.3)."""
    return await job.run("process", req)


@router.post("/compare", response_model=CompareResponse)
async def judge_compare(req: CompareRequest, job: JobDep) -> Metered:
    """Compare responses to one question, pairwise or listwise, position bias removed
    (docs/methods.md H); pairwise preferences through a probability calibration when one
    applies (docs/methods.md J.5)."""
    if not is_probability_calibration(req.calibration_id):
        await job.check_calibration(req.model, req.calibration_id, "pride", [len(req.responses)])
        cal = None
        if req.resolved_debias() == "swap":  # the tenant's default maps swap reads only
            cal = await job.probability_calibration(req.model, None, "compare", _judge_mode(req))
        resp = await job.run("compare", req)
    else:
        cal = await job.probability_calibration(
            req.model, req.calibration_id, "compare", _judge_mode(req)
        )
        # the job reads raw: the calibration is applied here, after it
        resp = await job.run("compare", req.model_copy(update={"calibration_id": None}))
    assert isinstance(resp, CompareResponse)  # the compare job's response model
    return calibrated.compare(resp, cal)


def _judge_mode(req: CompareRequest) -> str:
    return "reasoning" if req.reasoning else "direct"
