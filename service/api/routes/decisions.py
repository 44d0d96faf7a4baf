"""/v1/decisions: OpenAI's Decisions API (thin: validate, submit)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import calibrated
from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered
from service.protocol.decision_results import DecisionResponse
from service.protocol.decisions import DecisionRequest

router = APIRouter(prefix="/v1", tags=["decisions"], responses=ERRORS)


@router.post("/decisions", response_model=DecisionResponse)
async def decide(req: DecisionRequest, job: JobDep) -> Metered:
    """Typed answers (predicate, choice, score) about one input, from label probabilities,
    through a probability calibration when one applies (docs/methods.md J.6)."""
    await job.check_calibration(req.model, req.prior_id, req.debias, req.choice_counts)
    cal = await job.probability_calibration(
        req.model, req.probability_calibration_id, "decisions", req.mode
    )
    # the job reads raw (an MCQ prior, if any, is its own): the calibration applies after it
    resp = await job.run("decision", req.model_copy(update={"calibration_id": req.prior_id}))
    assert isinstance(resp, DecisionResponse)  # the decision job's response model
    return calibrated.decisions(resp, cal)
