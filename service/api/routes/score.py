"""POST /v1/score: outcome, process and fused scores of many responses to one question."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import QueueDep, StateDep
from service.api.limits import check_documents
from service.api.pipeline import run_job
from service.api.routes.judge import ERRORS
from service.protocol import ScoreRequest, ScoreResponse

router = APIRouter(tags=["score"], responses=ERRORS)


@router.post("/v1/score", response_model=ScoreResponse)
async def score(
    req: ScoreRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> ScoreResponse:
    """Outcome, process and fused scores of many responses to one question, plus a ranking."""
    check_documents(state.settings.limits, req.question, req.responses, req)
    return await run_job(state, queue, request, response, "score", req, ScoreResponse, "/v1/score")
