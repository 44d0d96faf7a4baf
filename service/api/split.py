"""POST /v1/split."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ServicesDep, StateDep, check_counts, check_texts, record, with_deadline
from service.api.judge import ERRORS
from service.protocol import SplitRequest, SplitResponse

router = APIRouter(tags=["split"], responses=ERRORS)


@router.post("/v1/split", response_model=SplitResponse)
async def split(req: SplitRequest, state: StateDep, services: ServicesDep) -> SplitResponse:
    """Split a response into steps (heuristic, model-marked with a checked copy, or auto)."""
    limits = state.settings.limits
    check_texts(limits, response=req.response)
    check_counts(limits, max_steps=req.max_steps)
    res = await with_deadline(services.split.handle(req), limits.request_timeout_s)
    record(state, "/v1/split", state.settings.model_name, res.usage)
    return res
