"""Engine processes die with the process that started them, even when it is SIGKILLed.

vLLM starts its engine core as a child process, and nothing in the core watches its parent: a
worker killed with ``kill -9`` (or crashing) would leave the core and its model worker (gigabytes
of memory, or GPU memory) running as orphans, and the restarted worker would start a second
engine next to them. :func:`start_reaper` starts a small watcher process (``python -m
service.engine.reaper``) holding the read end of a pipe whose write end only the owner holds.
The kernel closes that end when the owner dies, however it dies; the watcher then SIGKILLs the
owner's descendants it has seen (psutil checks each one's start time, so a reused pid is never
hit). Descendants, not only children: the core's own model worker follows the core through
vLLM's death pipe only between steps, so a worker in the middle of a long forward pass outlived
a killed core by more than 10 s on a CPU without native bf16. Linux only.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys

import psutil

POLL_S = 1.0  # how often the watcher looks for new children


# The owner's end of the pipe lives as long as the process: if it were garbage-collected, the
# watcher would see EOF and kill the engine of a live process.
_reaper: subprocess.Popen[bytes] | None = None


def start_reaper() -> subprocess.Popen[bytes] | None:
    """Watch this process; once it is gone, kill the children it left. Once per process."""
    global _reaper
    if not sys.platform.startswith("linux"):
        return None
    if _reaper is not None:
        return _reaper
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.engine.reaper", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        # Not in our session: a Ctrl-C or a group kill aimed at us must not stop it first.
        start_new_session=True,
    )
    write_end = proc.stdin
    assert write_end is not None
    fd = write_end.fileno()
    # Children forked (not spawned) from here would inherit the write end and keep the pipe
    # open after we die; they drop it at once.
    os.register_at_fork(after_in_child=lambda: _close(fd))
    _reaper = proc
    return proc


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def children(parent: int) -> dict[int, psutil.Process]:
    """pid -> process of the live children of ``parent`` (none once it is gone)."""
    try:
        return {child.pid: child for child in psutil.Process(parent).children()}
    except psutil.Error:
        return {}


def descendants(parent: int) -> dict[int, psutil.Process]:
    """pid -> process of the live descendants of ``parent``: children, theirs, and so on."""
    try:
        return {p.pid: p for p in psutil.Process(parent).children(recursive=True)}
    except psutil.Error:
        return {}


def watch(parent: int, stream: int = 0) -> None:
    """Track ``parent``'s descendants until ``stream`` reaches EOF, then kill them."""
    # Orphans are re-parented at once, so they are only found while their parent still lives.
    seen: dict[int, psutil.Process] = {}
    while True:
        seen.update(descendants(parent))
        ready, _, _ = select.select([stream], [], [], POLL_S)
        if ready and not os.read(stream, 4096):
            break
    seen.pop(os.getpid(), None)
    for proc in seen.values():
        # kill() refuses (NoSuchProcess) a pid that now names another process: psutil compares
        # its start time with the one read when the child was found.
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]))
