"""Shared fixtures: settings, the prepared default model and its tokenizer; the engine tier.

Every test that starts an engine or a server process carries the ``engine`` marker, so
``pytest -m "not engine"`` is the fast tier (pure logic and Redis). The marker is added here,
not by hand: to every test under ``tests/e2e`` (each starts a server, a worker or a vLLM
engine) and to every test that uses a fixture in ``ENGINE_FIXTURES``. A test outside both that
still spawns a server or an engine, or builds an in-process ``VLLMEngine``, fails right there,
so a new test cannot slip a minute-long engine start into the fast tier unnoticed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

# transformers resolves paths against the working directory at import time; import it while
# the session's directory is certainly there.
import transformers  # noqa: F401
from hypothesis import settings as hypothesis_settings

from service.config import Settings
from service.engine.models import prepare_default_model
from service.engine.vllm_engine import VLLMEngine

ROOT = Path(__file__).resolve().parents[1]
_HERE = Path(__file__).resolve()
E2E = ROOT / "tests" / "e2e"
# Fixtures that start a server or an engine: any test using one is an engine test.
ENGINE_FIXTURES = frozenset({"server"})
# CLI commands that start a server or an engine (`python -m service.cli <cmd>` or `verifier <cmd>`).
_SERVER_COMMANDS = frozenset({"serve", "worker"})


def _uses_engine_fixture(item: pytest.Item) -> bool:
    """Whether the test uses one of this file's ENGINE_FIXTURES (not a local one of that name,
    such as the Redis `server` of test_queue_redis)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in ENGINE_FIXTURES:
        chosen = defs.get(name)
        if chosen and Path(chosen[-1].func.__code__.co_filename).resolve() == _HERE:
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_e2e = E2E in Path(str(item.path)).parents
        if (in_e2e or _uses_engine_fixture(item)) and item.get_closest_marker("engine") is None:
            item.add_marker(pytest.mark.engine)


def starts_engine(args: Sequence[str]) -> bool:
    """Whether a command line starts a verifier server/worker or a vLLM server."""
    words = [str(a) for a in args]
    for i, word in enumerate(words):
        if "vllm.entrypoints" in word or Path(word).name == "vllm":
            return True
        cli = word == "service.cli" or Path(word).name == "verifier"
        if cli and any(w in _SERVER_COMMANDS for w in words[i + 1 : i + 2]):
            return True
    return False


_current: list[pytest.Item] = []  # the test being run (its setup, call and teardown)


def _refuse_outside_the_engine_tier(what: str) -> None:
    item = _current[-1] if _current else None
    if item is not None and item.get_closest_marker("engine") is None:
        raise RuntimeError(
            f"{item.nodeid} {what} but is not an engine test: move it to tests/e2e, use the "
            "`server` fixture, or mark it @pytest.mark.engine (the fast tier runs -m 'not engine')"
        )


class _GuardedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """Refuses to start a server or an engine for a test without the ``engine`` marker."""

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, str | bytes | Path) else list(args)
        if starts_engine(argv):
            cmd = " ".join(map(str, argv))
            _refuse_outside_the_engine_tier(f"starts a server or an engine ({cmd})")
        super().__init__(args, *rest, **kwargs)


_popen = subprocess.Popen
_engine_start_attr = VLLMEngine.__dict__["start"]  # the classmethod itself, restored at exit
_engine_start = VLLMEngine.start


def _guarded_engine_start(settings: Settings, model: str) -> VLLMEngine:
    _refuse_outside_the_engine_tier("builds an in-process vLLM engine")
    return _engine_start(settings, model)


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen = _GuardedPopen  # type: ignore[misc]
    VLLMEngine.start = staticmethod(_guarded_engine_start)  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen = _popen  # type: ignore[misc]
    VLLMEngine.start = _engine_start_attr  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()


# Property tests check logic, not speed: hypothesis' 200 ms per-example deadline failed them
# while an engine or a cluster test loaded both cores.
hypothesis_settings.register_profile("verifier", deadline=None)
hypothesis_settings.load_profile("verifier")


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings()


@pytest.fixture(scope="session")
def data_dir(settings: Settings) -> Path:
    path = settings.data_dir.resolve()
    assert path.is_dir(), f"data not found at {path} (VERIFIER_DATA_DIR)"
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
