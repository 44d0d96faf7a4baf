"""Stack dumps and the event-loop watchdog of worker processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from service.ops.diagnostics import format_tasks

pytestmark = pytest.mark.timeout(60)


async def test_format_tasks_names_every_task_and_its_frame() -> None:
    async def parked_here() -> None:
        await asyncio.sleep(10)

    task = asyncio.create_task(parked_here(), name="parked")
    await asyncio.sleep(0)
    text = format_tasks()
    task.cancel()
    assert "--- parked" in text
    assert "parked_here" in text


def run_script(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=30
    )


def test_watchdog_dumps_stacks_and_exits_when_the_loop_blocks() -> None:
    done = run_script(
        """
        import asyncio, time
        from service.ops.diagnostics import watch_loop

        def blocking_call():
            time.sleep(20)

        async def main():
            asyncio.create_task(watch_loop(0.5))
            await asyncio.sleep(0.1)
            blocking_call()  # the loop stops here; the watchdog thread does not
            print("not reached")

        asyncio.run(main())
        """
    )
    assert done.returncode == 1
    assert "blocking_call" in done.stderr
    assert "not reached" not in done.stdout


def test_watchdog_stays_quiet_while_the_loop_runs() -> None:
    done = run_script(
        """
        import asyncio
        from service.ops.diagnostics import watch_loop

        async def main():
            stop = asyncio.Event()
            dog = asyncio.create_task(watch_loop(0.5, stop))
            await asyncio.sleep(1.5)  # three stall windows, loop alive throughout
            stop.set()
            await asyncio.wait_for(dog, 1)  # it ends on the event
            await asyncio.sleep(1.0)  # disarmed: no late exit
            print("ok")

        asyncio.run(main())
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
