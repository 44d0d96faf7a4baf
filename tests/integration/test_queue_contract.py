"""One JobQueue contract, run against both queues: the in-process one and Redis Streams.

What a route and a worker rely on holds for either; queue-specific behaviour (reclaiming,
renewal, dead letters) stays in each queue's own tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from service.config import QueueSettings
from service.errors import Overloaded
from service.queue.base import Job, JobQueue, JobResult, new_job_id
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from tests.support.jobs import MakeQueue, Spawn

pytestmark = pytest.mark.timeout(60)

BIG = 1_000_000
MakeAny = Callable[..., JobQueue]


@pytest.fixture(params=["local", "redis"])
async def make(request: pytest.FixtureRequest, make_queue: MakeQueue) -> AsyncIterator[MakeAny]:
    """Either queue, built the same way (the Redis one under this test's key prefix)."""
    if request.param == "redis":
        yield make_queue
        return
    made: list[LocalQueue] = []

    def local(**overrides: Any) -> LocalQueue:
        values: dict[str, Any] = {"batch_wait_ms": 5, **overrides}
        made.append(LocalQueue(QueueSettings(**values)))
        return made[-1]

    yield local
    for queue in made:
        await queue.close()


def make_job(**kw: Any) -> Job:
    return Job(
        id=new_job_id(), kind="outcome", payload={"q": "2+2?"}, deadline=time.time() + 5, **kw
    )


async def depth_reaches(queue: JobQueue, n: int) -> None:
    end = time.monotonic() + 3
    while await queue.depth() != n:
        assert time.monotonic() < end, f"depth {n} not reached"
        await asyncio.sleep(0.01)


async def test_a_submitted_job_is_answered_by_a_worker(make: MakeAny) -> None:
    queue = make()

    async def echo(job: Job) -> JobResult:
        return JobResult.success({"id": job.id, "tenant": job.tenant})

    worker = Worker(queue, echo, queue.settings, block_ms=50)
    run = asyncio.create_task(worker.run())
    job = make_job(tenant="acme")
    outcome = await asyncio.wait_for(queue.submit(job), 5)
    worker.stop()
    await asyncio.wait_for(run, 5)
    assert (outcome.ok, outcome.status, outcome.body) == (
        True,
        200,
        {"id": job.id, "tenant": "acme"},
    )
    assert await queue.depth() == 0


async def test_a_pull_takes_at_most_the_jobs_asked_for(make: MakeAny, spawn: Spawn) -> None:
    queue = make()
    tasks = [spawn(queue.submit(make_job())) for _ in range(5)]
    await depth_reaches(queue, 5)
    first = await queue.pull(3, BIG, 200)
    second = await queue.pull(3, BIG, 200)
    assert [len(first), len(second)] == [3, 2]
    for delivery in first + second:
        assert await queue.complete(delivery, JobResult.success({"id": delivery.job.id}))
    outcomes = await asyncio.gather(*tasks)
    assert all(o.ok for o in outcomes)
    assert sorted(o.body["id"] for o in outcomes) == sorted(d.job.id for d in first + second)


async def test_a_full_queue_is_overloaded_with_a_retry_after(make: MakeAny, spawn: Spawn) -> None:
    queue = make(max_queue_depth=2)
    spawn(queue.submit(make_job()))
    spawn(queue.submit(make_job()))
    await depth_reaches(queue, 2)
    with pytest.raises(Overloaded) as info:
        await queue.submit(make_job())
    assert info.value.status == 429
    assert (info.value.retry_after or 0) >= 1
