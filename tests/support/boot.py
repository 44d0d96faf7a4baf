"""Servers started ahead of their first test, in a thread of their own.

A server's start (the default model's conversion on a fresh machine, then three processes
importing torch and vLLM) is mostly one core's work for most of a minute. ``tests/conftest.py``
runs the fast tier first and starts the session's two servers before it, so their starts
overlap tests that need no engine instead of adding to the run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from loadtests.harness import ServerProcess

# The suite's guard (tests/conftest.py) lets threads of this name start servers whatever test
# is running in the main thread: they start the session's servers, not that test.
THREAD_PREFIX = "boot:"
# A server's preparation (a conversion, an adapter) on top of its readiness timeout.
PREPARE_S = 300.0


class Boot:
    """``prepare`` builds what the server needs and returns it unstarted; a thread starts it and
    waits for its probe, calling ``on_poll`` before each poll. ``wait`` joins that thread and
    raises what it raised; ``stop`` stops the server once, whoever calls it."""

    def __init__(
        self,
        name: str,
        prepare: Callable[[], ServerProcess],
        on_poll: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._prepare = prepare
        self._on_poll = on_poll
        self._lock = threading.Lock()
        self._stopped = False
        self._proc: ServerProcess | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=THREAD_PREFIX + name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            proc = self._prepare()
            with self._lock:
                if self._stopped:
                    return
                self._proc = proc.start()
            proc.wait_ready(on_poll=self._on_poll)
        except BaseException as exc:  # raised in the test's thread by wait()
            self._error = exc

    def wait(self) -> ServerProcess:
        """The server, once ready; its preparation's or start's failure is raised here."""
        # wait_ready fails on its own timeout or when the process dies; this bound is a backstop.
        self._thread.join(PREPARE_S + (self._proc.ready_timeout_s if self._proc else 900.0))
        error = self._error
        if self._thread.is_alive():
            error = TimeoutError(f"{self.name}: the server was not ready in time")
        elif error is None and self._proc is None:
            error = RuntimeError(f"{self.name}: stopped before it started")
        if error is not None:
            with contextlib.suppress(AssertionError):  # the start's own error says more
                self.stop()
            raise error
        assert self._proc is not None
        return self._proc

    def stop(self) -> None:
        """Stop the server and its group (ServerProcess.stop's checks), once."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            proc = self._proc
        try:
            if proc is not None:
                proc.stop()
        finally:
            # With the process gone, the readiness wait ends at its next poll; a preparation
            # still running ends on its own (the thread is a daemon).
            self._thread.join(10)
