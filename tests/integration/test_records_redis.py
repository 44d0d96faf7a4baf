"""The per-tenant record store (stores/records.py) in memory and in a real Redis: one
contract, both backends (the calibrations of both families live in it)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from service.protocol.calibrate import CalibrationFit, CalibrationMetrics, ProbabilityCalibration
from service.stores import probability_calibrations as store_module
from service.stores.probability_calibrations import ProbabilityCalibrationStore

Make = Callable[[], ProbabilityCalibrationStore]


def metrics() -> CalibrationMetrics:
    return CalibrationMetrics(
        n=2, base_rate=0.5, mean_probability=0.5, nll=0.7, brier=0.25, ece=0.0, auroc=0.5, bins=[]
    )


def record(target_id: str | None = None, **update: object) -> ProbabilityCalibration:
    fit = CalibrationFit(raw=metrics(), calibrated=metrics())
    cal = ProbabilityCalibration(
        id=target_id or store_module.new_probability_calibration_id(),
        target="outcome",
        method="temperature",
        parameters={"temperature": 2.0, "at_bound": False},
        model="m",
        mode="direct",
        reasoning_tokens=None,
        examples=10,
        positives=5,
        folds=2,
        bins=4,
        seed=0,
        fit_set=fit,
        held_out=fit,
        created_at=time.time(),
    )
    return cal.model_copy(update=update)


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
    await store.put("alpha", record(bad))  # stored under an id we never hand out
    assert await store.get("alpha", bad) is None
    assert not await store.delete("alpha", bad)
