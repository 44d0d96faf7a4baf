"""Worker: continuous pulling, one answer per job, drain, renewal, and the ways it gives up.

Run against the real LocalQueue; queues that misbehave (renewals or pulls that swallow their
cancellation, as a timeout inside a Redis client can) are LocalQueue subclasses.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

import pytest

from service.config import QueueSettings
from service.errors import InvalidRequest, QueueUnavailable
from service.queue.base import Delivery, Job, JobResult
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from tests.support.jobs import counting_handler, make_job, submit_all, wait_depth

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def settings() -> QueueSettings:
    return QueueSettings(batch_wait_ms=5, max_queue_depth=100, claim_idle_ms=300)


class RecordingQueue(LocalQueue):
    """Keeps every outcome the worker reports (by payload case), even for callers that left."""

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self.outcomes: dict[str, JobResult] = {}
        self.completes: list[str] = []

    async def complete(self, delivery: Delivery, outcome: JobResult) -> bool:
        case = str(delivery.job.payload.get("case", delivery.job.id))
        self.outcomes[case] = outcome
        self.completes.append(case)
        return await super().complete(delivery, outcome)


async def until(predicate: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.005)


async def run_until_answered(
    worker: Worker, queue: RecordingQueue, n: int, timeout: float = 5.0
) -> None:
    run = asyncio.create_task(worker.run())
    try:
        await until(lambda: len(queue.outcomes) >= n, timeout)
    finally:
        worker.stop()
        await asyncio.wait_for(run, 5)


async def test_worker_maps_handler_errors(settings: QueueSettings) -> None:
    queue = RecordingQueue(settings)

    async def handle(job: Job) -> JobResult:
        case = job.payload["case"]
        if case == "invalid":
            raise InvalidRequest("bad field")
        if case == "crash":
            raise RuntimeError("secret detail")
        if case == "slow":
            await asyncio.sleep(5)
        if case == "not-an-outcome":
            return {"oops": 1}  # type: ignore[return-value]
        return JobResult.success({"case": case})

    cases = {"ok": 5.0, "invalid": 5.0, "crash": 5.0, "slow": 0.2, "not-an-outcome": 5.0}
    tasks = [
        asyncio.create_task(queue.submit(make_job(timeout_s=t, payload={"case": c})))
        for c, t in cases.items()
    ]
    await wait_depth(queue, len(cases))
    await run_until_answered(Worker(queue, handle, settings, block_ms=10), queue, len(cases))
    got = {c: (o.status, o.error_type) for c, o in queue.outcomes.items()}
    assert got == {
        "ok": (200, None),
        "invalid": (422, "invalid_request"),
        "crash": (500, "internal_error"),
        "slow": (504, "deadline_exceeded"),
        "not-an-outcome": (500, "internal_error"),
    }
    assert "secret" not in (queue.outcomes["crash"].error_message or "")
    assert sorted(queue.completes) == sorted(cases)  # exactly one answer per job
    await asyncio.gather(*tasks, return_exceptions=True)
    await queue.close()


async def test_a_fast_job_overtakes_a_slow_one(settings: QueueSettings) -> None:
    """No head-of-line blocking: a job pulled later is answered while an earlier one runs."""
    queue = RecordingQueue(settings)
    release = asyncio.Event()

    async def handle(job: Job) -> JobResult:
        if job.payload["case"] == "slow":
            await release.wait()
        return JobResult.success({})

    worker = Worker(queue, handle, settings, block_ms=10)
    run = asyncio.create_task(worker.run())
    slow = asyncio.create_task(queue.submit(make_job(payload={"case": "slow"})))
    await until(lambda: worker.inflight == 1)
    fast = await asyncio.wait_for(queue.submit(make_job(payload={"case": "fast"})), 2)
    assert fast.ok
    assert not slow.done()
    assert queue.completes == ["fast"]
    release.set()
    assert (await slow).ok
    worker.stop()
    await asyncio.wait_for(run, 2)
    await queue.close()


async def test_worker_pulls_only_under_its_inflight_caps() -> None:
    settings = QueueSettings(batch_wait_ms=5, max_inflight_jobs=2, max_inflight_tokens=1000)
    queue = RecordingQueue(settings)
    release = asyncio.Event()
    running: list[str] = []
    counts: list[int] = []

    async def handle(job: Job) -> JobResult:
        running.append(job.payload["case"])
        await release.wait()
        return JobResult.success({})

    beats = [0]

    def beat() -> None:
        beats[0] += 1

    async def loop_turns(n: int) -> None:
        # Absence is proved after the loop has gone round n more times, not after a sleep.
        target = beats[0] + n
        await until(lambda: beats[0] >= target)

    worker = Worker(
        queue, handle, settings, block_ms=10, on_inflight=counts.append, on_progress=beat
    )
    tasks = submit_all(queue, [make_job(payload={"case": str(i)}) for i in range(3)])
    await wait_depth(queue, 3)
    run = asyncio.create_task(worker.run())
    await until(lambda: len(running) == 2)
    await loop_turns(5)
    assert len(running) == 2  # the third waits for room
    release.set()
    assert all(o.ok for o in await asyncio.gather(*tasks))
    assert running == ["0", "1", "2"]
    assert max(counts) == 2
    # Tokens cap too, soft by one job: with 900 estimated tokens in flight there is room
    # (100), so the next job is pulled whatever its size; after it (1100) nothing is.
    release.clear()
    sizes = {"big": 900, "next": 200, "last": 1}
    submitted = []
    for case, tokens in sizes.items():
        submitted.append(
            asyncio.create_task(queue.submit(make_job(est_tokens=tokens, payload={"case": case})))
        )
        await asyncio.sleep(0.05)
    await until(lambda: "next" in running)
    await loop_turns(5)
    assert "last" not in running
    release.set()
    assert all(o.ok for o in await asyncio.gather(*submitted))
    assert running[-1] == "last"
    worker.stop()
    await asyncio.wait_for(run, 2)
    await queue.close()


async def test_worker_stop_drains_the_jobs_in_flight(
    settings: QueueSettings,
) -> None:
    queue = LocalQueue(settings)
    started, release = asyncio.Event(), asyncio.Event()
    batches: list[tuple[int, int]] = []

    async def handle(job: Job) -> JobResult:
        started.set()
        await release.wait()
        return JobResult.success({"id": job.id})

    worker = Worker(
        queue, handle, settings, on_batch=lambda n, t: batches.append((n, t)), block_ms=20
    )
    tasks = submit_all(queue, [make_job(est_tokens=3), make_job(est_tokens=4)])
    await wait_depth(queue, 2)
    run = asyncio.create_task(worker.run())
    await started.wait()
    worker.stop()
    await asyncio.sleep(0.1)  # a pull under way at stop() (20 ms) has returned by now
    late = asyncio.create_task(queue.submit(make_job(timeout_s=0.5)))
    await asyncio.sleep(0.05)
    assert not run.done()  # still running the jobs in hand
    release.set()
    await asyncio.wait_for(run, 2)
    outcomes = await asyncio.gather(*tasks)
    assert all(o.ok for o in outcomes)
    assert batches == [(2, 7)]
    with pytest.raises(Exception, match="deadline"):
        await late  # submitted after stop(): never pulled
    await queue.close()


class RenewingQueue(LocalQueue):
    """A LocalQueue that looks Renewable; its first renewal fails."""

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self.renewals: list[list[str]] = []

    async def renew(self, deliveries: Sequence[Delivery]) -> None:
        self.renewals.append(sorted(d.job.id for d in deliveries))
        if len(self.renewals) == 1:
            raise QueueUnavailable("flaky")


async def test_worker_renews_exactly_the_jobs_in_flight() -> None:
    queue = RenewingQueue(QueueSettings(claim_idle_ms=150, batch_wait_ms=1))
    durations = {"short": 0.05, "long": 0.4}

    async def handle(job: Job) -> JobResult:
        await asyncio.sleep(durations[job.payload["case"]])  # renewals every 50 ms
        return JobResult.success({})

    short, long = (make_job(payload={"case": c}) for c in durations)
    tasks = submit_all(queue, [short, long])
    await wait_depth(queue, 2)
    worker = Worker(queue, handle, queue.settings, block_ms=10)
    run = asyncio.create_task(worker.run())
    assert all(o.ok for o in await asyncio.gather(*tasks))
    worker.stop()
    await asyncio.wait_for(run, 2)
    assert len(queue.renewals) >= 4
    assert queue.renewals[-1] == [long.id]  # the finished job is no longer renewed
    assert all(r in ([long.id], sorted([short.id, long.id])) for r in queue.renewals)
    await queue.close()


async def test_draining_keeps_the_renewal_pace_and_does_not_spin() -> None:
    """While draining, helper loops still wait their interval (they must not see stop() as a
    wake-up and run in a tight loop against Redis)."""
    queue = RenewingQueue(QueueSettings(claim_idle_ms=300, batch_wait_ms=1))
    release = asyncio.Event()
    beats: list[float] = []

    async def handle(job: Job) -> JobResult:
        await release.wait()
        return JobResult.success({})

    worker = Worker(queue, handle, queue.settings, block_ms=10, on_progress=lambda: beats.append(1))
    run = asyncio.create_task(worker.run())
    submitted = asyncio.create_task(queue.submit(make_job()))
    await until(lambda: worker.inflight == 1)
    worker.stop()
    renewals, heartbeat = len(queue.renewals), len(beats)
    await asyncio.sleep(0.5)  # five renewal intervals of 100 ms
    assert len(queue.renewals) - renewals <= 6
    assert len(beats) - heartbeat <= 6  # the drain loop wakes about once a second, or on a job
    release.set()
    assert (await submitted).ok
    await asyncio.wait_for(run, 2)
    await queue.close()


class SwallowingRenewQueue(RecordingQueue):
    """Renewals that misbehave the way a Redis call with its own timeout can.

    ``convert``: a cancellation arriving inside renew() comes out as TimeoutError (it used to
    leave the worker waiting forever on its renewal task). ``hang``: renew() never returns
    and swallows every cancellation.
    """

    def __init__(self, settings: QueueSettings, how: str) -> None:
        super().__init__(settings)
        self.how = how
        self.renewals = 0
        self.released = asyncio.Event()

    async def renew(self, deliveries: Sequence[Delivery]) -> None:
        self.renewals += 1
        if self.how == "convert":
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                raise TimeoutError from None
            return
        while not self.released.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await self.released.wait()


@pytest.mark.parametrize("how", ["convert", "hang"])
async def test_a_renewal_that_swallows_cancellation_never_stops_the_worker(how: str) -> None:
    settings = QueueSettings(claim_idle_ms=150, batch_wait_ms=1, stuck_grace_s=5)
    queue = SwallowingRenewQueue(settings, how)

    async def handle(job: Job) -> JobResult:
        await asyncio.sleep(0.2)  # several renewal rounds while it runs
        return JobResult.success({})

    worker = Worker(queue, handle, settings, block_ms=10)
    run = asyncio.create_task(worker.run())
    try:
        for i in range(3):  # one after the other: the worker pulls again after each
            outcome = await asyncio.wait_for(queue.submit(make_job(payload={"case": i})), 3)
            assert outcome.ok
        # A hung renewal is never stacked on or waited for; the next round skips it.
        assert queue.renewals >= 2 if how == "convert" else queue.renewals == 1
        assert queue.completes == ["0", "1", "2"]
        worker.stop()
        started = time.monotonic()
        await asyncio.wait_for(run, 3)  # stopping never waits on a hung renewal
        assert time.monotonic() - started < 2
    finally:
        queue.released.set()
        await queue.close()


async def test_worker_gives_up_on_a_handler_that_ignores_its_deadline() -> None:
    settings = QueueSettings(batch_wait_ms=5, stuck_grace_s=0.2)
    queue = RecordingQueue(settings)
    release, returned = asyncio.Event(), asyncio.Event()

    async def handle(job: Job) -> JobResult:
        if job.payload["case"] == "wedged":
            while not release.is_set():  # swallows every cancellation, like a wedged engine
                with contextlib.suppress(asyncio.CancelledError):
                    await release.wait()
            returned.set()
        return JobResult.success({})

    cases = {"ok": 1.0, "wedged": 0.1}
    tasks = [
        asyncio.create_task(queue.submit(make_job(timeout_s=t, payload={"case": c})))
        for c, t in cases.items()
    ]
    await wait_depth(queue, 2)
    worker = Worker(queue, handle, settings, block_ms=10)
    start = time.monotonic()
    try:
        await asyncio.wait_for(worker.run(), 5)  # run() returns: the worker took itself out
    finally:
        release.set()  # let the wedged task end, whatever happened
    assert time.monotonic() - start < 3
    got = {c: (o.status, o.error_type) for c, o in queue.outcomes.items()}
    assert got == {"ok": (200, None), "wedged": (504, "deadline_exceeded")}
    await asyncio.wait_for(returned.wait(), 2)  # the released handler has returned ...
    for _ in range(5):  # ... and whatever it set off has had its turns: no second answer
        await asyncio.sleep(0)
    assert sorted(queue.completes) == ["ok", "wedged"]
    assert worker.failure is not None
    assert "ignored its deadline" in worker.failure
    await asyncio.gather(*tasks, return_exceptions=True)
    await queue.close()


class HangingPullQueue(LocalQueue):
    """Its second pull never returns and swallows every cancellation."""

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self.pulls = 0
        self.released = asyncio.Event()

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        self.pulls += 1
        if self.pulls >= 2:
            while not self.released.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await self.released.wait()
            return []
        return await super().pull(max_jobs, max_tokens, block_ms)


async def test_a_stalled_loop_is_noticed_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = QueueSettings(batch_wait_ms=5, stuck_grace_s=0.3)
    queue = HangingPullQueue(settings)
    stalls: list[str] = []
    worker = Worker(queue, counting_handler([]), settings, block_ms=10, on_stall=stalls.append)
    run = asyncio.create_task(worker.run())
    try:
        await until(lambda: bool(stalls), timeout=3)
        assert "no progress" in stalls[0]
        assert worker.failure == stalls[0]
        assert "worker stalled" in caplog.text
        assert "asyncio tasks" in caplog.text  # the task stacks went to the log
    finally:
        queue.released.set()
        await asyncio.wait_for(run, 3)
        await queue.close()


async def test_a_renewal_hung_past_the_grace_is_a_stall() -> None:
    settings = QueueSettings(claim_idle_ms=150, batch_wait_ms=1, stuck_grace_s=0.3)
    queue = SwallowingRenewQueue(settings, "hang")
    stalls: list[str] = []
    release = asyncio.Event()

    async def handle(job: Job) -> JobResult:
        await release.wait()
        return JobResult.success({})

    worker = Worker(queue, handle, settings, block_ms=10, on_stall=stalls.append)
    run = asyncio.create_task(worker.run())
    submitted = asyncio.create_task(queue.submit(make_job(payload={"case": "x"})))
    try:
        await until(lambda: bool(stalls), timeout=3)
        assert "renewal" in stalls[0]
    finally:
        release.set()
        queue.released.set()
        assert (await submitted).ok  # stopping still drains the job in flight
        await asyncio.wait_for(run, 3)
        await queue.close()


async def test_worker_survives_a_cancellation_leaking_from_a_handler(
    settings: QueueSettings,
) -> None:
    queue = RecordingQueue(settings)

    async def handle(job: Job) -> JobResult:
        if job.payload["case"] == "leak":
            raise asyncio.CancelledError  # as a library may raise on a dropped connection
        return JobResult.success({})

    tasks = [
        asyncio.create_task(queue.submit(make_job(payload={"case": c}))) for c in ("ok", "leak")
    ]
    await wait_depth(queue, 2)
    worker = Worker(queue, handle, settings, block_ms=10)
    await run_until_answered(worker, queue, 2)
    got = {c: (o.status, o.error_type) for c, o in queue.outcomes.items()}
    assert got == {"ok": (200, None), "leak": (500, "internal_error")}
    assert worker.failure is None
    await asyncio.gather(*tasks, return_exceptions=True)
    await queue.close()


class CountingQueue(LocalQueue):
    pulls = 0

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        self.pulls += 1
        return await super().pull(max_jobs, max_tokens, block_ms)


async def test_worker_backs_off_while_the_queue_is_unavailable(settings: QueueSettings) -> None:
    queue = CountingQueue(settings)
    await queue.close()
    worker = Worker(queue, counting_handler([]), settings, block_ms=10)
    run = asyncio.create_task(worker.run())
    await asyncio.sleep(0.2)
    worker.stop()
    await asyncio.wait_for(run, 1)  # stop() also cuts the back-off short
    assert queue.pulls == 1


class LeakyQueue(CountingQueue):
    """Its first pull raises CancelledError although nobody cancelled the worker."""

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        self.pulls += 1
        if self.pulls == 1:
            raise asyncio.CancelledError
        return await LocalQueue.pull(self, max_jobs, max_tokens, block_ms)


async def test_worker_outlives_a_stray_cancellation_but_not_a_real_one(
    settings: QueueSettings,
) -> None:
    queue = LeakyQueue(settings)
    worker = Worker(queue, counting_handler([]), settings, block_ms=10)
    run = asyncio.create_task(worker.run())
    while queue.pulls < 2:  # the stray one was logged and the loop pulled again
        await asyncio.sleep(0.01)
    run.cancel()  # a real cancellation still ends the loop
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 1)
    await queue.close()


async def test_worker_reports_progress_while_idle_and_after_jobs(
    settings: QueueSettings,
) -> None:
    queue = LocalQueue(settings)
    beats: list[float] = []
    worker = Worker(
        queue, counting_handler([]), settings, on_progress=lambda: beats.append(1), block_ms=10
    )
    run = asyncio.create_task(worker.run())
    await asyncio.sleep(0.1)
    idle = len(beats)
    assert idle >= 3  # every empty pull is a heartbeat
    assert (await queue.submit(make_job())).ok
    await asyncio.sleep(0.05)
    worker.stop()
    await asyncio.wait_for(run, 1)
    assert len(beats) > idle
    await queue.close()
