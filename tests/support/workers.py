"""A ``Worker`` on a local queue for the tests of pure queue logic, stopped as a process stops
it: by its event, then a bounded wait, and only then a cancellation (of a handler that hangs
on purpose, for instance)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from service.config import QueueSettings
from service.queue.base import Job, JobResult
from service.queue.local import LocalQueue
from service.queue.worker import Worker

STOP_WAIT_S = 2.0


@contextlib.asynccontextmanager
async def local_worker(
    handle: Callable[[Job], Awaitable[JobResult]],
) -> AsyncIterator[LocalQueue]:
    """A local queue with one worker running ``handle`` until the block ends."""
    queue = LocalQueue(QueueSettings(batch_wait_ms=5, max_queue_depth=100))
    worker = Worker(queue, handle, queue.settings, block_ms=50)
    task = asyncio.create_task(worker.run())
    try:
        yield queue
    finally:
        worker.stop()
        # The worker drains what is in flight; a handler that hangs is cut off after the wait.
        _, pending = await asyncio.wait([task], timeout=STOP_WAIT_S)
        for t in pending:
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, STOP_WAIT_S)
        await asyncio.wait_for(queue.close(), STOP_WAIT_S)
