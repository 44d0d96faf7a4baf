"""Bounded awaits for cleanup paths.

A coroutine that swallows its cancellation (a timeout inside a library can turn ``cancel()``
into a ``TimeoutError``) never ends under ``asyncio.wait_for``, which waits for the cancelled
task to finish. These helpers wait in ``asyncio.wait`` instead, cancel what is still running at
the timeout and leave it behind, so the caller always goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0  # closing a client or a store: it answers at once or is left behind


async def bounded(coro: Coroutine[Any, Any, None], timeout: float, what: str) -> None:
    """Await ``coro`` in its own task for at most ``timeout`` s; a hung one is left behind."""
    task = asyncio.ensure_future(coro)
    await wait_bounded([task], timeout, what)


async def wait_bounded(tasks: Sequence[asyncio.Future[None]], timeout: float, what: str) -> None:
    done, hung = await asyncio.wait(tasks, timeout=timeout)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s failed", what, exc_info=task.exception())
    if hung:
        logger.error("%s did not finish within %.0f s; left behind", what, timeout)
        for task in hung:
            task.cancel()
