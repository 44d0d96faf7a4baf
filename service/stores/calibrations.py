"""Where fitted MCQ calibrations (debiasing priors) live: a per-tenant record store
(``stores/records.py``), in Redis when configured, else memory."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from service.errors import CalibrationMismatch, UnknownCalibration
from service.protocol.mcq import Calibration
from service.scoring.debias import calibration_mismatch
from service.stores.keys import RedisNames
from service.stores.records import MemoryRecords, RecordStore, RedisRecords, new_id

ID_PREFIX = "cal_"

CalibrationStore = RecordStore[Calibration]


def new_calibration_id() -> str:
    return new_id(ID_PREFIX)


def MemoryCalibrations() -> MemoryRecords[Calibration]:
    return MemoryRecords(ID_PREFIX, with_defaults=False)


def RedisCalibrations(redis: Redis, prefix: str) -> RedisRecords[Calibration]:
    names = RedisNames(prefix)
    return RedisRecords(
        redis,
        Calibration,
        ID_PREFIX,
        names.calibration,
        names.calibrations,
    )


async def fitting(
    store: CalibrationStore,
    tenant: str,
    calibration_id: str | None,
    method: str,
    ks: Sequence[int],
    model: str,
) -> Calibration | None:
    """The tenant's calibration ``calibration_id`` (None without one), checked against the
    request's method, option counts and model: ``UnknownCalibration`` when the tenant has none
    of that id, ``CalibrationMismatch`` when it was fitted for another (both 422)."""
    if calibration_id is None:
        return None
    cal = await store.get(tenant, calibration_id)
    if cal is None:
        raise UnknownCalibration(
            f"no calibration {calibration_id!r} for this tenant; list yours with GET "
            "/v1/mcq/calibrations"
        )
    why = calibration_mismatch(cal.id, (cal.method, cal.k, cal.model), method, ks, model)
    if why is not None:
        raise CalibrationMismatch(why)
    return cal
