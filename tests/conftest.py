"""Shared fixtures: settings, the prepared default model and its tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# transformers resolves paths against the working directory at import time; import it while
# the session's directory is certainly there.
import transformers  # noqa: F401
from hypothesis import settings as hypothesis_settings

from service.config import Settings
from service.engine.models import prepare_default_model

ROOT = Path(__file__).resolve().parents[1]

# Property tests check logic, not speed: hypothesis' 200 ms per-example deadline failed them
# while an engine or a cluster test loaded both cores.
hypothesis_settings.register_profile("verifier", deadline=None)
hypothesis_settings.load_profile("verifier")


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings()


@pytest.fixture(scope="session")
def data_dir(settings: Settings) -> Path:
    path = settings.data_dir if settings.data_dir.is_absolute() else ROOT / settings.data_dir
    assert path.is_dir(), f"shared data not found at {path} (VERIFIER_DATA_DIR)"
    return path


@pytest.fixture(scope="session")
def model_dir(settings: Settings) -> Path:
    """The embedded default model, converted once per machine (about 15 s the first time)."""
    return prepare_default_model(settings)


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


class Server:
    """A real `verifier serve` process (one vLLM engine for the whole test session)."""

    def __init__(self, url: str, log: Path, not_ready_response: Any) -> None:
        self.url = url
        self.log = log
        self.not_ready_response = not_ready_response


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: Any, url: str, log: Path) -> Any:
    """Wait for /health, record one judge call made before ready, then wait for /ready."""
    import time

    import httpx

    not_ready = None
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            if not_ready is None and httpx.get(url + "/health", timeout=2).status_code == 200:
                not_ready = httpx.post(
                    url + "/v1/judge/outcome", json={"question": "q", "response": "r"}, timeout=10
                )
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return not_ready
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not ready in time:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    import os
    import signal
    import subprocess
    import sys

    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
    }
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve"],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so teardown can end vLLM's engine processes too
        )
    url = f"http://127.0.0.1:{port}"
    try:
        not_ready = _wait_ready(proc, url, log)
        yield Server(url, log, not_ready)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # uvicorn re-raises SIGTERM after a clean shutdown: 143 / -15 is success.
        assert proc.returncode in (0, -signal.SIGTERM, 143), log.read_text()[-4000:]
        assert _group_gone(proc.pid), "vLLM engine processes outlived the server"


def _group_gone(pgid: int) -> bool:
    import os
    import time

    for _ in range(40):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.25)
    os.killpg(pgid, 9)
    return False
