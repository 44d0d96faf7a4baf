"""/v1/mcq/*: multiple-choice answers and calibrations (thin: validate, check, submit)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from service.api.deps import AppState, StateDep, tenant_name
from service.api.errors import ERRORS, NOT_FOUND
from service.api.limits import check_counts, check_many, check_reasoning_tokens, check_texts
from service.api.pipeline import JobDep
from service.errors import NotFound
from service.protocol import Metered
from service.protocol.audit import AuditRequest, AuditResponse, PopMCQRequest, PopMCQResponse
from service.protocol.mcq import (
    Calibration,
    CalibrationList,
    CalibrationRequest,
    CalibrationResponse,
    MCQAnswerRequest,
    MCQAnswerResponse,
    MCQBatchRequest,
    MCQBatchResponse,
    MCQItem,
)

router = APIRouter(prefix="/v1/mcq", tags=["mcq"], responses=ERRORS)


def _check_items(state: AppState, items: Sequence[MCQItem]) -> None:
    limits = state.settings.limits
    check_counts(limits, documents=len(items))
    for i, item in enumerate(items):
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].options", item.options)


@router.post("/answer", response_model=MCQAnswerResponse)
async def answer(req: MCQAnswerRequest, job: JobDep) -> Metered:
    """The option the model believes, raw and debiased probabilities (docs/methods.md B.4-B.7)."""
    _check_items(job.state, [req])
    await job.check_calibration(req.calibration_id, req.debias, [req.k])
    return await job.run("mcq_answer", req)


@router.post("/answer/batch", response_model=MCQBatchResponse)
async def answer_batch(req: MCQBatchRequest, job: JobDep) -> Metered:
    """Many items in one request, scored in one engine batch."""
    _check_items(job.state, req.items)
    await job.check_calibration(req.calibration_id, req.debias, [it.k for it in req.items])
    return await job.run("mcq_batch", req)


def _check_audit(state: AppState, req: AuditRequest) -> None:
    limits = state.settings.limits
    check_counts(limits, documents=len(req.items))
    check_reasoning_tokens(limits, req.reasoning_tokens)
    for i, item in enumerate(req.items):
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].options", item.options)


@router.post("/audit", response_model=AuditResponse)
async def audit(req: AuditRequest, job: JobDep) -> Metered:
    """Choices-only and reasoning audit: full vs choices-only x base vs reason (methods.md C)."""
    _check_audit(job.state, req)
    return await job.run("mcq_audit", req)


@router.post("/popmcq", response_model=PopMCQResponse)
async def popmcq(req: PopMCQRequest, job: JobDep) -> Metered:
    """PopMCQ stress test: S1-S6 items from candidate pools, metrics per debiasing method."""
    limits = job.state.settings.limits
    check_counts(limits, documents=len(req.items))
    for i, item in enumerate(req.items):
        texts = [item.answer.text, *(c.text for c in item.candidates)]
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].texts", texts)
    return await job.run("mcq_popmcq", req)


@router.post("/calibrations", response_model=CalibrationResponse)
async def fit_calibration(req: CalibrationRequest, job: JobDep) -> Metered:
    """Fit a debiasing method on unlabelled items; stored for this tenant, returns its id."""
    _check_items(job.state, req.items)
    return await job.run("mcq_calibrate", req)


@router.get("/calibrations", response_model=CalibrationList)
async def list_calibrations(request: Request, state: StateDep) -> CalibrationList:
    """This tenant's calibrations, oldest first."""
    return CalibrationList(data=await state.calibrations.list(tenant_name(request)))


@router.get("/calibrations/{calibration_id}", response_model=Calibration, responses=NOT_FOUND)
async def read_calibration(calibration_id: str, request: Request, state: StateDep) -> Calibration:
    cal = await state.calibrations.get(tenant_name(request), calibration_id)
    if cal is None:
        raise NotFound(f"no calibration {calibration_id!r} for this tenant")
    return cal


@router.delete("/calibrations/{calibration_id}", status_code=204, responses=NOT_FOUND)
async def delete_calibration(calibration_id: str, request: Request, state: StateDep) -> Response:
    if not await state.calibrations.delete(tenant_name(request), calibration_id):
        raise NotFound(f"no calibration {calibration_id!r} for this tenant")
    return Response(status_code=204)
