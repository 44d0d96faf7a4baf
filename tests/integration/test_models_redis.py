"""Several models on one Redis: each model's jobs go to its own stream, only its workers
take them, and each model's workers are counted from the marks they leave as they pull."""

from __future__ import annotations

import asyncio

from service.queue.base import JobResult
from tests.support.jobs import MakeQueue, Spawn, make_job


async def test_a_models_jobs_are_taken_only_by_its_workers(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    api = {m: make_queue("api", model=m) for m in ("judge", "rm")}
    workers = {m: make_queue(f"w-{m}", model=m) for m in ("judge", "rm")}
    job = make_job()
    waiting = spawn(api["rm"].submit(job))
    assert await workers["judge"].pull(8, 10_000, block_ms=300) == []
    batch = await workers["rm"].pull(8, 10_000, block_ms=2000)
    assert [d.job.id for d in batch] == [job.id]
    assert await api["judge"].depth() == 0
    assert await api["rm"].depth() == 1
    await workers["rm"].complete(batch[0], JobResult.success({"by": "rm"}))
    assert (await waiting).body == {"by": "rm"}
    # The result is under the job's id: any model's queue finds it.
    assert (await api["judge"].lookup(job.tenant, job.id)).body == {"by": "rm"}  # type: ignore[union-attr]


async def test_workers_are_the_consumers_seen_within_the_claim_window(
    make_queue: MakeQueue,
) -> None:
    api = make_queue("api", model="rm", claim_idle_ms=2500)
    assert await api.workers() == 0  # no stream yet
    one, two = (make_queue(f"w{i}", model="rm") for i in (1, 2))
    assert await one.pull(8, 10_000, block_ms=10) == []
    assert await two.pull(8, 10_000, block_ms=10) == []
    assert await api.workers() == 2
    assert await make_queue("other", model="judge").workers() == 0
    await asyncio.sleep(1.1)  # a worker marks itself alive at most once a second
    assert await two.pull(8, 10_000, block_ms=10) == []  # still reading
    await asyncio.sleep(1.5)
    assert await api.workers() == 1  # one silent past claim_idle_ms is gone
