"""The worker loop: pull a batch, run its handlers concurrently, complete every job.

Every pulled job gets exactly one ``complete()`` call (success, handler error, deadline or
bad output), so no caller waits for a job a live worker has dropped. ``stop()`` drains:
the loop stops pulling, finishes the batch in hand, completes it and ``run()`` returns.
A batch whose handler outlives its deadline by ``STUCK_GRACE_S`` (it ignored cancellation:
the engine is wedged) is answered with 504 and the worker stops with ``failure`` set, so
its process exits and is restarted instead of holding (and renewing) jobs forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from service.config import QueueSettings
from service.diagnostics import log_tasks
from service.errors import QueueUnavailable, ServiceError
from service.queue.base import Delivery, Handler, Job, JobOutcome, JobQueue, Renewable

logger = logging.getLogger(__name__)

BatchHook = Callable[[int, int], None]

# Pull in short slices so that stop() takes effect within about this long.
DEFAULT_BLOCK_MS = 500
# Pause after the queue backend failed, so a Redis outage does not become a busy loop.
BACKOFF_S = 0.5
# A handler still running this long after its job's deadline ignored its cancellation:
# the engine is wedged, and the worker gives up rather than hold the batch forever.
STUCK_GRACE_S = 30.0


class Worker:
    """Runs ``handler`` on batches pulled from ``queue``.

    Example::

        worker = Worker(queue, handler, settings.queue, on_batch=metrics.observe_batch)
        task = asyncio.create_task(worker.run())
        ...
        worker.stop()
        await task  # returns once the current batch is completed

    A handler's ``ServiceError`` becomes an outcome with its own status and type; any
    other exception becomes ``500 internal_error``. A handler still running at its job's
    deadline is cancelled (nobody waits for it) and reported as ``504``.
    """

    def __init__(
        self,
        queue: JobQueue,
        handler: Handler,
        settings: QueueSettings,
        *,
        on_batch: BatchHook | None = None,
        on_progress: Callable[[], None] | None = None,
        block_ms: int = DEFAULT_BLOCK_MS,
    ) -> None:
        self._queue = queue
        self._handler = handler
        self._settings = settings
        self._on_batch = on_batch
        self._on_progress = on_progress
        self._block_ms = block_ms
        self._stopping = asyncio.Event()
        self.batches = 0
        self.jobs = 0
        # Set when a batch outlived its deadlines; the worker then stops (see run_batch).
        self.failure: str | None = None

    def stop(self) -> None:
        """Stop pulling; ``run()`` returns after the current batch is completed."""
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            batch = await self._pull()
            self._progress()
            if batch:
                await self.run_batch(batch)
                self._progress()

    def _progress(self) -> None:
        # A heartbeat for liveness alerts: a loop that stops pulling stops calling this.
        if self._on_progress is not None:
            self._on_progress()

    async def _pull(self) -> list[Delivery]:
        try:
            return await self._queue.pull(
                self._settings.max_batch_jobs, self._settings.max_batch_tokens, self._block_ms
            )
        except QueueUnavailable as exc:
            logger.warning("job queue unavailable, retrying in %.1f s: %s", BACKOFF_S, exc)
        except asyncio.CancelledError:
            if _cancelled():
                raise
            logger.exception("pulling jobs raised a stray cancellation, retrying")
        except Exception:
            # A worker must outlive one bad pull; the traceback goes to the log.
            logger.exception("pulling jobs failed, retrying in %.1f s", BACKOFF_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(BACKOFF_S):
                await self._stopping.wait()
        return []

    async def run_batch(self, batch: Sequence[Delivery]) -> None:
        """Run one batch and complete each of its jobs."""
        self.batches += 1
        self.jobs += len(batch)
        self._report(batch)
        renewer = self._start_renewal(batch)
        tasks = [asyncio.create_task(self._run_one(d.job)) for d in batch]
        try:
            cap = max(d.job.deadline for d in batch) - time.time() + STUCK_GRACE_S
            await asyncio.wait(tasks, timeout=max(cap, 0.0))
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        finally:
            if renewer is not None:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer
        outcomes = [self._outcome(task, d.job) for task, d in zip(tasks, batch, strict=True)]
        await asyncio.gather(*(self._complete(d, o) for d, o in zip(batch, outcomes, strict=True)))
        if self.failure is not None:
            self.stop()

    def _outcome(self, task: asyncio.Task[JobOutcome], job: Job) -> JobOutcome:
        if task.cancelled():
            # A CancelledError that no deadline of ours raised leaked out of the handler.
            logger.error("job %s (%s) was cancelled by its handler", job.id, job.kind)
            return JobOutcome.failure(500, "internal_error", "the job was cancelled")
        if task.done():
            return task.result()
        # Cancelled at its deadline yet still running: something below ignores cancellation.
        # Its caller has already given up; answer the job and take this worker out of service.
        self.failure = f"job {job.id} ({job.kind}) ignored its deadline by {STUCK_GRACE_S:.0f} s"
        log_tasks(f"worker stuck: {self.failure}")
        msg = f"job {job.id} ({job.kind}) ran past its deadline; the worker is restarting"
        return JobOutcome.failure(504, "deadline_exceeded", msg)

    def _report(self, batch: Sequence[Delivery]) -> None:
        if self._on_batch is None:
            return
        try:
            self._on_batch(len(batch), sum(d.job.est_tokens for d in batch))
        except Exception:
            logger.exception("on_batch hook failed; the batch runs anyway")

    def _start_renewal(self, batch: Sequence[Delivery]) -> asyncio.Task[None] | None:
        if not isinstance(self._queue, Renewable):
            return None
        return asyncio.create_task(self._renew_loop(self._queue, batch))

    async def _renew_loop(self, queue: Renewable, batch: Sequence[Delivery]) -> None:
        # Three renewals per idle window: one late renewal still beats the reclaim.
        interval = self._settings.claim_idle_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                await queue.renew(batch)
            except QueueUnavailable as exc:
                logger.warning("could not renew %d jobs: %s", len(batch), exc)
            except Exception:
                # Keep renewing: a failed renewal must not fail the batch it protects.
                logger.exception("renewing %d jobs failed", len(batch))

    async def _run_one(self, job: Job) -> JobOutcome:
        deadline = asyncio.timeout(max(0.0, job.deadline - time.time()))
        try:
            async with deadline:
                outcome = await self._handler(job)
        except TimeoutError as exc:
            if deadline.expired():
                msg = f"job {job.id} ({job.kind}) ran past its deadline"
                return JobOutcome.failure(504, "deadline_exceeded", msg)
            return _crashed(job, exc)
        except ServiceError as exc:
            return JobOutcome.from_error(exc)
        except Exception as exc:
            return _crashed(job, exc)
        if not isinstance(outcome, JobOutcome):
            logger.error("handler for %s returned %s, not a JobOutcome", job.kind, type(outcome))
            return JobOutcome.failure(500, "internal_error", "the handler returned no outcome")
        return outcome

    async def _complete(self, delivery: Delivery, outcome: JobOutcome) -> None:
        try:
            won = await self._queue.complete(delivery, outcome)
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


def _cancelled() -> bool:
    """Whether the current task was asked to stop (else a CancelledError is a library's leak)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _crashed(job: Job, exc: Exception) -> JobOutcome:
    logger.error("job %s (%s) failed", job.id, job.kind, exc_info=exc)
    # The client sees the exception class only; details stay in the log.
    return JobOutcome.failure(500, "internal_error", f"the job failed: {type(exc).__name__}")
