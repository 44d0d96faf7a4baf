"""The Cohere/Jina-compatible rerank endpoints (/v1/rerank, /v2/rerank, /rerank)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import calibrated
from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered, RerankRequest, RerankResponse

router = APIRouter(tags=["score"], responses=ERRORS)


@router.post("/v1/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/v2/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/rerank", response_model=RerankResponse, response_model_exclude_none=True)
async def rerank(req: RerankRequest, job: JobDep) -> Metered:
    """Best-of-N in the Cohere/Jina rerank shape: documents sorted best first; method 'outcome'
    through a probability calibration when one applies (docs/methods.md J)."""
    cal = None
    if req.method == "compare":
        await job.check_calibration(
            req.model, req.compare_spec().calibration_id, "pride", [len(req.texts())]
        )
    elif req.method == "outcome":
        mode = calibrated.outcome_mode(req.mode)
        cal = await job.probability_calibration(req.model, req.calibration_id, "outcome", mode)
    # The three paths are one endpoint: one metric label, as before they shared this body.
    resp = await job.run("rerank", req, endpoint="/v1/rerank")
    assert isinstance(resp, RerankResponse)  # the rerank job's response model
    return calibrated.rerank(resp, cal)
