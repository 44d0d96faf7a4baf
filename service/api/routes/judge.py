"""POST /v1/judge/*: thin routers (validate, check limits, submit through the queue)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.limits import (
    check_counts,
    check_judge_options,
    check_many,
    check_reasoning_tokens,
    check_reference,
    check_reference_texts,
    check_samples,
    check_texts,
)
from service.api.pipeline import JobDep
from service.protocol import (
    Metered,
    OutcomeRequest,
    OutcomeResponse,
    ProcessRequest,
    ProcessResponse,
)
from service.protocol.compare import CompareRequest, CompareResponse

router = APIRouter(prefix="/v1/judge", tags=["judge"], responses=ERRORS)


@router.post("/outcome", response_model=OutcomeResponse)
async def judge_outcome(req: OutcomeRequest, job: JobDep) -> Metered:
    """Score P(correct) of one response to one question (docs/methods.md A.2)."""
    limits = job.state.settings.limits
    check_texts(limits, question=req.question, response=req.response)
    check_reference(limits, req)
    check_judge_options(limits, req)
    return await job.run("outcome", req)


@router.post("/process", response_model=ProcessResponse)
async def judge_process(req: ProcessRequest, job: JobDep) -> Metered:
    """Score every step of a solution and aggregate (docs/methods.md A.3)."""
    limits = job.state.settings.limits
    check_texts(limits, question=req.question, response=req.response or "")
    check_many(limits, "steps", req.steps or [])
    check_counts(limits, max_steps=max(req.max_steps, len(req.steps or [])))
    check_reference(limits, req)
    check_judge_options(limits, req)
    return await job.run("process", req)


@router.post("/compare", response_model=CompareResponse)
async def judge_compare(req: CompareRequest, job: JobDep) -> Metered:
    """Compare responses to one question, pairwise or listwise, position bias removed
    (docs/methods.md H)."""
    limits = job.state.settings.limits
    check_texts(limits, question=req.question)
    check_many(limits, "responses", req.responses)
    check_counts(limits, documents=len(req.responses))
    check_reference_texts(limits, reference=req.reference, criteria=req.criteria)
    if req.reasoning_tokens is not None:
        check_reasoning_tokens(limits, req.reasoning_tokens)
    check_samples(limits, req.samples)
    await job.check_calibration(req.calibration_id, "pride", [len(req.responses)])
    return await job.run("compare", req)
