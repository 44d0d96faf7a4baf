"""/v1/decisions: OpenAI's Decisions API (thin: validate, submit)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered
from service.protocol.decisions import DecisionRequest, DecisionResponse

router = APIRouter(prefix="/v1", tags=["decisions"], responses=ERRORS)


@router.post("/decisions", response_model=DecisionResponse)
async def decide(req: DecisionRequest, job: JobDep) -> Metered:
    """Typed answers (predicate, choice, score) about one input, from label probabilities."""
    await job.check_calibration(req.calibration_id, req.debias, req.choice_counts)
    return await job.run("decision", req)
