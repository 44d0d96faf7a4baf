"""POST /v1/score and the Cohere/Jina-compatible rerank endpoints."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import AppState, QueueDep, StateDep
from service.api.judge import ERRORS
from service.api.limits import check_counts, check_judge_options, check_many, check_texts
from service.api.pipeline import run_job
from service.protocol import (
    RerankRequest,
    RerankResponse,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
)

router = APIRouter(tags=["score"], responses=ERRORS)


def _check(state: AppState, question: str, texts: list[str], opts: ScoreOptions) -> None:
    limits = state.settings.limits
    check_counts(limits, documents=len(texts), max_steps=opts.max_steps)
    check_texts(limits, question=question)
    check_many(limits, "documents", texts)
    check_judge_options(limits, opts)


@router.post("/v1/score", response_model=ScoreResponse)
async def score(
    req: ScoreRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> ScoreResponse:
    """Outcome, process and fused scores of many responses to one question, plus a ranking."""
    _check(state, req.question, req.responses, req)
    return await run_job(state, queue, request, response, "score", req, ScoreResponse, "/v1/score")


@router.post("/v1/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/v2/rerank", response_model=RerankResponse, response_model_exclude_none=True)
@router.post("/rerank", response_model=RerankResponse, response_model_exclude_none=True)
async def rerank(
    req: RerankRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> RerankResponse:
    """Best-of-N in the Cohere/Jina rerank shape: documents sorted best first."""
    _check(state, req.query, req.texts(), req)
    return await run_job(
        state, queue, request, response, "rerank", req, RerankResponse, "/v1/rerank"
    )
