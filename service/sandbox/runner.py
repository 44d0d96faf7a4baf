"""Runs programs in the sandbox through a pool: a concurrency cap, a uid per slot, and every
run bounded by its wall time, its output size and the rlimits of ``isolation``.

A run is one child process the event loop watches (``process.Child``), never waits on, so a
hung program holds a pool slot until its wall limit, never a judgment. A run over its limit is
ended by killing its namespace's init, which takes everything in its PID namespace with it (a
child that double-forked and called ``setsid`` included).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from service.config import CodeSettings
from service.sandbox.isolation import RUN_ENV, RunLimits, Tools, check, command, uid_base
from service.sandbox.process import Child

logger = logging.getLogger(__name__)

RunStatus = Literal["finished", "timeout", "output_limit", "error"]

# Bound on reaping a killed run and draining its pipes (the kernel ends the namespace at once).
REAP_TIMEOUT_S = 5.0
# How long bwrap gets to reap its killed child and exit before its whole group is killed.
KILL_GRACE_S = 1.0
# Exit statuses that mean the CPU-time rlimit ended the run (SIGXCPU, or SIGKILL past the hard cap).
_CPU_SIGNALS = (signal.SIGXCPU, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Program:
    """What to run: files written into the scratch directory and the command, run there."""

    files: dict[str, bytes]
    argv: list[str]
    stdin: bytes | None = None


@dataclass(frozen=True, slots=True)
class RunResult:
    status: RunStatus
    exit_code: int | None
    stdout: str
    stderr: str
    time_ms: float


@dataclass(frozen=True, slots=True)
class Language:
    """How a language's source runs: its file name and its command (the interpreter first)."""

    source: str
    argv: tuple[str, ...]


class Sandbox:
    """The pool. ``Sandbox.start`` checks the host first and refuses if it cannot confine."""

    def __init__(self, cfg: CodeSettings, tools: Tools) -> None:
        self._cfg = cfg
        self._tools = tools
        self._slots = asyncio.Semaphore(cfg.max_concurrency)
        base = uid_base(cfg)
        self._uids: deque[int] = deque(range(base, base + cfg.max_concurrency))
        self.languages: dict[str, Language] = {
            "python": Language("main.py", (tools.python, "-I", "-B", "main.py")),
        }
        # Other interpreters where the host has them under the system directories.
        if os.access("/bin/bash", os.X_OK):
            self.languages["bash"] = Language("main.sh", ("/bin/bash", "main.sh"))
        if os.access("/usr/bin/node", os.X_OK):
            self.languages["nodejs"] = Language("main.js", ("/usr/bin/node", "main.js"))

    @classmethod
    def start(cls, cfg: CodeSettings) -> Sandbox:
        """Check the isolation (``SandboxUnavailable`` if a part is missing), then the pool."""
        return cls(cfg, check(cfg))

    @property
    def settings(self) -> CodeSettings:
        return self._cfg

    def limits(self, wall_s: float | None = None, memory_mb: int | None = None) -> RunLimits:
        return RunLimits.of(self._cfg, wall_s or self._cfg.run_timeout_s, memory_mb)

    def program(
        self,
        language: str,
        code: str,
        stdin: str | None = None,
        files: dict[str, bytes] | None = None,
    ) -> Program:
        lang = self.languages[language]
        return Program(
            files={**(files or {}), lang.source: code.encode()},
            argv=list(lang.argv),
            stdin=None if stdin is None else stdin.encode(),
        )

    async def run(self, program: Program, limits: RunLimits) -> RunResult:
        async with self._slots:
            uid = self._uids.popleft()
            try:
                return await self._run(uid, program, limits)
            finally:
                self._uids.append(uid)

    async def _run(self, uid: int, program: Program, limits: RunLimits) -> RunResult:
        fds = {path: _memfd(path, data) for path, data in program.files.items()}
        start = time.perf_counter()
        try:
            child = await Child.start(
                command(self._tools, uid, limits, fds, program.argv),
                stdin=program.stdin,
                pass_fds=tuple(fds.values()),
                env=RUN_ENV,
            )
        except OSError as exc:
            return RunResult("error", None, "", f"the sandbox could not start: {exc}", 0.0)
        finally:
            for fd in fds.values():
                os.close(fd)
        try:
            return await self._supervise(child, limits, start)
        finally:
            child.close()

    async def _supervise(self, child: Child, limits: RunLimits, start: float) -> RunResult:
        cap = self._cfg.max_output_kb * 1024
        over = asyncio.Event()
        out, err = bytearray(), bytearray()
        readers = [
            asyncio.ensure_future(_drain(child.stdout, out, cap, over)),
            asyncio.ensure_future(_drain(child.stderr, err, cap, over)),
        ]
        exited = child.exited
        overflow = asyncio.ensure_future(over.wait())
        try:
            first: list[asyncio.Future[Any]] = [exited, overflow]
            await asyncio.wait(first, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            overflow.cancel()
            killed = not exited.done()
            if killed:
                _kill(child.proc.pid)
                await asyncio.wait({exited}, timeout=KILL_GRACE_S)
                if not exited.done():
                    _kill_group(child.proc.pid)
            # Bounded: the kernel ends the namespace at once; if not, the run is left, not awaited.
            ends: list[asyncio.Future[None]] = [exited, *readers]
            await asyncio.wait(ends, timeout=REAP_TIMEOUT_S)
            for task in readers:
                task.cancel()
        elapsed = (time.perf_counter() - start) * 1000
        code = child.returncode
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if over.is_set():
            return RunResult("output_limit", None, stdout, stderr, elapsed)
        if killed or _cpu_capped(code):
            return RunResult("timeout", None, stdout, stderr, elapsed)
        if code == 1 and stderr.startswith("bwrap: "):  # the sandbox itself failed to start
            return RunResult("error", None, stdout, stderr, elapsed)
        return RunResult("finished", code, stdout, stderr, elapsed)


def _memfd(name: str, data: bytes) -> int:
    """An in-memory file bwrap copies into the scratch directory (nothing touches the disk)."""
    fd = os.memfd_create(name.replace("/", "_"), 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


async def _drain(
    stream: asyncio.StreamReader, into: bytearray, cap: int, over: asyncio.Event
) -> None:
    """Keep ``cap`` bytes, then flag the run; reading goes on (discarding) until EOF, since a
    reader that stops pauses its pipe and the process's end would never be seen."""
    while chunk := await stream.read(65536):
        room = cap - len(into)
        if room > 0:
            into += chunk[:room]
        if len(chunk) > room:
            over.set()


def _kill(pid: int) -> None:
    """Kill the run's namespace init (bwrap's child: the program), which ends the namespace and
    lets bwrap reap it and exit; killing bwrap first would orphan the init as a zombie on a host
    whose init reaps nothing. The group kill covers a run killed before bwrap forked."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(child) for child in f.read().split()]
    except OSError:
        children = []
    for child in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    if not children:
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _cpu_capped(code: int | None) -> bool:
    if code is None:
        return False
    return any(code in (-sig, 128 + sig) for sig in _CPU_SIGNALS)
