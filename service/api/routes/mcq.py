"""/v1/mcq/*: multiple-choice answers and calibrations (thin: validate, check, submit)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from service.api.deps import AppState, QueueDep, StateDep, tenant_name
from service.api.limits import check_counts, check_many, check_texts
from service.api.pipeline import run_job
from service.api.routes.judge import ERRORS, NOT_FOUND
from service.errors import InvalidRequest, NotFound, UnknownCalibration
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
    MCQOptions,
)
from service.serving.mcq import check_calibration

router = APIRouter(prefix="/v1/mcq", tags=["mcq"], responses=ERRORS)


def _check_items(state: AppState, items: Sequence[MCQItem]) -> None:
    limits = state.settings.limits
    check_counts(limits, documents=len(items))
    for i, item in enumerate(items):
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].options", item.options)


async def _check_calibration(
    state: AppState, request: Request, opts: MCQOptions, ks: Sequence[int]
) -> None:
    """Refuse a wrong calibration before anything is queued or charged (the worker re-checks)."""
    if opts.calibration_id is None:
        return
    cal = await state.calibrations.get(tenant_name(request), opts.calibration_id)
    if cal is None:
        raise UnknownCalibration(
            f"no calibration {opts.calibration_id!r} for this tenant; list yours with GET "
            "/v1/mcq/calibrations"
        )
    check_calibration(cal, opts.debias, ks, state.settings.model_name)


@router.post("/answer", response_model=MCQAnswerResponse)
async def answer(
    req: MCQAnswerRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> MCQAnswerResponse:
    """The option the model believes, raw and debiased probabilities (docs/methods.md B.4-B.7)."""
    _check_items(state, [req])
    await _check_calibration(state, request, req, [req.k])
    return await run_job(
        state, queue, request, response, "mcq_answer", req, MCQAnswerResponse, "/v1/mcq/answer"
    )


@router.post("/answer/batch", response_model=MCQBatchResponse)
async def answer_batch(
    req: MCQBatchRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> MCQBatchResponse:
    """Many items in one request, scored in one engine batch."""
    _check_items(state, req.items)
    await _check_calibration(state, request, req, [it.k for it in req.items])
    return await run_job(
        state,
        queue,
        request,
        response,
        "mcq_batch",
        req,
        MCQBatchResponse,
        "/v1/mcq/answer/batch",
    )


def _check_audit(state: AppState, req: AuditRequest) -> None:
    limits = state.settings.limits
    check_counts(limits, documents=len(req.items))
    if req.reasoning_tokens > limits.max_reasoning_tokens:
        raise InvalidRequest(
            f"reasoning_tokens={req.reasoning_tokens} is over the limit of "
            f"{limits.max_reasoning_tokens} (VERIFIER_LIMITS__MAX_REASONING_TOKENS)"
        )
    for i, item in enumerate(req.items):
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].options", item.options)


@router.post("/audit", response_model=AuditResponse)
async def audit(
    req: AuditRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> AuditResponse:
    """Choices-only and reasoning audit: full vs choices-only x base vs reason (methods.md C)."""
    _check_audit(state, req)
    return await run_job(
        state, queue, request, response, "mcq_audit", req, AuditResponse, "/v1/mcq/audit"
    )


@router.post("/popmcq", response_model=PopMCQResponse)
async def popmcq(
    req: PopMCQRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> PopMCQResponse:
    """PopMCQ stress test: S1-S6 items from candidate pools, metrics per debiasing method."""
    limits = state.settings.limits
    check_counts(limits, documents=len(req.items))
    for i, item in enumerate(req.items):
        texts = [item.answer.text, *(c.text for c in item.candidates)]
        check_texts(limits, **{f"items[{i}].question": item.question})
        check_many(limits, f"items[{i}].texts", texts)
    return await run_job(
        state, queue, request, response, "mcq_popmcq", req, PopMCQResponse, "/v1/mcq/popmcq"
    )


@router.post("/calibrations", response_model=CalibrationResponse)
async def fit_calibration(
    req: CalibrationRequest,
    request: Request,
    response: Response,
    state: StateDep,
    queue: QueueDep,
) -> CalibrationResponse:
    """Fit a debiasing method on unlabelled items; stored for this tenant, returns its id."""
    _check_items(state, req.items)
    return await run_job(
        state,
        queue,
        request,
        response,
        "mcq_calibrate",
        req,
        CalibrationResponse,
        "/v1/mcq/calibrations",
    )


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
