"""Start a local `verifier serve` for a benchmark that was given no --base-url."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

READY_TIMEOUT_S = 900.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(model: str | None) -> Iterator[str]:
    """Serve `model` (None: the embedded default) on a free loopback port until the block
    ends; yields its URL once /ready answers 200. The process group is ended on exit, so
    vLLM's engine processes go with it."""
    port = free_port()
    env = {**os.environ, "VERIFIER_HOST": "127.0.0.1", "VERIFIER_PORT": str(port)}
    if model:
        env["VERIFIER_ENGINE__MODEL"] = model
    with tempfile.NamedTemporaryFile("w+", prefix="verifier-bench-", suffix=".log") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(proc, url, Path(log.name))
            yield url
        finally:
            _stop(proc)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"server not ready within {READY_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
