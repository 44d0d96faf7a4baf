"""/v1/calibrations: probability calibrations fitted on a tenant's labelled examples, stored
per tenant, applied by ``calibration_id`` or as the tenant's default (docs/methods.md J).

The MCQ debiasing priors are another family, under /v1/mcq/calibrations.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import StateDep, tenant_name
from service.api.errors import ERRORS, NOT_FOUND
from service.api.pipeline import JobDep, served_ids
from service.errors import CalibrationMismatch, NotFound
from service.protocol.calibrate import (
    CalibrationDefault,
    CalibrationDefaults,
    CalibrationTarget,
    ProbabilityCalibration,
    ProbabilityCalibrationList,
    ProbabilityCalibrationRequest,
    ProbabilityCalibrationResponse,
)
from service.stores.probability_calibrations import mismatch

router = APIRouter(prefix="/v1/calibrations", tags=["calibrations"], responses=ERRORS)


def _missing(calibration_id: str) -> NotFound:
    return NotFound(f"no calibration {calibration_id!r} for this tenant")


@router.post("", response_model=ProbabilityCalibrationResponse)
async def fit(req: ProbabilityCalibrationRequest, job: JobDep) -> ProbabilityCalibrationResponse:
    """Read the judge on labelled examples, fit temperature or Platt scaling, store it for this
    tenant (and mark it the default for its target with ``default: true``)."""
    resp = await job.run("calibrate", req)
    assert isinstance(resp, ProbabilityCalibrationResponse)  # the calibrate job's response
    store, tenant = job.state.probability_calibrations, tenant_name(job.request)
    record = ProbabilityCalibration.model_validate(resp.model_dump(exclude={"usage", "budget"}))
    await store.put(tenant, record)
    if req.default:
        await store.set_default(tenant, record.target, record.id)
        resp.default = True
    return resp


async def _defaults(state: StateDep, tenant: str) -> CalibrationDefaults:
    return CalibrationDefaults(defaults=await state.probability_calibrations.defaults(tenant))


@router.get("/defaults", response_model=CalibrationDefaults)
async def read_defaults(request: Request, state: StateDep) -> CalibrationDefaults:
    """This tenant's default calibration per target."""
    return await _defaults(state, tenant_name(request))


@router.put("/defaults/{target}", response_model=CalibrationDefaults, responses=NOT_FOUND)
async def set_default(
    target: CalibrationTarget, body: CalibrationDefault, request: Request, state: StateDep
) -> CalibrationDefaults:
    """Mark one of this tenant's calibrations the default for ``target``."""
    tenant = tenant_name(request)
    cal = await state.probability_calibrations.get(tenant, body.calibration_id)
    if cal is None:
        raise _missing(body.calibration_id)
    # a calibration of the served model or of one of its adapters (each fits its own requests)
    model = cal.model if cal.model in served_ids(state.settings) else state.settings.model_name
    why = mismatch(cal, target, cal.mode, model)
    if why is not None:
        raise CalibrationMismatch(why)
    await state.probability_calibrations.set_default(tenant, target, cal.id)
    return await _defaults(state, tenant)


@router.delete("/defaults/{target}", status_code=204)
async def clear_default(target: CalibrationTarget, request: Request, state: StateDep) -> Response:
    """Answers of ``target`` go raw again unless a request names a calibration."""
    await state.probability_calibrations.set_default(tenant_name(request), target, None)
    return Response(status_code=204)


def _marked(cal: ProbabilityCalibration, defaults: dict[str, str]) -> ProbabilityCalibration:
    return cal.model_copy(update={"default": defaults.get(cal.target) == cal.id})


@router.get("", response_model=ProbabilityCalibrationList)
async def list_calibrations(request: Request, state: StateDep) -> ProbabilityCalibrationList:
    """This tenant's probability calibrations, oldest first."""
    tenant = tenant_name(request)
    store = state.probability_calibrations
    defaults = await store.defaults(tenant)
    return ProbabilityCalibrationList(data=[_marked(c, defaults) for c in await store.list(tenant)])


@router.get("/{calibration_id}", response_model=ProbabilityCalibration, responses=NOT_FOUND)
async def read_calibration(
    calibration_id: str, request: Request, state: StateDep
) -> ProbabilityCalibration:
    tenant = tenant_name(request)
    cal = await state.probability_calibrations.get(tenant, calibration_id)
    if cal is None:
        raise _missing(calibration_id)
    return _marked(cal, await state.probability_calibrations.defaults(tenant))


@router.delete("/{calibration_id}", status_code=204, responses=NOT_FOUND)
async def delete_calibration(calibration_id: str, request: Request, state: StateDep) -> Response:
    """Delete it (and its default mark); answers naming it are refused from now on."""
    if not await state.probability_calibrations.delete(tenant_name(request), calibration_id):
        raise _missing(calibration_id)
    return Response(status_code=204)
