"""POST /v1/judge/*: thin routers (validate, check limits, run with a deadline)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ServicesDep, StateDep, check_judge_options, check_texts, with_deadline
from service.engine.base import TokenUsage
from service.protocol import ErrorResponse, OutcomeRequest, OutcomeResponse

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
    u = res.usage
    state.metrics.record_usage(
        "/v1/judge/outcome",
        res.model,
        TokenUsage(u.prompt_tokens, u.generated_tokens, u.cached_tokens, u.engine_calls),
    )
    return res
