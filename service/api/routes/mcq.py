"""/v1/mcq/*: multiple-choice answers and calibrations (thin: validate, submit)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api import calibrated
from service.api.deps import StateDep, tenant_name
from service.api.errors import ERRORS, NOT_FOUND
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
)

router = APIRouter(prefix="/v1/mcq", tags=["mcq"], responses=ERRORS)


@router.post("/answer", response_model=MCQAnswerResponse)
async def answer(req: MCQAnswerRequest, job: JobDep) -> Metered:
    """The option the model believes, raw and debiased probabilities (docs/methods.md B.4-B.7),
    through a probability calibration when one applies (docs/methods.md J.7)."""
    await job.check_calibration(req.model, req.prior_id, req.debias, [req.k])
    cal = await job.probability_calibration(
        req.model, req.probability_calibration_id, "mcq", "direct"
    )
    # the job reads raw (a debiasing calibration, if any, is its own): the map applies after it
    resp = await job.run("mcq_answer", req.model_copy(update={"calibration_id": req.prior_id}))
    assert isinstance(resp, MCQAnswerResponse)  # the mcq_answer job's response model
    return calibrated.mcq(resp, cal)


@router.post("/answer/batch", response_model=MCQBatchResponse)
async def answer_batch(req: MCQBatchRequest, job: JobDep) -> Metered:
    """Many items in one request, scored in one engine batch."""
    await job.check_calibration(req.model, req.prior_id, req.debias, [it.k for it in req.items])
    cal = await job.probability_calibration(
        req.model, req.probability_calibration_id, "mcq", "direct"
    )
    resp = await job.run("mcq_batch", req.model_copy(update={"calibration_id": req.prior_id}))
    assert isinstance(resp, MCQBatchResponse)  # the mcq_batch job's response model
    return calibrated.mcq_batch(resp, cal)


@router.post("/audit", response_model=AuditResponse)
async def audit(req: AuditRequest, job: JobDep) -> Metered:
    """Choices-only and reasoning audit: full vs choices-only x base vs reason (methods.md C)."""
    return await job.run("mcq_audit", req)


@router.post("/popmcq", response_model=PopMCQResponse)
async def popmcq(req: PopMCQRequest, job: JobDep) -> Metered:
    """PopMCQ stress test: S1-S6 items from candidate pools, metrics per debiasing method."""
    return await job.run("mcq_popmcq", req)


@router.post("/calibrations", response_model=CalibrationResponse)
async def fit_calibration(req: CalibrationRequest, job: JobDep) -> Metered:
    """Fit a debiasing method on unlabelled items; stored for this tenant, returns its id."""
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
