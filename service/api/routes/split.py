"""POST /v1/split."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import QueueDep, StateDep
from service.api.limits import check_counts, check_texts
from service.api.pipeline import run_job
from service.api.routes.judge import ERRORS
from service.protocol import SplitRequest, SplitResponse

router = APIRouter(tags=["split"], responses=ERRORS)


@router.post("/v1/split", response_model=SplitResponse)
async def split(
    req: SplitRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> SplitResponse:
    """Split a response into steps (heuristic, model-marked with a checked copy, or auto)."""
    limits = state.settings.limits
    check_texts(limits, response=req.response)
    check_counts(limits, max_steps=req.max_steps)
    return await run_job(state, queue, request, response, "split", req, SplitResponse, "/v1/split")
