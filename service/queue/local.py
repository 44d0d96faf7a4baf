"""In-process job queue: asyncio futures, no Redis (the default single-process setup).

Modelled on Ray Serve's ``_BatchQueue``: each queued job holds its future; callers that
gave up are skipped by workers; results are only set with the ``*_if_not_done`` pattern,
so a late or duplicate write can never raise ``InvalidStateError``; ``close()`` resolves
every waiting caller.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from service.config import QueueSettings
from service.errors import DeadlineExceeded, Overloaded, QueueUnavailable
from service.queue.base import BatchLimits, Delivery, Job, JobResult, check_pull_args

logger = logging.getLogger(__name__)

# Backpressure hint when the queue is full; batches usually drain within a second.
RETRY_AFTER_S = 1.0


@dataclass(eq=False)
class _Entry:
    job: Job
    future: asyncio.Future[JobResult]
    idem_key: tuple[str, str] | None = None
    waiters: int = 0


def _set_result_if_not_done(future: asyncio.Future[JobResult], result: JobResult) -> bool:
    if future.done():
        return False
    future.set_result(result)
    return True


def _set_exception_if_not_done(future: asyncio.Future[JobResult], exc: BaseException) -> bool:
    if future.done():
        return False
    future.set_exception(exc)
    return True


def _failed(future: asyncio.Future[JobResult]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


class LocalQueue:
    """A :class:`~service.queue.base.JobQueue` living in one event loop.

    Example::

        queue = LocalQueue(settings.queue)
        worker = Worker(queue, handler, settings.queue)
        task = asyncio.create_task(worker.run())
        result = await queue.submit(job)

    Depth counts queued plus in-flight jobs, like the Redis queue (lag + pending).
    Jobs are delivered once (``deliveries`` is always 1): a crashed worker here means a
    crashed process, which takes its callers with it.
    """

    def __init__(self, settings: QueueSettings) -> None:
        self._settings = settings
        self._queue: deque[_Entry] = deque()
        self._in_flight: dict[str, _Entry] = {}
        self._idem: OrderedDict[tuple[str, str], tuple[_Entry, float]] = OrderedDict()
        self._arrived = asyncio.Event()
        self._handles = itertools.count(1)
        self._closed = False
        # Recent results by (tenant, job id), kept result_ttl_s for GET /v1/results/{id}.
        self._results: OrderedDict[tuple[str, str], tuple[JobResult, float]] = OrderedDict()
        # Counters read by the metrics layer.
        self.dropped_expired = 0
        self.redelivered = 0
        self.dead = 0
        self.duplicate_results = 0

    @property
    def settings(self) -> QueueSettings:
        return self._settings

    # -- API side ---------------------------------------------------------------------

    async def submit(self, job: Job, idempotency_key: str | None = None) -> JobResult:
        if self._closed:
            raise QueueUnavailable("the job queue is closed (the service is shutting down)")
        if job.expired():
            raise DeadlineExceeded(f"job {job.id} was submitted after its deadline")
        key = (job.tenant, idempotency_key) if idempotency_key is not None else None
        existing = self._live_idem(key)
        if existing is not None:
            # Same key: wait on the first job's future instead of running it again.
            return (await self._wait(existing, job.deadline)).as_replay()
        depth = len(self._queue) + len(self._in_flight)
        if depth >= self._settings.max_queue_depth:
            raise Overloaded(
                f"the job queue is full ({depth} jobs); retry later or raise "
                "VERIFIER_QUEUE__MAX_QUEUE_DEPTH",
                retry_after=RETRY_AFTER_S,
            )
        entry = _Entry(job, asyncio.get_running_loop().create_future(), key)
        if key is not None:
            self._remember(key, entry)
        self._queue.append(entry)
        self._arrived.set()
        return await self._wait(entry, job.deadline)

    async def _wait(self, entry: _Entry, deadline: float) -> JobResult:
        entry.waiters += 1
        try:
            async with asyncio.timeout(max(0.0, deadline - time.time())):
                # shield: one caller timing out or disconnecting must not cancel the job
                # for the other callers that share it through an idempotency key.
                return await asyncio.shield(entry.future)
        except TimeoutError:
            raise DeadlineExceeded(
                f"job {entry.job.id} ({entry.job.kind}) missed its deadline; "
                "retry with a longer timeout or a smaller request"
            ) from None
        finally:
            entry.waiters -= 1
            if entry.waiters == 0 and not entry.future.done():
                # Nobody waits any more: cancelling tells workers to skip the job.
                entry.future.cancel()

    def _live_idem(self, key: tuple[str, str] | None) -> _Entry | None:
        if key is None:
            return None
        self._prune_idem()
        found = self._idem.get(key)
        if found is None or _failed(found[0].future):
            return None
        return found[0]

    def _remember(self, key: tuple[str, str], entry: _Entry) -> None:
        self._idem[key] = (entry, time.monotonic() + self._settings.result_ttl_s)
        # A failed or abandoned job frees its key so that a retry runs it again.
        entry.future.add_done_callback(lambda fut: self._forget_if_failed(key, entry, fut))

    def _forget_if_failed(
        self, key: tuple[str, str], entry: _Entry, future: asyncio.Future[JobResult]
    ) -> None:
        found = self._idem.get(key)
        if found is not None and found[0] is entry and _failed(future):
            del self._idem[key]

    def _prune_idem(self) -> None:
        now = time.monotonic()
        while self._idem:
            key, (_, expires) = next(iter(self._idem.items()))
            if expires > now:
                return
            del self._idem[key]

    # -- worker side ------------------------------------------------------------------

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        check_pull_args(max_jobs, max_tokens, block_ms)
        if self._closed:
            # Raise rather than return []: an empty answer would make a worker spin.
            raise QueueUnavailable("the job queue is closed")
        batch = BatchLimits(max_jobs, max_tokens)
        await self._fill(batch, block_ms / 1000, first_only=True)
        if batch.deliveries and not batch.full:
            await self._fill(batch, self._settings.batch_wait_ms / 1000, first_only=False)
        return batch.deliveries

    async def _fill(self, batch: BatchLimits, wait_s: float, *, first_only: bool) -> None:
        end = time.monotonic() + wait_s
        while not self._closed:
            self._take(batch)
            if batch.full or (first_only and batch.deliveries):
                return
            self._arrived.clear()
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(remaining):
                    await self._arrived.wait()
            except TimeoutError:
                return

    def _take(self, batch: BatchLimits) -> None:
        while self._queue and not batch.full:
            entry = self._queue[0]
            if entry.future.done() or entry.job.expired():
                self._queue.popleft()
                self._drop(entry)
                continue
            delivery = Delivery(entry.job, f"local-{next(self._handles)}", 1)
            if not batch.offer(delivery):
                return
            self._queue.popleft()
            self._in_flight[delivery.handle] = entry

    async def cancelled(self, deliveries: Sequence[Delivery]) -> set[str]:
        # A future is cancelled only once its last waiter left (close() sets an error).
        return {
            d.handle
            for d in deliveries
            if (entry := self._in_flight.get(d.handle)) is not None and entry.future.cancelled()
        }

    def _drop(self, entry: _Entry) -> None:
        self.dropped_expired += 1
        logger.debug("dropping job %s: its caller is gone or its deadline passed", entry.job.id)
        _set_exception_if_not_done(
            entry.future, DeadlineExceeded(f"job {entry.job.id} expired before a worker ran it")
        )

    async def complete(self, delivery: Delivery, result: JobResult) -> bool:
        entry = self._in_flight.pop(delivery.handle, None)
        if entry is None:
            self.duplicate_results += 1
            logger.info("duplicate result for job %s ignored", delivery.job.id)
            return False
        self._keep(delivery.job, result)
        return _set_result_if_not_done(entry.future, result)

    def _keep(self, job: Job, result: JobResult) -> None:
        now = time.time()
        self._results[(job.tenant, job.id)] = (result, now + self._settings.result_ttl_s)
        while self._results and next(iter(self._results.values()))[1] < now:
            self._results.popitem(last=False)

    async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
        """A stored result, only under the tenant that submitted it."""
        hit = self._results.get((tenant, job_id))
        return hit[0] if hit is not None and hit[1] >= time.time() else None

    async def depth(self) -> int:
        return len(self._queue) + len(self._in_flight)

    async def close(self) -> None:
        """Stop accepting jobs and resolve every waiting caller with ``QueueUnavailable``."""
        self._closed = True
        self._arrived.set()
        for entry in [*self._queue, *self._in_flight.values()]:
            _set_exception_if_not_done(
                entry.future, QueueUnavailable("the job queue closed before the job finished")
            )
        # In-flight entries stay so that a late complete() returns False quietly.
        self._queue.clear()
