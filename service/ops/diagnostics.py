"""Ways to see inside a live worker, and a watchdog for one whose event loop stopped.

- ``SIGUSR1``: every thread's Python stack to stderr (works even when the event loop is blocked).
- ``SIGUSR2``: every asyncio task's stack to the log (needs a running loop).
- :func:`watch_loop`: if the event loop makes no progress for ``stall_s`` seconds (a blocking
  call, a deadlock in an extension), dump every thread's stack and exit with code 1, so the
  supervisor restarts the process and other workers reclaim its jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import logging
import signal

logger = logging.getLogger(__name__)

HEARTBEAT_S = 1.0


def format_tasks() -> str:
    """The stack of every asyncio task of the running loop, one block per task."""
    parts = []
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        buf = io.StringIO()
        task.print_stack(file=buf)
        parts.append(f"--- {task.get_name()} ({task!r:.120})\n{buf.getvalue()}")
    return "\n".join(parts)


def log_tasks(reason: str) -> None:
    logger.warning("%s; asyncio tasks:\n%s", reason, format_tasks())


def install_dump_signals(loop: asyncio.AbstractEventLoop) -> None:
    """SIGUSR1 dumps thread stacks, SIGUSR2 logs asyncio task stacks."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    loop.add_signal_handler(signal.SIGUSR2, log_tasks, "SIGUSR2")


async def watch_loop(stall_s: float, stop: asyncio.Event | None = None) -> None:
    """Re-arm faulthandler's exit timer about every second until ``stop`` is set (run it as a
    task).

    faulthandler's timer runs in a C thread, so it fires even when this loop is stuck in
    a blocking call. Setting ``stop`` (or cancelling the task) disarms it.
    """
    stop = stop or asyncio.Event()
    try:
        while not stop.is_set():
            faulthandler.dump_traceback_later(stall_s, exit=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(HEARTBEAT_S, stall_s / 4)):
                    await stop.wait()
    finally:
        faulthandler.cancel_dump_traceback_later()
