"""The worker loop: keep the engine fed, answer each job the moment it is done.

vLLM batches continuously, so the worker does not wait for a whole batch: it pulls whenever its
in-flight jobs and their estimated tokens are under ``queue.max_inflight_jobs`` /
``queue.max_inflight_tokens``, starts each job at once and completes it when it finishes. A
direct judgment that arrives behind long rationales therefore joins the engine's running batch
instead of waiting for them.

Every pulled job gets exactly one ``complete()`` call (success, handler error, deadline or bad
output). ``stop()`` drains: no new pulls, the jobs in flight finish and are completed, then
``run()`` returns.

Nothing here is stopped by cancellation alone (a timeout inside a library can swallow it):
helper loops (renewal, watchdog) stop on an event, and every await on a cleanup path is
bounded. Two faults take the worker out of service with ``failure`` set, so that its process
exits and a supervisor restarts it while other workers reclaim its jobs:

- a job still running ``queue.stuck_grace_s`` after its deadline (its handler ignored the
  cancellation: the engine is wedged) is answered 504;
- the pull loop itself made no progress for ``stuck_grace_s`` past the latest deadline it may
  legitimately wait for: its task stacks are logged and ``on_stall`` runs (the worker process
  exits 1 there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.config import QueueSettings
from service.errors import ClientDisconnected, DeadlineExceeded, QueueUnavailable, ServiceError
from service.ops import spend
from service.ops.aio import bounded, wait_bounded
from service.ops.diagnostics import log_tasks
from service.queue.base import (
    Cancellable,
    Delivery,
    Handler,
    Job,
    JobQueue,
    JobResult,
    Renewable,
)

logger = logging.getLogger(__name__)

BatchHook = Callable[[int, int], None]

# Pull in short slices so that stop() takes effect within about this long.
DEFAULT_BLOCK_MS = 500
# Pause after the queue backend failed, so a Redis outage does not become a busy loop.
BACKOFF_S = 0.5
# How often the watchdog looks at the jobs in flight and at the loop's progress.
WATCH_INTERVAL_S = 1.0
# Bound on the awaits that end run(): helper loops see their event within one interval.
CLEANUP_TIMEOUT_S = 5.0
# How often claimed jobs are checked for a caller that left, and the bound on one check.
CANCEL_POLL_S = 0.2
CANCEL_CHECK_TIMEOUT_S = 1.0
# Bound on answering a wedged job before the worker gives up: a queue call fails on its own
# within its Redis timeout (2 s by default, one retry), so this only stops a hung one.
WEDGED_ANSWER_S = 6.0


@dataclass(eq=False)
class _InFlight:
    delivery: Delivery
    task: asyncio.Task[None]
    answered: bool = False  # set once complete() was called for it
    aborted: bool = False  # its callers all left: the cancel loop cancelled its task


class Worker:
    """Runs ``handler`` on jobs pulled from ``queue``, many at once.

    Example::

        worker = Worker(queue, handler, settings.queue, on_batch=metrics.record_batch)
        task = asyncio.create_task(worker.run())
        ...
        worker.stop()
        await task  # returns once the jobs in flight are completed

    A handler's ``ServiceError`` becomes a result with its own status and type; any other
    exception becomes ``500 internal_error``. A handler still running at its job's deadline is
    cancelled (nobody waits for it) and reported as ``504``.
    """

    def __init__(
        self,
        queue: JobQueue,
        handler: Handler,
        settings: QueueSettings,
        *,
        on_batch: BatchHook | None = None,
        on_progress: Callable[[], None] | None = None,
        on_stall: Callable[[str], None] | None = None,
        on_inflight: Callable[[int], None] | None = None,
        block_ms: int = DEFAULT_BLOCK_MS,
    ) -> None:
        self._queue = queue
        self._handler = handler
        self._settings = settings
        self._on_batch = on_batch
        self._on_progress = on_progress
        self._on_stall = on_stall
        self._on_inflight = on_inflight
        self._block_ms = block_ms
        self._stopping = asyncio.Event()  # stop pulling (drain)
        self._finished = asyncio.Event()  # run() is ending: helper loops stop
        self._freed = asyncio.Event()  # a job left the in-flight set
        self._inflight: dict[str, _InFlight] = {}
        self._loop_beat = time.monotonic()
        self._renewing_since: float | None = None  # monotonic start of a renewal under way
        # Set when the worker gave up (a wedged job or a stalled loop); its process then exits.
        self.failure: str | None = None

    # -- control ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop pulling; ``run()`` returns after the jobs in flight are completed."""
        self._stopping.set()

    def fail(self, reason: str) -> None:
        """Take the worker out of service (its process exits 1): stop pulling, keep ``reason``."""
        self.failure = self.failure or reason
        self.stop()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    async def run(self) -> None:
        helpers = [asyncio.create_task(self._watch(), name="worker-watchdog")]
        if isinstance(self._queue, Cancellable):
            helpers.append(
                asyncio.create_task(self._cancel_loop(self._queue), name="worker-cancels")
            )
        if isinstance(self._queue, Renewable):
            helpers.append(
                asyncio.create_task(self._renew_loop(self._queue), name="worker-renewal")
            )
        try:
            while not self._stopping.is_set():
                self._beat()
                jobs, tokens = self._room()
                if jobs <= 0 or tokens <= 0:
                    self._freed.clear()
                    await _wait_any((self._freed, self._stopping), self._block_ms / 1000)
                    continue
                for delivery in await self._pull(jobs, tokens):
                    self._start(delivery)
            await self._drain()
        except BaseException:
            for entry in self._inflight.values():
                entry.task.cancel()  # cancelled from outside: nobody will complete them
            raise
        finally:
            self._finished.set()
            await wait_bounded(helpers, CLEANUP_TIMEOUT_S, "worker helper loops")

    def _room(self) -> tuple[int, int]:
        s = self._settings
        tokens = sum(f.delivery.job.est_tokens for f in self._inflight.values())
        jobs = min(s.max_batch_jobs, s.max_inflight_jobs - len(self._inflight))
        return jobs, min(s.max_batch_tokens, s.max_inflight_tokens - tokens)

    async def _drain(self) -> None:
        """Wait for the jobs in flight, at most until the latest deadline plus the grace."""
        while self._inflight:  # the watchdog bounds each job at its deadline plus the grace
            self._beat()
            self._freed.clear()
            await _wait_any((self._freed,), WATCH_INTERVAL_S)

    def _beat(self) -> None:
        self._loop_beat = time.monotonic()
        # A heartbeat for liveness alerts: a loop that stops pulling stops calling this.
        if self._on_progress is not None:
            self._on_progress()

    # -- pulling --------------------------------------------------------------------------

    async def _pull(self, max_jobs: int, max_tokens: int) -> list[Delivery]:
        try:
            batch = await self._queue.pull(max_jobs, max_tokens, self._block_ms)
        except QueueUnavailable as exc:
            logger.warning("job queue unavailable, retrying in %.1f s: %s", BACKOFF_S, exc)
        except asyncio.CancelledError:
            if _cancelled():
                raise
            logger.exception("pulling jobs raised a stray cancellation, retrying")
        except Exception:
            # A worker must outlive one bad pull; the traceback goes to the log.
            logger.exception("pulling jobs failed, retrying in %.1f s", BACKOFF_S)
        else:
            self._report(batch)
            return batch
        await _wait_any((self._stopping,), BACKOFF_S)
        return []

    def _report(self, batch: Sequence[Delivery]) -> None:
        if self._on_batch is None or not batch:
            return
        try:
            self._on_batch(len(batch), sum(d.job.est_tokens for d in batch))
        except Exception:
            logger.exception("on_batch hook failed; the jobs run anyway")

    # -- running one job --------------------------------------------------------------------

    def _start(self, delivery: Delivery) -> None:
        task = asyncio.create_task(self._run_and_complete(delivery), name=f"job-{delivery.handle}")
        self._inflight[delivery.handle] = _InFlight(delivery, task)
        self._inflight_changed()

    async def _run_and_complete(self, delivery: Delivery) -> None:
        # The engine adds each request's tokens to this counter as it finishes or is aborted.
        with spend.counting() as spent:
            await self._run_counted(delivery, spent)

    async def _run_counted(self, delivery: Delivery, spent: spend.Spend) -> None:
        try:
            try:
                result = (await self._run_one(delivery.job)).with_spent(spent.total)
            except asyncio.CancelledError:
                entry = self._inflight.get(delivery.handle)
                if entry is not None and entry.aborted:
                    # Our cancel loop aborted it: the caller left; answer so it is acked, with
                    # what it spent so far (the API settles the caller's quota for that).
                    _uncancel()
                    result = JobResult.from_error(ClientDisconnected("the caller left"))
                    await self._answer(delivery, result.with_spent(spent.total))
                    return
                if _cancelled():
                    raise  # the watchdog gave up on this job and answered it already
                # A CancelledError that no deadline of ours raised leaked out of the handler.
                job = delivery.job
                logger.error("job %s (%s) was cancelled by its handler", job.id, job.kind)
                result = JobResult.from_error(ServiceError("the job was cancelled"))
            await self._answer(delivery, result)
        finally:
            self._release(delivery)

    async def _answer(self, delivery: Delivery, result: JobResult) -> None:
        entry = self._inflight.get(delivery.handle)
        if entry is None or entry.answered:
            return  # the watchdog gave up on this job and answered it already
        entry.answered = True
        await self._complete(delivery, result)
        self._beat()

    def _release(self, delivery: Delivery) -> None:
        if self._inflight.pop(delivery.handle, None) is not None:
            self._inflight_changed()
        self._freed.set()

    def _inflight_changed(self) -> None:
        if self._on_inflight is not None:
            self._on_inflight(len(self._inflight))

    async def _run_one(self, job: Job) -> JobResult:
        deadline = asyncio.timeout(max(0.0, job.deadline - time.time()))
        try:
            async with deadline:
                result = await self._handler(job)
        except TimeoutError as exc:
            if deadline.expired():
                msg = f"job {job.id} ({job.kind}) ran past its deadline"
                return JobResult.from_error(DeadlineExceeded(msg))
            return _crashed(job, exc)
        except ServiceError as exc:
            return JobResult.from_error(exc)
        except Exception as exc:
            return _crashed(job, exc)
        if not isinstance(result, JobResult):
            logger.error("handler for %s returned %s, not a JobResult", job.kind, type(result))
            return JobResult.from_error(ServiceError("the handler returned no outcome"))
        return result

    async def _complete(self, delivery: Delivery, result: JobResult) -> None:
        try:
            won = await self._queue.complete(delivery, result)
        except QueueUnavailable as exc:
            # The entry stays pending and is redelivered after claim_idle_ms.
            logger.warning("could not complete job %s: %s", delivery.job.id, exc)
            return
        except asyncio.CancelledError:
            if _cancelled():
                raise
            logger.exception("completing job %s raised a stray cancellation", delivery.job.id)
            return
        except Exception:
            logger.exception("completing job %s failed; it will be redelivered", delivery.job.id)
            return
        if not won:
            logger.debug("job %s already had a result", delivery.job.id)

    # -- helper loops (each stops on self._finished) -------------------------------------

    async def _renew_loop(self, queue: Renewable) -> None:
        """Keep the jobs in flight claimed; exactly those, re-read on every round."""
        # Three renewals per idle window: one late renewal still beats the reclaim.
        interval = self._settings.claim_idle_ms / 3000
        pending: asyncio.Task[None] | None = None
        while not self._finished.is_set():
            await _wait_any((self._finished,), interval)
            if self._finished.is_set():
                break
            if pending is not None and not pending.done():
                # The last renewal still hangs (a library may have swallowed its timeout);
                # never stack a second one on it, and never wait on it here.
                logger.warning("the previous renewal has not returned; skipping this round")
                continue
            deliveries = [f.delivery for f in self._inflight.values() if not f.answered]
            if deliveries:
                self._renewing_since = time.monotonic()
                pending = asyncio.create_task(self._renew(queue, deliveries), name="renew")
        if pending is not None and not pending.done():
            pending.cancel()

    async def _cancel_loop(self, queue: Cancellable) -> None:
        """Abort the jobs in flight whose callers all left (checked every CANCEL_POLL_S)."""
        while not self._finished.is_set():
            await _wait_any((self._finished,), CANCEL_POLL_S)
            running = [f for f in self._inflight.values() if not (f.answered or f.aborted)]
            if self._finished.is_set() or not running:
                continue
            try:
                async with asyncio.timeout(CANCEL_CHECK_TIMEOUT_S):
                    handles = await queue.cancelled([f.delivery for f in running])
            except (QueueUnavailable, TimeoutError) as exc:
                logger.warning("could not check %d jobs for cancels: %s", len(running), exc)
                continue
            for entry in running:
                if entry.delivery.handle in handles and not entry.task.done():
                    logger.info("aborting job %s: its caller left", entry.delivery.job.id)
                    entry.aborted = True
                    entry.task.cancel()

    async def _renew(self, queue: Renewable, deliveries: Sequence[Delivery]) -> None:
        try:
            await queue.renew(deliveries)
        except QueueUnavailable as exc:
            logger.warning("could not renew %d jobs: %s", len(deliveries), exc)
        except BaseException:
            # Keep renewing: a failed renewal (or one a library cancelled) must not fail the
            # jobs it protects.
            logger.exception("renewing %d jobs failed", len(deliveries))
        finally:
            self._renewing_since = None

    async def _watch(self) -> None:
        """Answer wedged jobs with 504 and notice a pull loop that stopped making progress."""
        grace = self._settings.stuck_grace_s
        while not self._finished.is_set():
            await _wait_any((self._finished,), min(WATCH_INTERVAL_S, grace / 4))
            if self._finished.is_set():
                break
            now = time.time()
            # Past deadline + grace a job's handler (or its complete()) ignored cancellation.
            wedged = [f for f in self._inflight.values() if now > f.delivery.job.deadline + grace]
            if wedged:
                await self._give_up(wedged)
            elif self.failure is None:
                self._check_stall(grace)

    def _check_stall(self, grace: float) -> None:
        now = time.monotonic()
        # The loop never waits on a job, only on bounded pulls and waits, so it beats at
        # least every block_ms plus one pull; silence means an await hung.
        if now - self._loop_beat > grace:
            self._stall(f"the worker loop made no progress for {grace:.0f} s")
        # A renewal that hangs lets other workers reclaim every job in flight here.
        elif self._renewing_since is not None and now - self._renewing_since > grace:
            self._stall(f"a renewal has not returned for {grace:.0f} s")

    async def _give_up(self, wedged: list[_InFlight]) -> None:
        grace = self._settings.stuck_grace_s
        first = wedged[0].delivery.job
        reason = f"job {first.id} ({first.kind}) ignored its deadline by {grace:.0f} s"
        self.failure = self.failure or reason
        log_tasks(f"worker stuck: {reason}")
        for entry in wedged:
            job = entry.delivery.job
            msg = f"job {job.id} ({job.kind}) ran past its deadline; the worker is restarting"
            await bounded(
                self._answer(entry.delivery, JobResult.from_error(DeadlineExceeded(msg))),
                WEDGED_ANSWER_S,
                f"answering wedged job {job.id}",
            )
            entry.task.cancel()  # it ignores this, but nothing waits for it any more
            self._release(entry.delivery)
        self.stop()

    def _stall(self, reason: str) -> None:
        self.failure = reason
        log_tasks(f"worker stalled: {reason}")
        self.stop()
        if self._on_stall is not None:
            self._on_stall(reason)


async def _wait_any(events: Sequence[asyncio.Event], timeout: float) -> None:
    """Wait until one of ``events`` is set, at most ``timeout`` seconds."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()  # our own plain Event waits: they cannot swallow it


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _cancelled() -> bool:
    """Whether the current task was asked to stop (else a CancelledError is a library's leak)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _crashed(job: Job, exc: Exception) -> JobResult:
    logger.error("job %s (%s) failed", job.id, job.kind, exc_info=exc)
    # The client sees the exception class only; details stay in the log.
    return JobResult.from_error(ServiceError(f"the job failed: {type(exc).__name__}"))
