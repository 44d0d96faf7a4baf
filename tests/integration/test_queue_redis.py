"""RedisQueue against a real Redis (127.0.0.1:6379); each test owns a fresh key prefix.

Recovery tests start their own throwaway ``redis-server`` on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from loadtests.harness import RedisProcess, free_port
from service.errors import DeadlineExceeded, JobFailed, Overloaded, QueueUnavailable
from service.queue.base import Delivery, Job, JobResult, new_job_id
from service.queue.redis_streams import RedisQueue
from service.queue.worker import Worker
from service.stores.keys import GROUP, RedisNames
from tests.support.jobs import MakeQueue, Spawn

pytestmark = pytest.mark.timeout(60)

BIG = 1_000_000


def make_job(est_tokens: int = 0, timeout_s: float = 5.0, **kw: Any) -> Job:
    return Job(
        id=new_job_id(),
        kind="outcome",
        payload=kw.pop("payload", {"q": "2+2?", "r": "4"}),
        deadline=time.time() + timeout_s,
        est_tokens=est_tokens,
        **kw,
    )


async def echo(job: Job) -> JobResult:
    return JobResult.success({"id": job.id, "tenant": job.tenant, "payload": job.payload})


@contextlib.asynccontextmanager
async def serving(
    queue: RedisQueue, handler: Callable[[Job], Any] = echo, **kw: Any
) -> AsyncIterator[Worker]:
    worker = Worker(queue, handler, queue.settings, block_ms=50, **kw)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 5)


async def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 3.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def wait_depth(queue: RedisQueue, n: int) -> None:
    async def reached() -> bool:
        return await queue.depth() == n

    await wait_for(reached, f"depth {n}")


async def finish(queue: RedisQueue, batch: list[Delivery]) -> None:
    for d in batch:
        assert await queue.complete(d, JobResult.success({"id": d.job.id}))


# -- round trip and batching --------------------------------------------------------------


async def test_round_trip(make_queue: MakeQueue) -> None:
    queue = make_queue()
    async with serving(queue):
        job = make_job(tenant="acme")
        outcome = await queue.submit(job)
    assert outcome.ok
    assert outcome.status == 200
    assert outcome.body == {"id": job.id, "tenant": "acme", "payload": job.payload}
    assert await queue.depth() == 0


async def test_pull_is_bounded_by_job_count(make_queue: MakeQueue, spawn: Spawn) -> None:
    queue = make_queue()
    tasks = [spawn(queue.submit(make_job())) for _ in range(5)]
    await wait_depth(queue, 5)
    first = await queue.pull(3, BIG, 200)
    second = await queue.pull(3, BIG, 200)
    assert [len(first), len(second)] == [3, 2]
    await finish(queue, first + second)
    assert all(o.ok for o in await asyncio.gather(*tasks))


async def test_pull_is_bounded_by_tokens(
    make_queue: MakeQueue, spawn: Spawn, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    jobs = [make_job(est_tokens=40) for _ in range(3)] + [make_job(500), make_job(10)]
    tasks = []
    for job in jobs:  # one by one, so stream order is job order
        tasks.append(spawn(queue.submit(job)))
        await wait_depth(queue, len(tasks))
    batches = [await queue.pull(10, 100, 200) for _ in range(4)]
    ids = [[d.job.id for d in batch] for batch in batches]
    expected = [[jobs[0].id, jobs[1].id], [jobs[2].id], [jobs[3].id], [jobs[4].id]]
    assert ids == expected  # the 500-token job runs alone; FIFO order is kept
    # Held-back jobs stayed pending for this consumer and were not re-delivered.
    assert all(d.deliveries == 1 for batch in batches for d in batch)
    for batch in batches:
        await finish(queue, batch)
    await asyncio.gather(*tasks)
    assert (await r.xpending(names.stream, GROUP))["pending"] == 0


async def test_batch_window_collects_late_jobs(make_queue: MakeQueue, spawn: Spawn) -> None:
    queue = make_queue(batch_wait_ms=400)
    tasks = [spawn(queue.submit(make_job()))]
    await wait_depth(queue, 1)
    pulling = asyncio.create_task(queue.pull(10, BIG, 1000))
    await asyncio.sleep(0.1)
    assert not pulling.done()
    tasks.append(spawn(queue.submit(make_job())))
    batch = await pulling
    assert len(batch) == 2
    await finish(queue, batch)
    await asyncio.gather(*tasks)


async def test_first_result_wins(make_queue: MakeQueue, spawn: Spawn) -> None:
    queue = make_queue()
    task = spawn(queue.submit(make_job()))
    await wait_depth(queue, 1)
    [delivery] = await queue.pull(10, BIG, 200)
    assert await queue.complete(delivery, JobResult.success({"v": 1}))
    assert not await queue.complete(delivery, JobResult.success({"v": 2}))
    assert (await task).body == {"v": 1}
    assert queue.duplicate_results == 1


# -- redelivery, dead letters, renewal ---------------------------------------------------


async def test_idle_job_is_reclaimed_by_another_consumer(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    crashed, rescuer = make_queue("a"), make_queue("b")
    task = spawn(crashed.submit(make_job()))
    await wait_depth(crashed, 1)
    [lost] = await crashed.pull(10, BIG, 200)
    assert lost.deliveries == 1
    assert await rescuer.pull(10, BIG, 50) == []  # not idle long enough yet
    await asyncio.sleep(0.35)
    [again] = await rescuer.pull(10, BIG, 50)
    assert (again.job, again.deliveries) == (lost.job, 2)
    assert rescuer.redelivered == 1
    assert await rescuer.complete(again, JobResult.success({"by": "b"}))
    assert (await task).body == {"by": "b"}
    assert not await crashed.complete(lost, JobResult.success({"by": "a"}))


async def test_poison_job_is_dead_lettered(
    make_queue: MakeQueue, spawn: Spawn, r: Redis, names: RedisNames
) -> None:
    queues = [make_queue(f"w{i}", max_deliveries=2) for i in range(3)]
    task = spawn(queues[0].submit(make_job()))
    await wait_depth(queues[0], 1)
    for n, queue in enumerate(queues[:2], start=1):
        [delivery] = await queue.pull(10, BIG, 50)
        assert delivery.deliveries == n  # and the worker "crashes": no complete()
        await asyncio.sleep(0.35)
    assert await queues[2].pull(10, BIG, 50) == []
    assert queues[2].dead == 1
    outcome = await task
    assert (outcome.ok, outcome.status, outcome.error_type) == (False, 502, "job_failed")
    with pytest.raises(JobFailed):
        outcome.raise_for_error()
    assert await r.xlen(names.dead) == 1
    assert (await r.xpending(names.stream, GROUP))["pending"] == 0


async def test_malformed_entry_is_dead_lettered(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    await r.xadd(names.stream, {"job": "{not json"})
    assert await queue.pull(10, BIG, 50) == []
    assert queue.dead == 1
    assert await r.xlen(names.dead) == 1
    assert await queue.depth() == 0


async def test_an_addressable_malformed_entry_is_answered_422(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    """A kind this worker does not know (the API runs a newer version): dead-lettered, and its
    caller told at once instead of waiting for the deadline."""
    queue = make_queue()
    job = json.loads(make_job(tenant="acme").to_json())
    job["kind"] = "from_a_newer_api"
    await r.xadd(names.stream, {"job": json.dumps(job)})
    assert await queue.pull(10, BIG, 50) == []
    assert (queue.dead, await r.xlen(names.dead)) == (1, 1)
    result = await queue.lookup("acme", job["id"])
    assert result is not None
    assert (result.ok, result.status, result.error_type) == (False, 422, "invalid_request")
    assert "this worker cannot run the job" in (result.error_message or "")
    assert await r.lrange(names.notify("acme", job["id"]), 0, -1) == ["1"]
    assert await queue.lookup("default", job["id"]) is None  # still the tenant's alone


async def test_renewal_keeps_a_slow_job_from_being_stolen(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    slow, thief = make_queue("slow"), make_queue("thief")
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def handle(job: Job) -> JobResult:
        calls.append(job.id)
        started.set()
        await release.wait()
        return JobResult.success({"by": "slow"})

    async with serving(slow, handle):
        task = asyncio.create_task(slow.submit(make_job()))
        await asyncio.wait_for(started.wait(), 3)
        end = time.monotonic() + 1.0  # more than three idle windows
        while time.monotonic() < end:
            assert await thief.pull(10, BIG, 100) == []
        [entry] = await r.xpending_range(names.stream, GROUP, "-", "+", 10)
        assert (entry["consumer"], entry["times_delivered"]) == ("slow", 1)
        release.set()
        assert (await task).body == {"by": "slow"}
    assert calls == [calls[0]]
    assert thief.redelivered == 0


async def test_late_renewal_does_not_take_a_job_back(
    make_queue: MakeQueue, spawn: Spawn, r: Redis, names: RedisNames
) -> None:
    a, b = make_queue("a"), make_queue("b")
    spawn(a.submit(make_job()))
    await wait_depth(a, 1)
    batch = await a.pull(10, BIG, 200)
    await asyncio.sleep(0.35)
    [stolen] = await b.pull(10, BIG, 50)
    await a.renew(batch)
    [info] = await r.xpending_range(names.stream, GROUP, stolen.handle, stolen.handle, 1)
    assert (info["consumer"], info["times_delivered"]) == ("b", 2)


async def test_held_job_taken_over_by_another_consumer_is_not_run_twice(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    a, b = make_queue("a"), make_queue("b")
    jobs = [make_job(est_tokens=80), make_job(est_tokens=80)]
    tasks = []
    for job in jobs:
        tasks.append(spawn(a.submit(job)))
        await wait_depth(a, len(tasks))
    first = await a.pull(10, 100, 200)  # the second job is held back by the token cap
    assert [d.job.id for d in first] == [jobs[0].id]
    await asyncio.sleep(0.35)  # nobody renews: both entries go idle
    taken = await b.pull(10, BIG, 50)
    assert sorted(d.job.id for d in taken) == sorted(j.id for j in jobs)
    assert await a.pull(10, 100, 50) == []  # a no longer owns its held entry
    await finish(b, taken)
    await asyncio.gather(*tasks)


# -- deadlines, cancellation --------------------------------------------------------------


async def test_submit_never_waits_past_the_deadline(make_queue: MakeQueue) -> None:
    queue = make_queue()
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await queue.submit(make_job(timeout_s=1.3))  # crosses a 1 s BLPOP slice
    assert 1.25 <= time.monotonic() - start < 1.8


async def test_expired_jobs_are_dropped_and_counted(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    gone = make_job(timeout_s=0.2)
    with pytest.raises(DeadlineExceeded):
        await queue.submit(gone)
    assert await r.exists(names.cancel(gone.id)) == 1
    # A job whose deadline passed while queued, without any cancel marker.
    stale = make_job(timeout_s=-1.0)
    await r.xadd(names.stream, {"job": stale.to_json()})
    assert await queue.pull(10, BIG, 50) == []
    assert queue.dropped_expired == 2
    assert (await r.xpending(names.stream, GROUP))["pending"] == 0
    assert await queue.depth() == 0


async def test_cancelled_caller_job_is_skipped(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    job = make_job()
    task = asyncio.create_task(queue.submit(job))
    await wait_depth(queue, 1)
    await asyncio.sleep(0.05)  # let it reach BLPOP
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await r.exists(names.cancel(job.id)) == 1
    assert await queue.pull(10, BIG, 50) == []
    assert queue.dropped_expired == 1


# -- idempotency and tenants ------------------------------------------------------------


async def test_idempotency_key_returns_the_stored_outcome(make_queue: MakeQueue) -> None:
    queue = make_queue()
    calls: list[str] = []

    async def handle(job: Job) -> JobResult:
        calls.append(job.id)
        await asyncio.sleep(0.05)
        return JobResult.success({"ran": job.id})

    async with serving(queue, handle):
        first = await queue.submit(make_job(), idempotency_key="req-1")
        again = await queue.submit(make_job(), idempotency_key="req-1")
        assert not first.replayed
        assert again == first.as_replay()  # same body; marked so that it is not charged again
        assert len(calls) == 1
        three = await asyncio.gather(
            queue.submit(make_job(), idempotency_key="req-2"),
            queue.submit(make_job(), idempotency_key="req-2"),
            queue.submit(make_job(), idempotency_key="req-2"),
        )
    assert three[0].body == three[1].body == three[2].body
    assert sorted(o.replayed for o in three) == [False, True, True]
    assert len(calls) == 2


async def test_idempotency_key_is_freed_when_the_job_expires(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    with pytest.raises(DeadlineExceeded):
        await queue.submit(make_job(timeout_s=0.2), idempotency_key="k")
    assert await r.exists(names.idem("default", "k")) == 0
    async with serving(queue):
        retry = make_job()
        outcome = await queue.submit(retry, idempotency_key="k")
    assert (outcome.body or {}).get("id") == retry.id


async def test_tenants_do_not_share_results_or_keys(
    make_queue: MakeQueue, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    job_a, job_b = make_job(tenant="a"), make_job(tenant="b")
    async with serving(queue):
        out_a = await queue.submit(job_a, idempotency_key="same")
        out_b = await queue.submit(job_b, idempotency_key="same")
    assert (out_a.body or {}).get("id") == job_a.id
    assert (out_b.body or {}).get("id") == job_b.id
    assert await r.get(names.result("a", job_a.id)) is not None
    assert await r.get(names.result("b", job_a.id)) is None
    assert names.idem("a", "same") != names.idem("b", "same")


# -- backpressure, outages, housekeeping -----------------------------------------------


async def test_full_queue_is_overloaded(make_queue: MakeQueue, spawn: Spawn) -> None:
    queue = make_queue(max_queue_depth=2)
    spawn(queue.submit(make_job()))
    spawn(queue.submit(make_job()))
    await wait_depth(queue, 2)
    with pytest.raises(Overloaded) as info:
        await queue.submit(make_job())
    assert (info.value.retry_after or 0) >= 1
    assert info.value.status == 429


async def test_unreachable_redis_is_queue_unavailable_fast(make_queue: MakeQueue) -> None:
    queue = make_queue(url=f"redis://127.0.0.1:{free_port()}/0")
    for call in (
        lambda: queue.submit(make_job()),
        lambda: queue.pull(10, BIG, 1000),
        lambda: queue.depth(),
        lambda: queue.complete(Delivery(make_job(), "1-0"), JobResult.success({})),
    ):
        start = time.monotonic()
        with pytest.raises(QueueUnavailable, match="VERIFIER_REDIS_URL"):
            await call()
        assert time.monotonic() - start < 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    """A throwaway redis-server this test owns."""
    with RedisProcess(data_dir=tmp_path) as own:
        yield own


def admin(server: RedisProcess) -> redis.Redis:
    # No retries: a dropped connection is the expected answer.
    return redis.Redis(port=server.port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


async def test_recovers_after_a_redis_restart(make_queue: MakeQueue, server: RedisProcess) -> None:
    queue = make_queue(url=server.url)
    async with serving(queue):
        assert (await queue.submit(make_job())).ok
        server.stop()
        start = time.monotonic()
        with pytest.raises(QueueUnavailable):
            await queue.submit(make_job())
        assert time.monotonic() - start < 3
        server.start()  # empty: stream and consumer group are gone
        outcome = await queue.submit(make_job())
    assert outcome.ok


async def test_hung_redis_is_queue_unavailable_fast(
    make_queue: MakeQueue, server: RedisProcess
) -> None:
    queue = make_queue(url=server.url)
    assert await queue.depth() == 0  # a pooled connection exists
    assert server.process is not None
    server.process.signal(signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(QueueUnavailable):
            await queue.submit(make_job())
        assert time.monotonic() - start < 3
    finally:
        server.process.signal(signal.SIGCONT)
    async with serving(queue):
        assert (await queue.submit(make_job())).ok


async def test_dropped_connections_heal_without_errors(
    make_queue: MakeQueue, server: RedisProcess
) -> None:
    queue = make_queue(url=server.url)
    async with serving(queue):
        assert (await queue.submit(make_job())).ok
        killed = admin(server).client_kill_filter(_type="normal")
        assert killed >= 2  # the worker's and the submitter's pooled connections
        assert (await queue.submit(make_job())).ok


async def test_stream_is_trimmed_after_acks(
    make_queue: MakeQueue, spawn: Spawn, r: Redis, names: RedisNames
) -> None:
    queue = make_queue()
    tasks = [spawn(queue.submit(make_job())) for _ in range(2)]
    await wait_depth(queue, 2)
    first = await queue.pull(1, BIG, 100)
    await finish(queue, first)
    second = await queue.pull(1, BIG, 100)  # trims the acked first entry
    assert await r.xlen(names.stream) == 1  # the pending one stays
    await finish(queue, second)
    await asyncio.gather(*tasks)
    assert await queue.trim() == 1
    assert await r.xlen(names.stream) == 0
    async with serving(queue):
        for _ in range(5):
            assert (await queue.submit(make_job())).ok

        async def drained() -> bool:
            return await r.xlen(names.stream) == 0

        await wait_for(drained, "the worker to trim the stream")
    assert await queue.depth() == 0


async def test_depth_counts_queued_and_in_flight(make_queue: MakeQueue, spawn: Spawn) -> None:
    queue = make_queue()
    for _ in range(3):
        spawn(queue.submit(make_job()))
    await wait_depth(queue, 3)
    batch = await queue.pull(2, BIG, 100)
    assert await queue.depth() == 3
    await finish(queue, batch[:1])
    assert await queue.depth() == 2
