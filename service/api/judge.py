"""POST /v1/judge/*: thin routers (validate, check limits, run with a deadline)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import (
    ServicesDep,
    StateDep,
    check_counts,
    check_judge_options,
    check_many,
    check_texts,
    record,
    with_deadline,
)
from service.protocol import (
    ErrorResponse,
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
)

ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorResponse} for code in (413, 422, 429, 502, 503, 504)
}

router = APIRouter(prefix="/v1/judge", tags=["judge"], responses=ERRORS)


@router.post("/outcome", response_model=OutcomeResponse)
async def judge_outcome(
    req: OutcomeRequest, state: StateDep, services: ServicesDep
) -> OutcomeResponse:
    """Score P(correct) of one response to one question (METHODS A.2)."""
    limits = state.settings.limits
    check_texts(limits, question=req.question, response=req.response)
    check_judge_options(limits, req)
    res = await with_deadline(services.outcome.judge(req), limits.request_timeout_s)
    record(state, "/v1/judge/outcome", res.model, res.usage)
    return res


@router.post("/process", response_model=ProcessResponse)
async def judge_process(
    req: ProcessRequest, state: StateDep, services: ServicesDep
) -> ProcessResponse:
    """Score every step of a solution and aggregate (METHODS A.3)."""
    limits = state.settings.limits
    check_texts(limits, question=req.question, response=req.response or "")
    check_many(limits, "steps", req.steps or [])
    check_counts(limits, max_steps=max(req.max_steps, len(req.steps or [])))
    check_judge_options(limits, req)
    res = await with_deadline(services.process.judge(req), limits.request_timeout_s)
    record(state, "/v1/judge/process", res.model, res.usage)
    return res
