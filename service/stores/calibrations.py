"""Where fitted MCQ calibrations live: Redis when configured (kept across restarts, shared by
API and worker processes), else memory. Every read and write is scoped by tenant: a tenant can
neither read, list, use nor delete another's calibration.
"""

from __future__ import annotations

import re
import secrets
from typing import Protocol

from redis.asyncio import Redis

from service.protocol.mcq import Calibration
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
