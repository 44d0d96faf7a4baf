"""The engine health loop calls on_dead once, within a few intervals of the engine dying."""

from __future__ import annotations

import asyncio
import time

from service.engine.health import TIMEOUT_INTERVALS, watch_engine
from service.errors import EngineFailure


class _Engine:
    """Only ``check_health`` (the loop calls nothing else): healthy until ``die()``."""

    def __init__(self) -> None:
        self.dead = False
        self.hang = False
        self.checks = 0

    async def check_health(self) -> None:
        self.checks += 1
        if self.hang:
            await asyncio.sleep(3600)
        if self.dead:
            raise EngineFailure("engine unhealthy: EngineCore process died")


async def _watch(engine: _Engine, interval: float) -> tuple[list[str], asyncio.Task[None]]:
    reasons: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_engine(engine, interval, stop, reasons.append))  # type: ignore[arg-type]
    return reasons, task


async def test_dead_engine_is_noticed_within_an_interval() -> None:
    engine = _Engine()
    reasons, task = await _watch(engine, 0.05)
    while engine.checks < 3:  # healthy checks happened: the loop is running before the fault
        await asyncio.sleep(0.01)
    assert reasons == []
    engine.dead = True
    died = time.monotonic()
    await asyncio.wait_for(task, 1.0)  # returns after on_dead
    assert time.monotonic() - died < 0.5
    assert len(reasons) == 1
    assert "EngineCore process died" in reasons[0]


async def test_a_hung_health_check_counts_as_dead() -> None:
    engine = _Engine()
    engine.hang = True
    reasons, task = await _watch(engine, 0.02)
    await asyncio.wait_for(task, 0.02 * (TIMEOUT_INTERVALS + 1) + 1.0)
    assert len(reasons) == 1
    assert "did not answer" in reasons[0]


async def test_stop_ends_the_loop_without_a_verdict() -> None:
    engine = _Engine()
    reasons: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_engine(engine, 10.0, stop, reasons.append))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, 1.0)
    assert reasons == []
