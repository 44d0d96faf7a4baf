"""The Cohere/Jina-compatible rerank endpoints (/v1/rerank, /v2/rerank, /rerank)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import QueueDep, StateDep
from service.api.limits import check_documents
from service.api.pipeline import run_job
from service.api.routes.judge import ERRORS
from service.protocol import RerankRequest, RerankResponse

router = APIRouter(tags=["score"], responses=ERRORS)


@router.post("/v1/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/v2/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/rerank", response_model=RerankResponse, response_model_exclude_none=True)
async def rerank(
    req: RerankRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> RerankResponse:
    """Best-of-N in the Cohere/Jina rerank shape: documents sorted best first."""
    check_documents(state.settings.limits, req.query, req.texts(), req)
    return await run_job(
        state, queue, request, response, "rerank", req, RerankResponse, "/v1/rerank"
    )
