"""Per-tenant records fitted once and kept until deleted (calibrations of both families).

Redis when configured (kept across restarts, shared by API and worker processes), else memory.
Every read and write is scoped by tenant: a tenant can neither read, list, use nor delete
another's record. Where the family has defaults (probability calibrations), a tenant may also
mark one record per *slot* (a calibration target) as its default; deleting that record clears
the mark. A family without defaults (the MCQ priors) keeps no defaults key.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel
from redis.asyncio import Redis

from service.stores.connection import unavailable

R = TypeVar("R", bound=BaseModel)


def new_id(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(12)


def id_pattern(prefix: str) -> re.Pattern[str]:
    """Ids are part of Redis key names: only our own shape is ever looked up."""
    return re.compile(re.escape(prefix) + r"[A-Za-z0-9_-]{8,64}")


def _created(record: BaseModel) -> float:
    created: float = getattr(record, "created_at")  # noqa: B009 - every record type has it
    return created


NO_DEFAULTS = "this record family keeps no defaults"


class RecordStore(Protocol[R]):
    async def put(self, tenant: str, record: R) -> None: ...

    async def get(self, tenant: str, record_id: str) -> R | None: ...

    async def list(self, tenant: str) -> list[R]: ...

    async def delete(self, tenant: str, record_id: str) -> bool: ...

    async def set_default(self, tenant: str, slot: str, record_id: str | None) -> None: ...

    async def defaults(self, tenant: str) -> dict[str, str]: ...


class MemoryRecords(Generic[R]):
    """In-process store (single-process service with the local queue)."""

    def __init__(self, id_prefix: str, *, with_defaults: bool = True) -> None:
        self._pattern = id_pattern(id_prefix)
        self._data: dict[tuple[str, str], R] = {}
        self._defaults: dict[str, dict[str, str]] = {}
        self._with_defaults = with_defaults

    async def put(self, tenant: str, record: R) -> None:
        self._data[(tenant, getattr(record, "id"))] = record  # noqa: B009

    async def get(self, tenant: str, record_id: str) -> R | None:
        if self._pattern.fullmatch(record_id) is None:
            return None
        return self._data.get((tenant, record_id))

    async def list(self, tenant: str) -> list[R]:
        return sorted((r for (t, _), r in self._data.items() if t == tenant), key=_created)

    async def delete(self, tenant: str, record_id: str) -> bool:
        if self._pattern.fullmatch(record_id) is None:
            return False
        marks = self._defaults.get(tenant, {})
        for slot in [s for s, i in marks.items() if i == record_id]:
            del marks[slot]
        return self._data.pop((tenant, record_id), None) is not None

    async def set_default(self, tenant: str, slot: str, record_id: str | None) -> None:
        if not self._with_defaults:
            raise TypeError(NO_DEFAULTS)
        marks = self._defaults.setdefault(tenant, {})
        if record_id is None:
            marks.pop(slot, None)
        else:
            marks[slot] = record_id

    async def defaults(self, tenant: str) -> dict[str, str]:
        return dict(self._defaults.get(tenant, {}))


class RedisRecords(Generic[R]):
    """One JSON string per record, a per-tenant id set and a per-tenant hash of defaults
    (slot -> id); no TTL (kept until deleted). Key names come from ``keys.RedisNames``."""

    def __init__(
        self,
        redis: Redis,
        model: type[R],
        id_prefix: str,
        record_key: Callable[[str, str], str],
        index_key: Callable[[str], str],
        defaults_key: Callable[[str], str] | None = None,
    ) -> None:
        """The key names: ``record_key(tenant, id)``, ``index_key(tenant)`` (the id set) and
        ``defaults_key(tenant)`` (the hash of defaults; None: the family has none)."""
        self._redis = redis
        self._model = model
        self._pattern = id_pattern(id_prefix)
        self._record, self._index, self._defaults = record_key, index_key, defaults_key

    def _key(self, tenant: str, record_id: str) -> str:
        return self._record(tenant, record_id)

    async def put(self, tenant: str, record: R) -> None:
        record_id = getattr(record, "id")  # noqa: B009
        with unavailable("store a record"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(self._key(tenant, record_id), record.model_dump_json())
                pipe.sadd(self._index(tenant), record_id)
                await pipe.execute()

    async def get(self, tenant: str, record_id: str) -> R | None:
        if self._pattern.fullmatch(record_id) is None:
            return None
        with unavailable("read a record"):
            raw = await self._redis.get(self._key(tenant, record_id))
        return None if raw is None else self._model.model_validate_json(raw)

    async def list(self, tenant: str) -> list[R]:
        with unavailable("list records"):
            # The client decodes replies (connection.connect), so the members are str.
            ids = sorted(str(i) for i in await self._redis.smembers(self._index(tenant)))
            if not ids:
                return []
            raws = await self._redis.mget([self._key(tenant, i) for i in ids])
        return sorted(
            (self._model.model_validate_json(r) for r in raws if r is not None), key=_created
        )

    async def delete(self, tenant: str, record_id: str) -> bool:
        if self._pattern.fullmatch(record_id) is None:
            return False
        defaults = None if self._defaults is None else self._defaults(tenant)
        with unavailable("delete a record"):
            marks = {} if defaults is None else await self._redis.hgetall(defaults)
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(tenant, record_id))
                pipe.srem(self._index(tenant), record_id)
                if defaults is not None:
                    for slot in [s for s, i in marks.items() if i == record_id]:
                        pipe.hdel(defaults, slot)
                removed, *_ = await pipe.execute()
        return bool(removed)

    async def set_default(self, tenant: str, slot: str, record_id: str | None) -> None:
        if self._defaults is None:
            raise TypeError(NO_DEFAULTS)
        defaults = self._defaults(tenant)
        with unavailable("mark a default"):
            if record_id is None:
                await self._redis.hdel(defaults, slot)
            else:
                await self._redis.hset(defaults, slot, record_id)

    async def defaults(self, tenant: str) -> dict[str, str]:
        if self._defaults is None:
            return {}
        with unavailable("read the defaults"):
            marks = await self._redis.hgetall(self._defaults(tenant))
        return {str(k): str(v) for k, v in marks.items()}
