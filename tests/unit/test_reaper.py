"""The engine reaper: descendants of a SIGKILLed process are killed, those of a live one are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import psutil
import pytest

from loadtests.harness import ROOT
from service.engine.reaper import POLL_S

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper is Linux only"),
]

# A stand-in for a worker: starts the reaper, then a long-lived child that starts a child of its
# own (as vLLM's engine core starts its model worker), prints the three pids and waits.
CORE = (
    "import subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
    "print(g.pid, flush=True); time.sleep(120)"
)
OWNER = textwrap.dedent(
    f"""
    import subprocess, sys, time
    from service.engine.reaper import start_reaper
    reaper = start_reaper()
    child = subprocess.Popen([sys.executable, "-c", {CORE!r}], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    print(reaper.pid, child.pid, grandchild, flush=True)
    time.sleep(120)
    """
)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # zombies are dead
    except psutil.NoSuchProcess:
        return False


def wait_until(predicate: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def start_owner() -> tuple[subprocess.Popen[str], int, int, int]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    reaper_pid, child_pid, grandchild_pid = map(int, owner.stdout.readline().split())
    return owner, reaper_pid, child_pid, grandchild_pid


def test_descendants_of_a_killed_process_are_killed() -> None:
    owner, reaper_pid, child_pid, grandchild_pid = start_owner()
    with owner:  # closes its stdout pipe
        time.sleep(2 * POLL_S)  # the reaper has looked for descendants at least once
        assert alive(child_pid)
        assert alive(grandchild_pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert wait_until(lambda: not alive(child_pid)), "the orphan survived its parent"
    assert wait_until(lambda: not alive(grandchild_pid)), "the grandchild survived"
    assert wait_until(lambda: not alive(reaper_pid)), "the reaper did not exit"


def test_a_grandchild_orphaned_by_its_parent_dies_with_the_owner() -> None:
    """The dead-engine case: the core is killed first, its worker is re-parented and keeps
    running; once the owner dies the reaper kills the worker it saw."""
    owner, reaper_pid, child_pid, grandchild_pid = start_owner()
    with owner:
        time.sleep(2 * POLL_S)
        os.kill(child_pid, signal.SIGKILL)
        time.sleep(2 * POLL_S)
        assert alive(grandchild_pid)  # nothing kills it while the owner lives
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert wait_until(lambda: not alive(grandchild_pid)), "the orphaned grandchild survived"
    assert wait_until(lambda: not alive(reaper_pid)), "the reaper did not exit"


def test_descendants_of_a_live_process_are_left_alone() -> None:
    owner, reaper_pid, child_pid, grandchild_pid = start_owner()
    try:
        time.sleep(3)
        assert alive(child_pid)
        assert alive(grandchild_pid)
        assert alive(reaper_pid)
    finally:
        with owner:  # closes its stdout pipe
            owner.kill()
            owner.wait()
        for pid in (grandchild_pid, child_pid, reaper_pid):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
