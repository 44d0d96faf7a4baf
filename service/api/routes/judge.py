"""POST /v1/judge/*: thin routers (validate, check limits, submit through the queue)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import QueueDep, StateDep
from service.api.limits import check_counts, check_judge_options, check_many, check_texts
from service.api.pipeline import run_job
from service.protocol import (
    ErrorResponse,
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
)

ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorResponse} for code in (401, 413, 422, 429, 502, 503, 504)
}

# Routes that look a tenant's record up by id (another tenant's id is a 404 too).
NOT_FOUND: dict[int | str, dict[str, object]] = {404: {"model": ErrorResponse}}

router = APIRouter(prefix="/v1/judge", tags=["judge"], responses=ERRORS)


@router.post("/outcome", response_model=OutcomeResponse)
async def judge_outcome(
    req: OutcomeRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> OutcomeResponse:
    """Score P(correct) of one response to one question (docs/methods.md A.2)."""
    limits = state.settings.limits
    check_texts(limits, question=req.question, response=req.response)
    check_judge_options(limits, req)
    return await run_job(
        state, queue, request, response, "outcome", req, OutcomeResponse, "/v1/judge/outcome"
    )


@router.post("/process", response_model=ProcessResponse)
async def judge_process(
    req: ProcessRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> ProcessResponse:
    """Score every step of a solution and aggregate (docs/methods.md A.3)."""
    limits = state.settings.limits
    check_texts(limits, question=req.question, response=req.response or "")
    check_many(limits, "steps", req.steps or [])
    check_counts(limits, max_steps=max(req.max_steps, len(req.steps or [])))
    check_judge_options(limits, req)
    return await run_job(
        state, queue, request, response, "process", req, ProcessResponse, "/v1/judge/process"
    )
