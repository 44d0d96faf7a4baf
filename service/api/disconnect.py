"""Race a request's work against its client hanging up (vLLM's ``with_cancellation``).

The work runs as a task; a listener reads the ASGI ``receive`` channel until it sees
``http.disconnect``. Whichever ends first wins: a disconnect cancels the work (the queue then
tells workers to skip or abort the job) and raises :class:`ClientDisconnected`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any, TypeVar

from service.errors import ClientDisconnected

logger = logging.getLogger(__name__)

T = TypeVar("T")
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

# Bound on each cleanup await: the cancelled work must unwind (queue bookkeeping, engine
# aborts) within this, or it is left to finish on its own and logged.
CLEANUP_TIMEOUT_S = 2.0


async def _listen(receive: Receive, stop: asyncio.Event) -> None:
    """Return once the client disconnects; stops early when ``stop`` is set."""
    while not stop.is_set():
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def race_disconnect(receive: Receive, work: Coroutine[Any, Any, T]) -> T:
    """``await work``, unless the client disconnects first: then cancel it and raise
    :class:`ClientDisconnected`. The request body must already be read."""
    task = asyncio.ensure_future(work)
    stop = asyncio.Event()
    listener = asyncio.ensure_future(_listen(receive, stop))
    try:
        await asyncio.wait((task, listener), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        stop.set()
        if not listener.done():
            # Blocked in receive(): our own plain wait, so cancelling it cannot be swallowed.
            listener.cancel()
            await asyncio.wait((listener,), timeout=CLEANUP_TIMEOUT_S)
    if task.done():
        return task.result()
    task.cancel()
    _, pending = await asyncio.wait((task,), timeout=CLEANUP_TIMEOUT_S)
    if pending:
        logger.warning("a job cancelled after its client left is still unwinding")
    elif not task.cancelled() and task.exception() is None:
        logger.debug("the job finished just as its client left")
    raise ClientDisconnected("the client disconnected before the answer; the job was cancelled")
