"""Where fitted MCQ calibrations live: Redis when configured (kept across restarts, shared by
API and worker processes), else memory. Every read and write is scoped by tenant: a tenant can
neither read, list, use nor delete another's calibration.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import Protocol

from redis.asyncio import Redis

from service.errors import CalibrationMismatch, UnknownCalibration
from service.protocol.mcq import Calibration
from service.scoring.debias import calibration_mismatch
from service.stores.connection import unavailable
from service.stores.keys import RedisNames

_ID_RE = re.compile(r"cal_[A-Za-z0-9_-]{8,64}")


def new_calibration_id() -> str:
    return "cal_" + secrets.token_urlsafe(12)


def valid_id(calibration_id: str) -> bool:
    """Ids are part of Redis key names: only our own shape is looked up."""
    return _ID_RE.fullmatch(calibration_id) is not None


class CalibrationStore(Protocol):
    async def put(self, tenant: str, cal: Calibration) -> None: ...

    async def get(self, tenant: str, calibration_id: str) -> Calibration | None: ...

    async def list(self, tenant: str) -> list[Calibration]: ...

    async def delete(self, tenant: str, calibration_id: str) -> bool: ...


class MemoryCalibrations:
    """In-process store (single-process service with the local queue)."""

    def __init__(self) -> None:
        self._data: dict[tuple[str, str], Calibration] = {}

    async def put(self, tenant: str, cal: Calibration) -> None:
        self._data[(tenant, cal.id)] = cal

    async def get(self, tenant: str, calibration_id: str) -> Calibration | None:
        return self._data.get((tenant, calibration_id))

    async def list(self, tenant: str) -> list[Calibration]:
        found = [c for (t, _), c in self._data.items() if t == tenant]
        return sorted(found, key=lambda c: c.created_at)

    async def delete(self, tenant: str, calibration_id: str) -> bool:
        return self._data.pop((tenant, calibration_id), None) is not None


class RedisCalibrations:
    """One JSON string per calibration plus a per-tenant id set; no TTL (kept until deleted)."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self._names = RedisNames(prefix)

    async def put(self, tenant: str, cal: Calibration) -> None:
        with unavailable("store calibration"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(self._names.calibration(tenant, cal.id), cal.model_dump_json())
                pipe.sadd(self._names.calibrations(tenant), cal.id)
                await pipe.execute()

    async def get(self, tenant: str, calibration_id: str) -> Calibration | None:
        if not valid_id(calibration_id):
            return None
        with unavailable("read calibration"):
            raw = await self._redis.get(self._names.calibration(tenant, calibration_id))
        return None if raw is None else Calibration.model_validate_json(raw)

    async def list(self, tenant: str) -> list[Calibration]:
        with unavailable("list calibrations"):
            # The client decodes replies (connection.connect), so the members are str.
            ids = sorted(
                str(i) for i in await self._redis.smembers(self._names.calibrations(tenant))
            )
            if not ids:
                return []
            raws = await self._redis.mget([self._names.calibration(tenant, i) for i in ids])
        found = [Calibration.model_validate_json(r) for r in raws if r is not None]
        return sorted(found, key=lambda c: c.created_at)

    async def delete(self, tenant: str, calibration_id: str) -> bool:
        if not valid_id(calibration_id):
            return False
        with unavailable("delete calibration"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._names.calibration(tenant, calibration_id))
                pipe.srem(self._names.calibrations(tenant), calibration_id)
                removed, _ = await pipe.execute()
        return bool(removed)


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
