"""One child process driven from any asyncio loop, spawned the cheap way.

``asyncio.create_subprocess_exec`` under uvloop (what uvicorn runs) spawns with libuv's
``fork()``, whose cost grows with the parent's memory: 45 ms per run from a worker holding an
engine client (2 GB mapped), against 1 ms for CPython's ``subprocess`` (``vfork``). So the child
is a ``subprocess.Popen``; its pipes join the running loop as read pipes, its exit is a pidfd
the loop watches (a thread's ``wait`` where the kernel has no pidfd), and its stdin is written
from a thread, so a program that never reads it blocks nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

READ_LIMIT = 1 << 16


class Child:
    """A started process: ``stdout`` and ``stderr`` readers, ``wait_exit()``, ``close()``."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.stdout = asyncio.StreamReader(limit=READ_LIMIT)
        self.stderr = asyncio.StreamReader(limit=READ_LIMIT)
        self._transports: list[asyncio.BaseTransport] = []
        self._pidfd: int | None = None
        self._exited: asyncio.Future[None] | None = None

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        stdin: bytes | None,
        pass_fds: Sequence[int],
        env: Mapping[str, str],
    ) -> Child:
        proc = subprocess.Popen(  # noqa: S603 - the sandbox's own argv
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(pass_fds),
            env=dict(env),
            start_new_session=True,  # one group to kill: its exec chain is one process
        )
        child = cls(proc)
        await child._attach(stdin)
        return child

    async def _attach(self, stdin: bytes | None) -> None:
        loop = asyncio.get_running_loop()
        for reader, pipe in ((self.stdout, self.proc.stdout), (self.stderr, self.proc.stderr)):
            assert pipe is not None
            protocol = functools.partial(asyncio.StreamReaderProtocol, reader)
            transport, _ = await loop.connect_read_pipe(protocol, pipe)
            self._transports.append(transport)
        self._exited = loop.create_future()
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):  # no pidfd here: a thread waits instead
            task = loop.run_in_executor(None, self.proc.wait)
            task.add_done_callback(lambda _: self._mark_exited())
        else:
            loop.add_reader(self._pidfd, self._mark_exited)
        if stdin is not None and self.proc.stdin is not None:
            loop.run_in_executor(None, _feed, self.proc.stdin, stdin)

    def _mark_exited(self) -> None:
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(None)

    @property
    def exited(self) -> asyncio.Future[None]:
        assert self._exited is not None
        return self._exited

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended (reaped here), else None."""
        return self.proc.poll() if self.exited.done() else None

    def close(self) -> None:
        """Stop watching the process and close the pipes (it may still be running)."""
        if self._pidfd is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        for transport in self._transports:
            transport.close()
        self._transports.clear()
        self.proc.poll()  # reaps it if it ended


def _feed(pipe: IO[bytes], data: bytes) -> None:
    # A program that exits or never reads is not an error of the service.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError, ValueError):
        pipe.write(data)
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        pipe.close()
