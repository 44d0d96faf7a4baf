"""The processes a benchmark or an end-to-end test runs: a server, a private Redis, a free port
(what a result records of the machine and the checkout is in ``bench.py``).

`ServerProcess` starts any long-running command (``verifier serve``, ``verifier worker``, vLLM's
OpenAI server, ``redis-server``) in its own process group, waits for its readiness probe while
checking that it is still alive, and on exit stops it and checks that its whole group is gone,
so vLLM's engine processes never outlive a run. Readiness is what the process answers on its
probe (``/ready``), never a line in its log.

Example:
    >>> port = free_port()  # doctest: +SKIP
    >>> with ServerProcess(verifier("serve", "--port", str(port)), log=Path("serve.log"),
    ...                    probe=f"http://127.0.0.1:{port}/ready") as server:  # doctest: +SKIP
    ...     httpx.post(f"http://127.0.0.1:{port}/v1/judge/outcome", json=...)
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, Self

import httpx
import psutil
import redis

from service.config import Settings

# NOTE: the engine's own core-list helper; one import of it here, so scripts do not reach in.
from service.engine.vllm_engine import _cpu_list, openai_server_args

# The checkout (benchmarks write under ROOT/out/bench by default).
ROOT: Final = Path(__file__).resolve().parents[1]
# The first start of vLLM on a cold machine (model download, compile) takes minutes.
READY_TIMEOUT_S: Final = 900.0
# uvicorn waits for requests in flight, vLLM for its engine core: both well under a minute.
STOP_TIMEOUT_S: Final = 60.0
# After the leader exits, the time its children get to follow (vLLM's engine core, a reaper).
GROUP_GONE_S: Final = 10.0
# uvicorn re-raises SIGTERM after a clean shutdown, so 143 / -15 is success too.
CLEAN_EXIT: Final = frozenset({0, -signal.SIGTERM, 128 + signal.SIGTERM})
LOG_TAIL_CHARS: Final = 4000

Probe = str | Callable[[], bool]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def verifier(*args: str) -> list[str]:
    """The command line of ``verifier <args>`` with this interpreter (no PATH lookup)."""
    return [sys.executable, "-m", "service.cli", *args]


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 now (a refused or dropped connection is a no)."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def ready_status(url: str) -> str | None:
    """The ``status`` a readiness probe's JSON body states (ready, starting, failed), if any."""
    try:
        body = httpx.get(url, timeout=2).json()
    except (httpx.TransportError, ValueError):
        return None
    status = body.get("status") if isinstance(body, dict) else None
    return status if isinstance(status, str) else None


