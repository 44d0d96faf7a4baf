"""RedisStore (the shared judgment cache) against a real Redis; each test owns a key prefix."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from uuid import uuid4

import pytest

from service.ops.telemetry import Metrics
from service.serving.cache import CachedJudgment, CachingEngine, RedisStore
from service.serving.context import current_tenant
from service.stores.connection import connect
from service.stores.keys import RedisNames
from tests.support.fakes import CountingEngine, call

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def tenant() -> Iterator[None]:
    """The job runner sets the tenant before a job runs; these tests call the engine directly."""
    token = current_tenant.set("default")
    yield
    current_tenant.reset(token)


REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    p = f"t{uuid4().hex[:10]}:"
    yield p
    client = connect(REDIS_URL)
    keys = [k async for k in client.scan_iter(match=p + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def store(prefix: str, max_entries: int = 100, ttl_s: int = 3600) -> RedisStore:
    return RedisStore(connect(REDIS_URL), prefix, max_entries, ttl_s)


async def test_entries_round_trip_with_their_ttl(prefix: str) -> None:
    s = store(prefix, ttl_s=120)
    value = CachedJudgment(-1.25, "why", 3, "verdict")
    await s.put_many([("k1", value)])
    assert await s.get_many(["k1", "missing"]) == [value, None]
    ttl = await s._redis.ttl(RedisNames(prefix).judgment("k1"))
    assert 0 < ttl <= 120
    await s._redis.aclose()  # the store does not own its client


async def test_the_size_cap_evicts_the_oldest(prefix: str) -> None:
    s = store(prefix, max_entries=3)
    value = CachedJudgment(0.0, None, 0, None)
    for i in range(5):
        await s.put_many([(f"k{i}", value)])
        await asyncio.sleep(0.002)  # distinct index times
    found = await s.get_many([f"k{i}" for i in range(5)])
    assert found == [None, None, value, value, value]
    assert s.evictions == 2
    assert await s._redis.zcard(RedisNames(prefix).judgment_index) == 3
    await s._redis.aclose()  # the store does not own its client


async def test_two_workers_share_the_cache(prefix: str) -> None:
    """A judgment scored by one worker's engine is answered from Redis for another."""
    a_engine, b_engine = CountingEngine(), CountingEngine()
    a = CachingEngine(a_engine, store(prefix))  # type: ignore[arg-type]
    b = CachingEngine(b_engine, store(prefix))  # type: ignore[arg-type]
    fresh = await a.judge([call(3, 4)])
    again = await b.judge([call(3, 4)])
    assert (len(a_engine.scored), len(b_engine.scored)) == (1, 0)
    assert again[0].logit == fresh[0].logit
    assert again[0].usage.cached_judgments == 1
    await a.store._redis.aclose()  # type: ignore[attr-defined]
    await b.store._redis.aclose()  # type: ignore[attr-defined]


async def test_redis_down_scores_afresh_counts_and_warns_once_per_op(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listens on port 1: every lookup and write fails as unreachable, is tolerated,
    counted by op in the metric, and logged once per op (not once per judgment)."""
    engine = CountingEngine()
    store = RedisStore(connect("redis://127.0.0.1:1/0", 0.2), "x:", 10, 60)
    caching = CachingEngine(engine, store)  # type: ignore[arg-type]
    metrics = Metrics()
    metrics.watch_cache(store, "judge")
    with caplog.at_level(logging.WARNING, logger="service.serving.cache"):
        results = await caching.judge([call(1), call(1)])
        await caching.judge([call(2)])
    assert len(engine.scored) == 2  # still deduplicated within the list
    assert [r.usage.cached_judgments for r in results] == [0, 1]
    assert store.errors == {"lookup": 2, "write": 2}
    text = metrics.render().decode()
    assert 'verifier_judgment_cache_errors_total{op="lookup"} 2.0' in text
    assert 'verifier_judgment_cache_errors_total{op="write"} 2.0' in text
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned
    assert any(m.startswith("judgment cache lookup failed 1 time(s)") for m in warned)
    await store._redis.aclose()
