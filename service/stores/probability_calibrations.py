"""Where fitted probability calibrations live (a per-tenant record store, ``records.py``),
and the one check that a stored calibration may map a request's answer."""

from __future__ import annotations

from redis.asyncio import Redis

from service.errors import CalibrationMismatch, UnknownCalibration
from service.protocol.calibrate import ProbabilityCalibration
from service.protocol.calibrated import ID_PREFIX, NO_CALIBRATION
from service.stores.keys import RedisNames
from service.stores.records import MemoryRecords, RecordStore, RedisRecords, new_id

ProbabilityCalibrationStore = RecordStore[ProbabilityCalibration]


def new_probability_calibration_id() -> str:
    return new_id(ID_PREFIX)


def memory_store() -> MemoryRecords[ProbabilityCalibration]:
    return MemoryRecords(ID_PREFIX)


def redis_store(redis: Redis, prefix: str) -> RedisRecords[ProbabilityCalibration]:
    names = RedisNames(prefix)
    return RedisRecords(
        redis,
        ProbabilityCalibration,
        ID_PREFIX,
        names.probability_calibration,
        names.probability_calibrations,
        names.probability_calibration_defaults,
    )


def mismatch(cal: ProbabilityCalibration, target: str, mode: str, model: str) -> str | None:
    """Why ``cal`` cannot map an answer of ``target`` read in ``mode`` by ``model`` (None: it
    can). Each is a different distribution of raw reads, so a map fitted on one says nothing
    about another."""
    for what, fitted, asked in (("target", cal.target, target), ("model", cal.model, model)):
        if fitted != asked:
            return f"calibration {cal.id} was fitted for {what} {fitted!r}, not {asked!r}"
    if cal.mode != mode:
        return (
            f"calibration {cal.id} was fitted on {cal.mode} judgments; this request is {mode} "
            f"(fit one with mode={mode!r})"
        )
    return None


async def applicable(
    store: ProbabilityCalibrationStore,
    tenant: str,
    calibration_id: str | None,
    target: str,
    mode: str,
    model: str,
) -> ProbabilityCalibration | None:
    """The calibration an answer goes through: the named one (``UnknownCalibration`` when the
    tenant has none of that id, ``CalibrationMismatch`` when it was fitted for another target,
    mode or model), none for ``"none"``, else the tenant's default for ``target`` when one is
    marked and fits (a default that does not fit is left out: the answer says so by carrying
    no calibration block)."""
    if calibration_id == NO_CALIBRATION:
        return None
    if calibration_id is None:
        default_id = (await store.defaults(tenant)).get(target)
        if default_id is None:
            return None
        cal = await store.get(tenant, default_id)
        return cal if cal is not None and mismatch(cal, target, mode, model) is None else None
    cal = await store.get(tenant, calibration_id)
    if cal is None:
        raise UnknownCalibration(
            f"no calibration {calibration_id!r} for this tenant; list yours with GET "
            "/v1/calibrations"
        )
    why = mismatch(cal, target, mode, model)
    if why is not None:
        raise CalibrationMismatch(why)
    return cal
