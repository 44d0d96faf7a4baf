"""vLLM's pooling routes (/classify, /pooling): a trained reward model or PRM behind the
queue, keys, quotas and metrics of every other route."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered
from service.protocol.pooling import (
    ClassificationResponse,
    ClassifyRequest,
    PoolingRequest,
    PoolingResponse,
)

router = APIRouter(tags=["pooling"], responses=ERRORS)


@router.post("/classify", response_model=ClassificationResponse, response_model_exclude_none=True)
async def classify(req: ClassifyRequest, job: JobDep) -> Metered:
    """Class scores per input from a sequence reward model (vLLM's /classify shape)."""
    return await job.run("classify", req)


@router.post("/pooling", response_model=PoolingResponse, response_model_exclude_none=True)
async def pooling(req: PoolingRequest, job: JobDep) -> Metered:
    """The pooling model's output per input: one row (classify) or token rows (vLLM's shape)."""
    return await job.run("pooling", req)
