"""A caller that hangs up: the disconnect race, and the worker aborting the job it claimed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest

from service.api.disconnect import race_disconnect
from service.config import QueueSettings
from service.errors import ClientDisconnected
from service.queue.base import Job, JobResult
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from tests.support.jobs import make_job
from tests.support.workers import local_worker

pytestmark = pytest.mark.timeout(30)


class Receive:
    """An ASGI receive channel: ``http.request`` messages, then a disconnect once told."""

    def __init__(self, before: int = 0) -> None:
        self.before = before
        self.hang_up = asyncio.Event()

    async def __call__(self) -> MutableMapping[str, Any]:
        if self.before > 0:
            self.before -= 1
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.hang_up.wait()
        return {"type": "http.disconnect"}


async def test_work_that_ends_first_returns_its_result() -> None:
    receive = Receive(before=2)

    async def work() -> str:
        await asyncio.sleep(0.01)
        return "answer"

    assert await race_disconnect(receive, work()) == "answer"


async def test_work_errors_pass_through() -> None:
    async def work() -> str:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await race_disconnect(Receive(), work())


async def test_a_disconnect_cancels_the_work_and_raises() -> None:
    receive = Receive(before=1)
    started, unwound = asyncio.Event(), asyncio.Event()

    async def work() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            unwound.set()
        return "too late"

    race = asyncio.create_task(race_disconnect(receive, work()))
    await started.wait()
    assert not unwound.is_set()
    receive.hang_up.set()
    with pytest.raises(ClientDisconnected):
        await race
    assert unwound.is_set()  # the work was cancelled and unwound before the error


# -- the worker side ----------------------------------------------------------------------


@pytest.fixture
async def running() -> AsyncIterator[tuple[LocalQueue, list[str], asyncio.Event]]:
    """A worker on a local queue whose handler runs until cancelled, noting each job's end."""
    ended: list[str] = []
    started = asyncio.Event()

    async def handle(job: Job) -> JobResult:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append(f"cancelled:{job.id}")
            raise
        return JobResult.success({})

    async with local_worker(handle) as queue:
        yield queue, ended, started


def count_cancel_polls(queue: LocalQueue) -> list[int]:
    """Wrap the queue's ``cancelled`` to count the worker's cancel polls (its progress)."""
    polls: list[int] = []
    check = queue.cancelled

    async def counted(deliveries: Any) -> set[str]:
        polls.append(len(deliveries))
        return await check(deliveries)

    queue.cancelled = counted  # type: ignore[method-assign]
    return polls


async def until(predicate: Any, timeout: float = 3.0) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():
        assert loop.time() - start < timeout, "condition not reached in time"
        await asyncio.sleep(0.01)
    return loop.time() - start


async def test_the_worker_aborts_a_claimed_job_whose_caller_left(
    running: tuple[LocalQueue, list[str], asyncio.Event],
) -> None:
    queue, ended, started = running
    job = make_job(timeout_s=20)
    caller = asyncio.create_task(queue.submit(job))
    await started.wait()  # claimed and running
    caller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await caller
    took = await until(lambda: ended == [f"cancelled:{job.id}"])
    assert took < 1.0  # one poll (0.2 s) and the unwinding
    await until(lambda: queue._in_flight == {})  # answered (acked), not left in flight


async def test_a_job_shared_by_an_idempotency_key_runs_while_one_caller_waits(
    running: tuple[LocalQueue, list[str], asyncio.Event],
) -> None:
    queue, ended, started = running
    job = make_job(timeout_s=20)
    first = asyncio.create_task(queue.submit(job, idempotency_key="k"))
    await started.wait()
    second = asyncio.create_task(queue.submit(make_job(timeout_s=20), idempotency_key="k"))
    polls = count_cancel_polls(queue)
    await until(lambda: queue._idem[(job.tenant, "k")][0].waiters == 2)  # both wait on it
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    seen = len(polls)
    await until(lambda: len(polls) >= seen + 3)  # three cancel polls since the first left
    assert ended == []  # the second caller still waits: the job keeps running
    second.cancel()
    await until(lambda: ended == [f"cancelled:{job.id}"])
    with contextlib.suppress(asyncio.CancelledError):
        await second


async def test_an_unclaimed_job_whose_caller_left_is_never_run() -> None:
    queue = LocalQueue(QueueSettings(batch_wait_ms=5, max_queue_depth=100))
    ran: list[str] = []

    async def handle(job: Job) -> JobResult:
        ran.append(job.id)
        return JobResult.success({})

    caller = asyncio.create_task(queue.submit(make_job(timeout_s=20)))
    await asyncio.sleep(0.01)
    caller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await caller
    beats: list[int] = []
    worker = Worker(queue, handle, queue.settings, block_ms=50, on_progress=lambda: beats.append(1))
    task = asyncio.create_task(worker.run())
    await until(lambda: len(beats) >= 3)  # pulled past the job, then found the queue empty
    worker.stop()
    await task
    assert ran == []
    assert queue.dropped_expired == 1
