"""The per-tenant cap on reward items in flight, in a real Redis shared by two clients (two
API processes); each test owns a fresh key prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from service.errors import ConcurrencyLimited
from service.stores.concurrency import RedisSlots
from service.stores.connection import connect

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def r2() -> AsyncIterator[Redis]:
    """A second client with its own pool, standing in for another API process."""
    client = connect("redis://127.0.0.1:6379/0")
    yield client
    await client.aclose()


async def test_two_processes_share_one_cap_per_tenant(r: Redis, r2: Redis, prefix: str) -> None:
    one, two = RedisSlots(r, prefix, 60), RedisSlots(r2, prefix, 60)
    first = await one.acquire("acme", 6, 10)
    assert first.in_use == 6
    with pytest.raises(ConcurrencyLimited) as info:
        await two.acquire("acme", 5, 10)
    assert info.value.status == 429
    assert info.value.retry_after is not None
    assert info.value.headers == {
        "X-Reward-Concurrency-Limit": "10",
        "X-Reward-Concurrency-In-Use": "6",
    }
    assert "6 reward items in flight" in info.value.message
    other = await two.acquire("globex", 10, 10)  # another tenant has its own slots
    second = await two.acquire("acme", 4, 10)
    assert second.in_use == 10
    await one.release(first)
    third = await one.acquire("acme", 5, 10)
    assert third.in_use == 9
    for lease in (other, second, third):
        await two.release(lease)
    assert await r.zcard(prefix + "inflight:acme") == 0


async def test_concurrent_acquires_never_grant_past_the_cap(
    r: Redis, r2: Redis, prefix: str
) -> None:
    stores = [RedisSlots(r, prefix, 60), RedisSlots(r2, prefix, 60)]

    async def try_one(i: int) -> bool:
        try:
            await stores[i % 2].acquire("acme", 3, 20)
        except ConcurrencyLimited:
            return False
        return True

    granted = await asyncio.gather(*(try_one(i) for i in range(30)))
    assert sum(granted) == 6  # 6 * 3 = 18 <= 20 < 21


async def test_a_lease_never_released_expires(r: Redis, prefix: str) -> None:
    """The slots of an API process that died mid-call come back after the lease time."""
    slots = RedisSlots(r, prefix, lease_s=0.2, grace_s=0.0)
    await slots.acquire("acme", 10, 10)  # never released
    with pytest.raises(ConcurrencyLimited):
        await slots.acquire("acme", 1, 10)
    await asyncio.sleep(0.3)
    lease = await slots.acquire("acme", 10, 10)
    assert lease.in_use == 10
