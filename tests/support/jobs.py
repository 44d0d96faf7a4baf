"""Jobs and queue helpers of the queue and worker tests (local queue and Redis Streams)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from service.queue.base import Job, JobResult, new_job_id
from service.queue.local import LocalQueue
from service.queue.redis_streams import RedisQueue

# The types of tests/integration/conftest.py's `make_queue` and `spawn` fixtures.
MakeQueue = Callable[..., RedisQueue]
Spawn = Callable[[Coroutine[Any, Any, JobResult]], "asyncio.Task[JobResult]"]
Handler = Callable[[Job], Awaitable[JobResult]]


def make_job(est_tokens: int = 0, timeout_s: float = 5.0, **kw: Any) -> Job:
    return Job(
        id=new_job_id(),
        kind=kw.pop("kind", "outcome"),
        payload=kw.pop("payload", {"n": 1}),
        deadline=time.time() + timeout_s,
        est_tokens=est_tokens,
        **kw,
    )


async def wait_depth(queue: LocalQueue, n: int) -> None:
    """Let submit tasks reach the queue (they enqueue on their first step)."""
    for _ in range(200):
        if await queue.depth() == n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"depth stayed at {await queue.depth()}, expected {n}")


def submit_all(queue: LocalQueue, jobs: list[Job]) -> list[asyncio.Task[JobResult]]:
    return [asyncio.create_task(queue.submit(job)) for job in jobs]


def counting_handler(calls: list[str]) -> Handler:
    """A handler that records each job id it runs and answers after 10 ms."""

    async def handle(job: Job) -> JobResult:
        calls.append(job.id)
        await asyncio.sleep(0.01)
        return JobResult.success({"ran": job.id, "tenant": job.tenant})

    return handle