def group_members(pgid: int) -> list[int]:
    """Live processes of the process group ``pgid`` (a zombie is dead, only not collected)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except OSError:  # it exited while we looked
            continue
    return members


# How long a SIGKILLed group may take to be gone: the signal is delivered at once, but a process
# is listed until the kernel has torn it down (a large engine process takes a while).
KILL_WAIT_S = 5.0


def wait_group_gone(pgid: int, timeout_s: float = KILL_WAIT_S) -> list[int]:
    """Poll until the group ``pgid`` has no live member or ``timeout_s`` passes; what is left."""
    deadline = time.monotonic() + timeout_s
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class ServerProcess:
    """A long-running command in its own process group, ready once its probe says so.

    ``probe`` is a URL that answers 200 when the process is ready (``/ready``; for a worker,
    its probe port's ``/ready``) or a callable returning whether it is. ``with`` starts the
    process and waits for the probe, failing at once with the log's tail if the process dies;
    leaving the block stops it: SIGTERM, ``stop_timeout_s`` to exit, then SIGKILL to the whole
    group. A process that was running when stopped must exit cleanly (0 or SIGTERM) unless
    ``require_clean_exit`` is off, and no member of its group may be left, whatever happened
    before. Both checks raise AssertionError after the cleanup.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        probe: Probe | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        stop_timeout_s: float = STOP_TIMEOUT_S,
        group_grace_s: float = GROUP_GONE_S,
        require_clean_exit: bool = True,
        dump_stacks_on_timeout: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self.probe = probe
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.group_grace_s = group_grace_s
        self.require_clean_exit = require_clean_exit
        self.dump_stacks_on_timeout = dump_stacks_on_timeout
        self._popen: subprocess.Popen[bytes] | None = None

    # --- state -------------------------------------------------------------------------------

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def name(self) -> str:
        return self.log.stem

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def check_alive(self) -> None:
        """Raise RuntimeError, with the log's tail, if the process has exited."""
        code = self.popen.poll()
        if code is not None:
            raise RuntimeError(f"{self.name} exited ({code}):\n{self.log_tail()}")

    # --- life --------------------------------------------------------------------------------

    def start(self) -> Self:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as fh:
            # subprocess.Popen looked up at call time: the test suite's engine-tier guard
            # replaces it. A new session, so that stop() can reach the engine's children.
            self._popen = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(
        self,
        probe: Probe | None = None,
        timeout_s: float | None = None,
        on_poll: Callable[[], None] | None = None,
    ) -> None:
        """Poll the probe (this one's, or ``probe``) every half second until it passes;
        ``on_poll`` runs before each poll (a test's look at the process before it is ready)."""
        check = probe if probe is not None else self.probe
        if check is None:
            raise ValueError(f"{self.name}: no readiness probe (pass probe=URL or a callable)")
        if isinstance(check, str):
            url = check

            def ready() -> bool:
                if ready_status(url) == "failed":
                    # the engine's start failed for good: waiting out the timeout helps no one
                    raise RuntimeError(f"{self.name} failed to start:\n{self.log_tail()}")
                return http_ok(url)
        else:
            ready = check
        timeout = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            if on_poll is not None:
                on_poll()
            if ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} not ready within {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def dump_stacks(self) -> None:
        """Thread (SIGUSR1) and asyncio task (SIGUSR2) stacks of a verifier process into its
        log, for a post-mortem of a process that would not stop."""
        if self.alive():
            self.signal(signal.SIGUSR1)
            self.signal(signal.SIGUSR2)
            time.sleep(2)

    def kill(self) -> None:
        """SIGKILL the whole group at once (a crash, for fault tests); checks it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait()
        wait_group_gone(self.pid)
        self._assert_group_gone()

    def stop(self) -> int | None:
        """Stop the process and its group; returns its exit code (None if never started)."""
        if self._popen is None:
            return None
        was_running = self.alive()
        timed_out = False
        if was_running:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                if self.dump_stacks_on_timeout:
                    self.dump_stacks()
                with contextlib.suppress(ProcessLookupError):  # it exited just now
                    os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait()
        self._assert_group_gone()
        code = self.popen.returncode
        if was_running and self.require_clean_exit:
            assert not timed_out, f"{self.name} ignored SIGTERM for {self.stop_timeout_s:.0f} s"
            assert code in CLEAN_EXIT, f"{self.name} exited {code}:\n{self.log_tail()}"
        return code

    def _assert_group_gone(self) -> None:
        """The leader has exited; its children get group_grace_s to follow, then SIGKILL."""
        deadline = time.monotonic() + self.group_grace_s
        while (left := group_members(self.pid)) and time.monotonic() < deadline:
            time.sleep(0.25)
        if left:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            # Raised only once the kill took: a caller that checks the group next finds it gone.
            still = wait_group_gone(self.pid)
            gone = "" if not still else f"; {still} still alive {KILL_WAIT_S:.0f} s after SIGKILL"
            raise AssertionError(f"processes {left} outlived {self.name} (killed now{gone})")

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            with contextlib.suppress(AssertionError):  # the readiness error says more
                self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def stop_all(procs: Sequence[ServerProcess]) -> None:
    """Stop the processes side by side (each engine's shutdown takes seconds); the first failed
    stop check is raised once all have stopped."""
    errors: list[AssertionError] = []

    def stop(proc: ServerProcess) -> None:
        try:
            proc.stop()
        except AssertionError as exc:
            errors.append(exc)

    with ThreadPoolExecutor(max(len(procs), 1)) as pool:
        list(pool.map(stop, procs))
    if errors:
        raise errors[0]


def redis_ping(port: int) -> bool:
    """Whether a Redis on 127.0.0.1:``port`` answers PING."""
    with redis.Redis(host="127.0.0.1", port=port, socket_timeout=1) as client:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False


class RedisProcess:
    """A private ``redis-server`` on 127.0.0.1 for fault tests: killed and restarted at will.

    No persistence unless ``aof`` (append-only file, fsync every second). Data and logs live in
    ``data_dir`` (default: a temporary directory removed on stop), so a restart on the same
    port finds what the append-only file kept.

    Example:
        >>> with RedisProcess(aof=True) as r:  # doctest: +SKIP
        ...     r.kill(); r.start()   # a crash and a restart, as an operator would
    """

    def __init__(
        self, port: int | None = None, *, aof: bool = False, data_dir: Path | None = None
    ) -> None:
        self.port = free_port() if port is None else port
        self.aof = aof
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="redis-")
            data_dir = Path(self._tmp.name)
        self.data_dir = data_dir
        self._runs = 0
        self.process: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else [
            "--appendonly", "no",
        ]  # fmt: skip
        return [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--save", "", *persistence,
        ]  # fmt: skip

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._runs += 1
        self.process = ServerProcess(
            self.args(),
            log=self.data_dir / f"redis-{self._runs}.log",
            probe=lambda: redis_ping(self.port),
            cwd=self.data_dir,
            ready_timeout_s=10,
        )
        self.process.start()
        try:
            self.process.wait_ready()
        except BaseException:
            self.process.kill()
            raise
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save; what was not fsynced is lost."""
        if self.process is not None:
            self.process.kill()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def vllm_openai_server(
    settings: Settings,
    model: str,
    *,
    port: int,
    log: Path,
    served_name: str,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ServerProcess:
    """vLLM's OpenAI server built as the in-process engine is (``openai_server_args``), with the
    same CPU binding, KV cache size and cache directory; ready when its /health answers."""
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(settings.engine.cpu_kvcache_gib),
        "VLLM_CPU_OMP_THREADS_BIND": _cpu_list(),
        "VLLM_CACHE_ROOT": str(settings.vllm_cache_dir),
        **(extra_env or {}),
    }
    argv = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        *openai_server_args(settings, model),
        "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port),
        "--disable-uvicorn-access-log", *extra_args,
    ]  # fmt: skip
    return ServerProcess(argv, env=env, log=log, probe=f"http://127.0.0.1:{port}/health", cwd=cwd)


# --- a running service, or one started here --------------------------------------------------


@contextlib.contextmanager
def service(
    url: str | None, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, int | None]]:
    """``url`` (a running service), or one ``verifier serve`` with ``env`` over this process's
    environment, started here until the block ends: the URL to use and the server's pid (None
    for a server this run did not start)."""
    if url:
        yield url.rstrip("/"), None
        return
    port = free_port()
    full = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_LOG_LEVEL": "warning",
        **(env or {}),
    }
    base = f"http://127.0.0.1:{port}"
    print(f"starting verifier serve on {base} (log: {log})")
    with ServerProcess(verifier("serve"), env=full, log=log, probe=base + "/ready") as proc:
        yield base, proc.pid
