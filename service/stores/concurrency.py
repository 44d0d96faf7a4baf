"""Per-tenant caps on reward work in flight (``VERIFIER_REWARD__MAX_CONCURRENT_ITEMS``).

A reward call leases as many slots as it has items (samples) for as long as it runs; a call
that would take the tenant past the cap is refused at once (429 ``concurrency_limited``,
Retry-After), so one trainer's burst cannot fill every worker ahead of other tenants, and a
trainer reads the cap and its use from the response headers to size its concurrency.

With Redis the leases are shared by every API process::

    verifier:inflight:<tenant>   sorted set: member "<lease id>:<items>", score = its expiry
                                 (ms, Redis' clock); PEXPIRE = the lease time

A lease expires after the request timeout plus a grace, so the slots of an API process that
died mid-call come back by themselves. Without Redis one process holds the count.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis

from service.errors import ConcurrencyLimited
from service.stores.connection import is_unreachable, unavailable
from service.stores.keys import RedisNames

logger = logging.getLogger(__name__)

# A lease outlives the longest call by this much before it counts as leaked.
LEASE_GRACE_S = 30.0
# A refused caller retries after this long (a slot frees when any call of the tenant ends).
RETRY_AFTER_S = 1.0

# ARGV: member, items, cap, lease ms. Returns {granted (0/1), items in use after the call}.
_ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local used = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  used = used + tonumber(string.match(m, ':(%d+)$'))
end
local n = tonumber(ARGV[2])
if used + n > tonumber(ARGV[3]) then
  return {0, used}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1] .. ':' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
return {1, used + n}
"""


@dataclass(frozen=True, slots=True)
class Lease:
    """Slots held by one call: ``in_use`` is the tenant's items in flight with it."""

    tenant: str
    member: str
    items: int
    in_use: int
    limit: int


class Slots(Protocol):
    async def acquire(self, tenant: str, items: int, limit: int) -> Lease:
        """Hold ``items`` slots of the tenant's ``limit``, or ``ConcurrencyLimited``."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the slots back; never raises (a lost release expires with its lease)."""
        ...


def refuse(tenant: str, items: int, used: int, limit: int) -> ConcurrencyLimited:
    return ConcurrencyLimited(
        f"tenant {tenant} has {used} reward items in flight and this call brings {items}; "
        f"at most {limit} run at once (VERIFIER_REWARD__MAX_CONCURRENT_ITEMS): retry when a "
        "call ends, or send fewer items at once",
        retry_after=RETRY_AFTER_S,
        headers=headers(limit, used),
    )


def headers(limit: int, in_use: int) -> dict[str, str]:
    """What every reward answer (and a refusal) says about the tenant's slots."""
    return {"X-Reward-Concurrency-Limit": str(limit), "X-Reward-Concurrency-In-Use": str(in_use)}


class RedisSlots:
    """Leases in one sorted set per tenant, checked and taken in one Lua call."""

    def __init__(
        self, redis: Redis, prefix: str, lease_s: float, grace_s: float = LEASE_GRACE_S
    ) -> None:
        self._redis = redis
        self._names = RedisNames(prefix)
        self._lease_ms = max(1, int((lease_s + grace_s) * 1000))
        self._script = redis.register_script(_ACQUIRE_LUA)

    async def acquire(self, tenant: str, items: int, limit: int) -> Lease:
        member = secrets.token_hex(8)
        key = self._names.inflight(tenant)
        with unavailable("reward concurrency"):
            granted, used = await self._script(
                keys=[key], args=[member, items, limit, self._lease_ms]
            )
        if not granted:
            raise refuse(tenant, items, int(used), limit)
        return Lease(tenant, f"{member}:{items}", items, int(used), limit)

    async def release(self, lease: Lease) -> None:
        try:
            await self._redis.zrem(self._names.inflight(lease.tenant), lease.member)
        except Exception as exc:
            if not is_unreachable(exc):
                raise
            logger.warning(
                "could not release %d reward slots of %s: %s", lease.items, lease.tenant, exc
            )


class MemorySlots:
    """One process's count (no Redis): the same caps, for a single ``verifier serve``."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    # No await between the read and the write: each call is atomic on the event loop.
    async def acquire(self, tenant: str, items: int, limit: int) -> Lease:
        used = self._used.get(tenant, 0)
        if used + items > limit:
            raise refuse(tenant, items, used, limit)
        self._used[tenant] = used + items
        return Lease(tenant, f"{secrets.token_hex(8)}:{items}", items, used + items, limit)

    async def release(self, lease: Lease) -> None:
        left = self._used.get(lease.tenant, 0) - lease.items
        if left > 0:
            self._used[lease.tenant] = left
        else:
            self._used.pop(lease.tenant, None)
