"""The judgment cache over a deterministic in-memory engine (pure logic; the real engine and
Redis are in tests/integration and tests/e2e)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator, Sequence

import pytest

from service.engine.base import JudgeCall, JudgeResult, ModelInfo
from service.serving.cache import (
    CachedJudgment,
    CachingEngine,
    MemoryStore,
    judgment_key,
)
from service.serving.context import current_tenant
from tests.support.fakes import INFO, CountingEngine, call


@pytest.fixture(autouse=True)
def tenant() -> Iterator[str]:
    """The job runner sets the tenant before a job runs; these tests call the engine directly."""
    token = current_tenant.set("default")
    yield "default"
    current_tenant.reset(token)


def cached(engine: CountingEngine, store: MemoryStore | None = None) -> CachingEngine:
    return CachingEngine(engine, store or MemoryStore(1000, 3600))  # type: ignore[arg-type]


async def test_a_repeat_is_answered_from_the_cache_with_the_same_score() -> None:
    engine = CountingEngine()
    caching = cached(engine)
    fresh = (await caching.judge([call(1, 2, 3)]))[0]
    again = (await caching.judge([call(1, 2, 3)]))[0]
    assert len(engine.scored) == 1
    assert abs(again.logit - fresh.logit) < 1e-9
    assert fresh.usage.cached_judgments == 0
    assert fresh.usage.total_tokens == 4
    assert again.usage.cached_judgments == 1
    assert again.usage.total_tokens == 0  # a cached judgment costs no engine tokens
    assert again.usage.engine_calls == 0
    assert (caching.store.hits, caching.store.misses) == (1, 1)


async def test_duplicates_in_one_list_are_scored_once_and_order_is_kept() -> None:
    engine = CountingEngine()
    caching = cached(engine)
    calls = [call(1), call(2), call(1), call(3), call(2), call(1)]
    results = await caching.judge(calls)
    assert [len(c.prompt_ids) and c.prompt_ids[0] for c in engine.scored] == [1, 2, 3]
    assert [round(r.logit * 7) for r in results] == [1, 2, 1, 3, 2, 1]
    assert [r.usage.cached_judgments for r in results] == [0, 0, 1, 0, 1, 1]


async def test_concurrent_identical_judgments_are_scored_once() -> None:
    engine = CountingEngine(delay=0.05)
    caching = cached(engine)
    results = await asyncio.gather(*(caching.judge([call(5, 6)]) for _ in range(8)))
    assert len(engine.scored) == 1
    assert len({r[0].logit for r in results}) == 1
    assert sum(r[0].usage.cached_judgments for r in results) == 7


async def test_sampled_without_seed_is_never_cached_but_seeded_is() -> None:
    engine = CountingEngine()
    caching = cached(engine)
    sampled = [call(1, temperature=0.7), call(1, temperature=0.7)]
    a = await caching.judge(sampled)
    b = await caching.judge(sampled)
    assert len(engine.scored) == 4
    assert len({r.logit for r in a + b}) == 4  # four fresh draws
    seeded = call(1, temperature=0.7, seed=3)
    first = await caching.judge([seeded])
    second = await caching.judge([seeded])
    assert len(engine.scored) == 5
    assert second[0].logit == first[0].logit
    assert second[0].usage.cached_judgments == 1


async def test_cache_false_scores_afresh() -> None:
    engine = CountingEngine()
    caching = cached(engine)
    await caching.judge([call(1)])
    result = await caching.judge([call(1, cache=False)])
    assert len(engine.scored) == 2
    assert result[0].usage.cached_judgments == 0


async def test_scopes_do_not_share_entries() -> None:
    engine = CountingEngine()
    caching = cached(engine)

    async def as_tenant(tenant: str) -> JudgeResult:
        current_tenant.set(tenant)
        return (await caching.judge([call(4)]))[0]

    a = await asyncio.create_task(as_tenant("a"))
    b = await asyncio.create_task(as_tenant("b"))
    a2 = await asyncio.create_task(as_tenant("a"))
    assert len(engine.scored) == 2
    assert (a.usage.cached_judgments, b.usage.cached_judgments) == (0, 0)
    assert a2.usage.cached_judgments == 1


def test_the_key_covers_every_scoring_parameter() -> None:
    base = judgment_key(INFO, "t", call(1, 2))
    variants = [
        judgment_key(INFO, "u", call(1, 2)),
        judgment_key(INFO, "t", call(1, 3)),
        judgment_key(INFO, "t", JudgeCall(prompt_ids=[1, 2], verdict_ids=[8])),
        judgment_key(INFO, "t", call(1, 2, reasoning_tokens=8)),
        judgment_key(INFO, "t", call(1, 2, temperature=0.5, seed=1)),
        judgment_key(INFO, "t", call(1, 2, stop=("x",))),
        judgment_key(
            ModelInfo(name="m", path="/m", max_model_len=1, device="cpu", dtype="bfloat16"),
            "t",
            call(1, 2),
        ),
    ]
    assert base == judgment_key(INFO, "t", call(1, 2))
    assert len({base, *variants}) == len(variants) + 1


async def test_an_engine_failure_reaches_the_caller_and_is_not_cached() -> None:
    engine = CountingEngine(fail=True)
    caching = cached(engine)
    with pytest.raises(RuntimeError, match="engine down"):
        await caching.judge([call(7), call(7)])
    engine.fail = False
    result = await caching.judge([call(7)])
    assert result[0].usage.cached_judgments == 0
    assert caching._inflight == {}


async def test_a_waiter_scores_itself_when_the_first_asker_is_cancelled() -> None:
    engine = CountingEngine(delay=0.2)
    caching = cached(engine)
    first = asyncio.create_task(caching.judge([call(8)]))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(caching.judge([call(8)]))
    await asyncio.sleep(0.01)
    first.cancel()  # its deadline passed
    result = await asyncio.wait_for(second, 2)
    assert round(result[0].logit * 7) == 8
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_memory_store_evicts_the_oldest_and_expires() -> None:
    store = MemoryStore(max_entries=2, ttl_s=3600)
    value = CachedJudgment(0.5, None, 0, None)
    await store.put_many([("a", value), ("b", value)])
    assert await store.get_many(["a"]) == [value]  # a is now the most recent
    await store.put_many([("c", value)])
    assert await store.get_many(["a", "b", "c"]) == [value, None, value]
    assert store.evictions == 1
    short = MemoryStore(max_entries=10, ttl_s=0.05)
    await short.put_many([("x", value)])
    await asyncio.sleep(0.1)
    assert await short.get_many(["x"]) == [None]


def test_cached_judgment_json_round_trip_is_exact() -> None:
    value = CachedJudgment(0.1 + 0.2, "because\n", 7, "eos")
    assert CachedJudgment.from_json(value.to_json()) == value


async def test_a_judgment_outside_a_job_has_no_tenant_and_raises() -> None:
    """No default tenant: a path that forgot to set it fails instead of sharing one scope."""
    caching = cached(CountingEngine())
    with pytest.raises(LookupError):
        await asyncio.create_task(caching.judge([call(1)]), context=contextvars.Context())


class PlantedBugStore(MemoryStore):
    """A store with a bug (not an outage) in ``op``."""

    def __init__(self, op: str) -> None:
        super().__init__(1000, 3600)
        self.op = op

    async def get_many(self, keys: Sequence[str]) -> list[CachedJudgment | None]:
        if self.op == "lookup":
            raise ValueError("planted lookup bug")
        return await super().get_many(keys)

    async def put_many(self, items: Sequence[tuple[str, CachedJudgment]]) -> None:
        if self.op == "write":
            raise ValueError("planted write bug")
        await super().put_many(items)


@pytest.mark.parametrize("op", ["lookup", "write"])
async def test_a_store_error_that_is_not_redis_unreachable_propagates(op: str) -> None:
    store = PlantedBugStore(op)
    with pytest.raises(ValueError, match=f"planted {op} bug"):
        await cached(CountingEngine(), store).judge([call(1)])
    assert store.errors == {"lookup": 0, "write": 0}  # not counted as tolerated either
