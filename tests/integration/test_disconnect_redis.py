"""A caller that hangs up, on a real Redis: an unclaimed job is skipped, a claimed one aborted
and answered with what it spent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from redis.asyncio import Redis

from service.api.pipeline import spent_after_disconnect
from service.ops import spend
from service.queue.base import Job, JobResult
from service.queue.redis_streams import RedisQueue
from service.queue.worker import Worker
from service.stores.keys import GROUP, RedisNames
from tests.support.jobs import MakeQueue, make_job

pytestmark = pytest.mark.timeout(60)


@dataclass
class Runs:
    """What the worker's handler saw: jobs started, and jobs whose run was cancelled."""

    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    running: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, job: Job) -> JobResult:
        spend.record(50, 5)  # as an engine request that finished before the caller left
        self.started.append(job.id)
        self.running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.append(job.id)
            raise
        return JobResult.success({})


@pytest.fixture
async def worker(make_queue: MakeQueue) -> AsyncIterator[tuple[RedisQueue, Worker, Runs]]:
    queue = make_queue("w1", claim_idle_ms=2000)
    runs = Runs()
    worker = Worker(queue, runs.handle, queue.settings, block_ms=100)
    yield queue, worker, runs
    worker.stop()


async def _leave(caller: asyncio.Task[JobResult]) -> None:
    caller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await caller


async def _pending(r: Redis, names: RedisNames) -> int:
    info = await r.xpending(names.stream, GROUP)
    return int(info["pending"])


async def until(predicate: object, timeout: float = 5.0) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():  # type: ignore[operator]
        assert loop.time() - start < timeout, "condition not reached in time"
        await asyncio.sleep(0.01)
    return loop.time() - start


async def test_an_unclaimed_cancelled_job_is_acked_not_run(
    make_queue: MakeQueue, worker: tuple[RedisQueue, Worker, Runs], r: Redis, names: RedisNames
) -> None:
    queue, w, runs = worker
    submitter = make_queue("api")
    job = make_job(timeout_s=20)
    caller = asyncio.create_task(submitter.submit(job))
    await asyncio.sleep(0.1)  # let it reach BLPOP
    assert await r.xlen(names.stream) == 1  # queued, nobody claimed it yet
    await _leave(caller)
    assert await r.exists(names.cancel(job.id)) == 1
    run = asyncio.create_task(w.run())
    await until(lambda: queue.dropped_expired == 1)
    w.stop()
    await run
    assert runs.started == []
    assert await _pending(r, names) == 0  # acked


async def test_a_claimed_job_is_aborted_when_its_caller_leaves(
    make_queue: MakeQueue, worker: tuple[RedisQueue, Worker, Runs], r: Redis, names: RedisNames
) -> None:
    _, w, runs = worker
    submitter = make_queue("api")
    run = asyncio.create_task(w.run())
    job = make_job(timeout_s=20)
    caller = asyncio.create_task(submitter.submit(job))
    await runs.running.wait()
    assert await _pending(r, names) == 1  # claimed by the worker
    await _leave(caller)
    took = await until(lambda: runs.cancelled == [job.id])
    assert took < 1.0
    await until(lambda: w.inflight == 0)
    stored = JobResult.from_json(await r.get(names.result(job.tenant, job.id)))
    assert stored.error_type == "client_disconnected"
    assert stored.spent_tokens == 55  # what the caller's quota is settled for
    assert await spent_after_disconnect(submitter, job.tenant, job.id) == 55
    assert await _pending(r, names) == 0  # acked, never redelivered
    w.stop()
    await run


async def test_a_shared_job_runs_on_while_another_caller_waits(
    make_queue: MakeQueue, worker: tuple[RedisQueue, Worker, Runs]
) -> None:
    _, w, runs = worker
    submitter = make_queue("api")
    run = asyncio.create_task(w.run())
    job = make_job(timeout_s=20)
    first = asyncio.create_task(submitter.submit(job, idempotency_key="k"))
    await runs.running.wait()
    second = asyncio.create_task(submitter.submit(make_job(timeout_s=20), idempotency_key="k"))
    await asyncio.sleep(0.1)  # the second caller joined
    await _leave(first)
    await asyncio.sleep(0.7)  # several cancel polls
    assert runs.cancelled == []
    await _leave(second)
    await until(lambda: runs.cancelled == [job.id])
    w.stop()
    await run
