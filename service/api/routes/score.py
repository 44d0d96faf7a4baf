"""POST /v1/score: outcome, process and fused scores of many responses to one question."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import calibrated
from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered, ScoreRequest, ScoreResponse

router = APIRouter(tags=["score"], responses=ERRORS)


@router.post("/v1/score", response_model=ScoreResponse)
async def score(req: ScoreRequest, job: JobDep) -> Metered:
    """Outcome, process and fused scores of many responses to one question, plus a ranking;
    method 'outcome' through a probability calibration when one applies (docs/methods.md J)."""
    cal = None
    if req.method == "compare":
        await job.check_calibration(
            req.model, req.compare_spec().calibration_id, "pride", [len(req.responses)]
        )
    elif req.method == "outcome":
        mode = calibrated.outcome_mode(req.mode)
        cal = await job.probability_calibration(req.model, req.calibration_id, "outcome", mode)
    resp = await job.run("score", req)
    assert isinstance(resp, ScoreResponse)  # the score job's response model
    return calibrated.score(resp, cal)
