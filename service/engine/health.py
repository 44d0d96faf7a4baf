"""The engine health loop: notice a dead engine within seconds, not at the next request.

vLLM runs the model in an engine-core process. If that process dies, the in-process client only
learns it when a call fails; nothing else looks. :func:`watch_engine` calls
``Engine.check_health()`` every ``interval_s`` and calls ``on_dead`` once when it raises or does
not answer in time. The owner decides what dead means for its process (the API: ``/ready``
503 and exit 1; a worker: stop pulling and exit 1, both for the supervisor to restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from service.engine.base import Engine

logger = logging.getLogger(__name__)

# A health check that has not answered in this many intervals counts as a failure.
TIMEOUT_INTERVALS = 5


async def watch_engine(
    engine: Engine, interval_s: float, stop: asyncio.Event, on_dead: Callable[[str], None]
) -> None:
    """Check ``engine`` every ``interval_s`` until ``stop`` is set; ``on_dead(reason)`` at most
    once, then return."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
        if stop.is_set():
            return
        try:
            await asyncio.wait_for(engine.check_health(), interval_s * TIMEOUT_INTERVALS)
        except TimeoutError:
            reason = f"engine health check did not answer in {interval_s * TIMEOUT_INTERVALS} s"
        except Exception as exc:  # check_health raises EngineFailure; anything else is as bad
            reason = f"engine health check failed: {exc}"
        else:
            continue
        logger.critical("engine dead: %s", reason)
        on_dead(reason)
        return
