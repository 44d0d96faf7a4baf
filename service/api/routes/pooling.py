"""vLLM's pooling routes (/classify, /pooling): a trained reward model or PRM behind the
queue, keys, quotas and metrics of every other route."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.limits import check_counts, check_many
from service.api.pipeline import JobDep
from service.config import LimitSettings
from service.protocol import Metered
from service.protocol.pooling import (
    ClassificationResponse,
    ClassifyRequest,
    PoolingRequest,
    PoolingResponse,
)

router = APIRouter(tags=["pooling"], responses=ERRORS)


def _check(limits: LimitSettings, req: ClassifyRequest | PoolingRequest) -> None:
    """Sizes before anything is queued: each text, and the inputs as documents."""
    items = req.inputs()
    check_many(limits, "input", [i for i in items if isinstance(i, str)])
    if req.messages is not None:
        check_many(limits, "messages", [str(m.get("content") or "") for m in req.messages])
    check_counts(limits, documents=len(items))


@router.post("/classify", response_model=ClassificationResponse, response_model_exclude_none=True)
async def classify(req: ClassifyRequest, job: JobDep) -> Metered:
    """Class scores per input from a sequence reward model (vLLM's /classify shape)."""
    _check(job.state.settings.limits, req)
    return await job.run("classify", req)


@router.post("/pooling", response_model=PoolingResponse, response_model_exclude_none=True)
async def pooling(req: PoolingRequest, job: JobDep) -> Metered:
    """The pooling model's output per input: one row (classify) or token rows (vLLM's shape)."""
    _check(job.state.settings.limits, req)
    return await job.run("pooling", req)
