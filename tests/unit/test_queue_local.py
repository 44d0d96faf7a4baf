"""LocalQueue: batching bounds, deadlines, cancellation, idempotency (the worker: test_worker)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

import pytest

from service.config import QueueSettings
from service.errors import (
    DeadlineExceeded,
    InvalidRequest,
    JobFailed,
    Overloaded,
    QueueUnavailable,
    ServiceError,
)
from service.queue.base import Delivery, Job, JobResult, new_job_id
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from tests.support.jobs import counting_handler, make_job, submit_all, wait_depth

pytestmark = pytest.mark.timeout(60)

BIG = 1_000_000


@pytest.fixture
def settings() -> QueueSettings:
    return QueueSettings(batch_wait_ms=5, max_queue_depth=100, claim_idle_ms=300)


@pytest.fixture
async def queue(settings: QueueSettings) -> AsyncIterator[LocalQueue]:
    q = LocalQueue(settings)
    yield q
    await q.close()


async def finish(queue: LocalQueue, batch: list[Delivery]) -> None:
    for d in batch:
        assert await queue.complete(d, JobResult.success({"id": d.job.id}))


# -- wire format ------------------------------------------------------------------------


def test_job_json_round_trip() -> None:
    job = make_job(est_tokens=7, tenant="acme", payload={"q": "x", "n": [1, 2]})
    assert Job.from_json(job.to_json()) == job


def test_job_ids_are_unguessable_url_safe_tokens() -> None:
    # Result keys are addressed by id: 16 random bytes, base64url without padding (22 chars).
    ids = [new_job_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) for i in ids)
    # Every position varies: no counter or timestamp prefix an attacker could predict.
    assert all(len({i[k] for i in ids}) > 32 for k in range(21))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"id": 1}', r"(?s)^4 validation errors for Job\nid\n  Input should be a valid string"),
        ("[1, 2]", r"(?s)^1 validation error for Job\n  Input should be an object"),
        ("not json", r"(?s)^1 validation error for Job\n  Invalid JSON"),
        (
            '{"id":"a","kind":"k","payload":{},"deadline":1}',
            r"(?s)^1 validation error for Job\nkind\n  Input should be 'outcome', 'process'",
        ),
        (
            '{"id":"a","kind":"outcome","payload":{},"deadline":true}',
            r"(?s)^1 validation error for Job\ndeadline\n  Input should be a valid number",
        ),
    ],
)
def test_job_from_json_rejects_malformed(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Job.from_json(raw)


def test_tenant_with_colon_is_rejected() -> None:
    with pytest.raises(InvalidRequest, match="tenant"):
        make_job(tenant="a:b")


def test_outcome_json_and_error_mapping() -> None:
    ok = JobResult.success({"score": 0.5})
    assert JobResult.from_json(ok.to_json()) == ok
    ok.raise_for_error()
    failed = JobResult.from_error(JobFailed("boom"))
    assert JobResult.from_json(failed.to_json()) == failed
    with pytest.raises(JobFailed, match="boom"):
        failed.raise_for_error()
    unknown = JobResult.failure(418, "teapot", "short and stout")
    with pytest.raises(ServiceError, match="stout") as info:
        unknown.raise_for_error()
    assert (info.value.status, info.value.type) == (418, "teapot")


# -- batching -----------------------------------------------------------------------------


async def test_pull_caps_batch_by_job_count(queue: LocalQueue) -> None:
    tasks = submit_all(queue, [make_job() for _ in range(5)])
    await wait_depth(queue, 5)
    first = await queue.pull(3, BIG, 100)
    second = await queue.pull(3, BIG, 100)
    assert [len(first), len(second)] == [3, 2]
    await finish(queue, first + second)
    outcomes = await asyncio.gather(*tasks)
    assert all(o.ok for o in outcomes)


async def test_pull_caps_batch_by_tokens_and_keeps_fifo(queue: LocalQueue) -> None:
    jobs = [make_job(est_tokens=40) for _ in range(3)]
    tasks = submit_all(queue, jobs)
    await wait_depth(queue, 3)
    first = await queue.pull(10, 100, 100)
    second = await queue.pull(10, 100, 100)
    assert [d.job.id for d in first] == [jobs[0].id, jobs[1].id]
    assert [d.job.id for d in second] == [jobs[2].id]
    await finish(queue, first + second)
    await asyncio.gather(*tasks)


async def test_oversized_job_is_delivered_alone(queue: LocalQueue) -> None:
    jobs = [make_job(est_tokens=500), make_job(est_tokens=10)]
    tasks = submit_all(queue, jobs)
    await wait_depth(queue, 2)
    first = await queue.pull(10, 100, 100)
    assert [d.job.id for d in first] == [jobs[0].id]
    second = await queue.pull(10, 100, 100)
    assert [d.job.id for d in second] == [jobs[1].id]
    await finish(queue, first + second)
    await asyncio.gather(*tasks)


async def test_pull_waits_the_batch_window_for_more() -> None:
    queue = LocalQueue(QueueSettings(batch_wait_ms=300))
    first = asyncio.create_task(queue.submit(make_job()))
    pulling = asyncio.create_task(queue.pull(10, BIG, 1000))
    await asyncio.sleep(0.05)  # the pull holds the first job and waits for more
    assert not pulling.done()
    second = asyncio.create_task(queue.submit(make_job()))
    batch = await pulling
    assert len(batch) == 2
    await finish(queue, batch)
    await asyncio.gather(first, second)
    await queue.close()


async def test_pull_returns_empty_after_block_ms(queue: LocalQueue) -> None:
    start = time.monotonic()
    assert await queue.pull(10, BIG, 50) == []
    assert 0.04 <= time.monotonic() - start < 0.5


async def test_pull_rejects_bad_arguments(queue: LocalQueue) -> None:
    with pytest.raises(ValueError, match="max_jobs"):
        await queue.pull(0, 10, 10)


# -- deadlines, cancellation, backpressure -------------------------------------------


async def test_deadline_raises_and_job_is_dropped(queue: LocalQueue) -> None:
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await queue.submit(make_job(timeout_s=0.1))
    assert time.monotonic() - start < 0.5
    assert await queue.pull(10, BIG, 0) == []
    assert queue.dropped_expired == 1
    assert await queue.depth() == 0


async def test_cancelled_caller_is_dropped(queue: LocalQueue) -> None:
    task = asyncio.create_task(queue.submit(make_job()))
    await wait_depth(queue, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await queue.pull(10, BIG, 0) == []
    assert queue.dropped_expired == 1


async def test_result_after_caller_left_is_not_an_error(queue: LocalQueue) -> None:
    task = asyncio.create_task(queue.submit(make_job()))
    await wait_depth(queue, 1)
    [delivery] = await queue.pull(10, BIG, 0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not await queue.complete(delivery, JobResult.success({}))


async def test_first_result_wins(queue: LocalQueue) -> None:
    task = asyncio.create_task(queue.submit(make_job()))
    await wait_depth(queue, 1)
    [delivery] = await queue.pull(10, BIG, 0)
    assert await queue.complete(delivery, JobResult.success({"v": 1}))
    assert not await queue.complete(delivery, JobResult.success({"v": 2}))
    assert (await task).body == {"v": 1}
    assert queue.duplicate_results == 1


async def test_full_queue_is_overloaded() -> None:
    queue = LocalQueue(QueueSettings(max_queue_depth=2))
    tasks = submit_all(queue, [make_job(), make_job()])
    await wait_depth(queue, 2)
    with pytest.raises(Overloaded) as info:
        await queue.submit(make_job())
    assert info.value.retry_after is not None
    assert info.value.retry_after > 0
    await queue.close()
    for task in tasks:
        with pytest.raises(QueueUnavailable):
            await task


async def test_close_resolves_waiting_callers(queue: LocalQueue) -> None:
    task = asyncio.create_task(queue.submit(make_job()))
    await wait_depth(queue, 1)
    await queue.close()
    with pytest.raises(QueueUnavailable):
        await task
    with pytest.raises(QueueUnavailable):
        await queue.submit(make_job())


# -- idempotency --------------------------------------------------------------------------


@pytest.fixture
async def running(
    queue: LocalQueue, settings: QueueSettings
) -> AsyncIterator[tuple[LocalQueue, list[str]]]:
    calls: list[str] = []
    worker = Worker(queue, counting_handler(calls), settings, block_ms=20)
    task = asyncio.create_task(worker.run())
    yield queue, calls
    worker.stop()
    await task


async def test_idempotency_key_returns_same_outcome(running: tuple[LocalQueue, list[str]]) -> None:
    queue, calls = running
    first = await queue.submit(make_job(), idempotency_key="k1")
    again = await queue.submit(make_job(), idempotency_key="k1")
    assert not first.replayed
    assert again == first.as_replay()  # same body; marked so that it is not charged again
    assert len(calls) == 1
    both = await asyncio.gather(
        queue.submit(make_job(), idempotency_key="k2"),
        queue.submit(make_job(), idempotency_key="k2"),
    )
    assert both[0].body == both[1].body
    assert sorted(o.replayed for o in both) == [False, True]
    assert len(calls) == 2


async def test_idempotency_is_scoped_by_tenant(running: tuple[LocalQueue, list[str]]) -> None:
    queue, calls = running
    a = await queue.submit(make_job(tenant="a"), idempotency_key="k")
    b = await queue.submit(make_job(tenant="b"), idempotency_key="k")
    assert a.body is not None
    assert b.body is not None
    assert (a.body["tenant"], b.body["tenant"]) == ("a", "b")
    assert len(calls) == 2


async def test_idempotency_key_is_freed_when_the_job_expires(queue: LocalQueue) -> None:
    with pytest.raises(DeadlineExceeded):
        await queue.submit(make_job(timeout_s=0.05), idempotency_key="k")
    retry = make_job()
    task = asyncio.create_task(queue.submit(retry, idempotency_key="k"))
    await asyncio.sleep(0.01)
    batch = await queue.pull(10, BIG, 100)
    assert [d.job.id for d in batch] == [retry.id]
    await finish(queue, batch)
    assert (await task).ok
