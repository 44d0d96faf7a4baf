"""The per-tenant record store (stores/records.py) in memory and in a real Redis: one
contract, both backends (the calibrations of both families live in it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from service.protocol.mcq import Calibration, CalibrationCost
from service.stores import probability_calibrations as store_module
from service.stores.calibrations import MemoryCalibrations, RedisCalibrations
from service.stores.probability_calibrations import ProbabilityCalibrationStore
from tests.support.calibration_records import record

Make = Callable[[], ProbabilityCalibrationStore]


@pytest.fixture(params=["memory", "redis"])
def make(request: pytest.FixtureRequest, r: Redis, prefix: str) -> Make:
    if request.param == "memory":
        return store_module.memory_store
    return lambda: store_module.redis_store(r, prefix)


async def test_records_are_per_tenant(make: Make) -> None:
    store = make()
    mine, theirs = record(), record()
    await store.put("alpha", mine)
    await store.put("beta", theirs)
    assert await store.get("alpha", mine.id) == mine
    assert await store.get("beta", mine.id) is None
    assert [c.id for c in await store.list("alpha")] == [mine.id]
    assert not await store.delete("beta", mine.id)
    assert await store.get("alpha", mine.id) == mine
    assert await store.delete("alpha", mine.id)
    assert await store.get("alpha", mine.id) is None
    assert await store.list("alpha") == []


async def test_list_is_oldest_first(make: Make) -> None:
    store = make()
    old, new = record(created_at=1.0), record(created_at=2.0)
    await store.put("alpha", new)
    await store.put("alpha", old)
    assert [c.id for c in await store.list("alpha")] == [old.id, new.id]


async def test_a_default_is_per_tenant_and_goes_with_its_record(make: Make) -> None:
    store = make()
    cal = record()
    await store.put("alpha", cal)
    await store.set_default("alpha", "outcome", cal.id)
    assert await store.defaults("alpha") == {"outcome": cal.id}
    assert await store.defaults("beta") == {}
    await store.set_default("alpha", "outcome", None)
    assert await store.defaults("alpha") == {}
    await store.set_default("alpha", "outcome", cal.id)
    assert await store.delete("alpha", cal.id)
    assert await store.defaults("alpha") == {}


@pytest.mark.parametrize(
    "bad", ["", "pcal_", "cal_abcdefgh", "pcal_a:b*cdefgh", "pcal_" + "a" * 65]
)
async def test_ids_of_another_shape_are_never_looked_up(make: Make, bad: str) -> None:
    store = make()
    await store.put("alpha", record(id=bad))  # stored under an id we never hand out
    assert await store.get("alpha", bad) is None
    assert not await store.delete("alpha", bad)


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_the_mcq_priors_keep_no_defaults(backend: str, r: Redis, prefix: str) -> None:
    store = MemoryCalibrations() if backend == "memory" else RedisCalibrations(r, prefix)
    cal = Calibration(
        id="cal_prior_without_defaults",
        method="pride",
        model="m",
        k=2,
        params={"prior": [0.6, 0.4]},
        items=1,
        cost=CalibrationCost(forward_passes=2, tokens=1),
        created_at=0.0,
    )
    await store.put("alpha", cal)
    with pytest.raises(TypeError, match="keeps no defaults"):
        await store.set_default("alpha", "pride", cal.id)
    assert await store.defaults("alpha") == {}
    assert await store.delete("alpha", cal.id)
    assert await store.get("alpha", cal.id) is None
    if backend == "redis":
        assert [k async for k in r.scan_iter(match=f"{prefix}*")] == []
