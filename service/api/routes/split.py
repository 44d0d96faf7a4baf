"""POST /v1/split."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered, SplitRequest, SplitResponse

router = APIRouter(tags=["split"], responses=ERRORS)


@router.post("/v1/split", response_model=SplitResponse)
async def split(req: SplitRequest, job: JobDep) -> Metered:
    """Split a response into steps (heuristic, model-marked with a checked copy, or auto)."""
    return await job.run("split", req)
