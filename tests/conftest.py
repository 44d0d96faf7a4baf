"""Shared fixtures: settings, the prepared default model and its tokenizer; the engine tier.

Every test that starts an engine or a server process carries the ``engine`` marker, so
``pytest -m "not engine"`` is the fast tier (pure logic and Redis). The marker is added here,
not by hand: to every test under ``tests/e2e`` (each starts a server, a worker or a vLLM
engine) and to every test that uses a fixture in ``ENGINE_FIXTURES``. A test outside both that
still spawns a server or an engine, or builds an in-process ``VLLMEngine``, fails right there,
so a new test cannot slip a minute-long engine start into the fast tier unnoticed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

# transformers resolves paths against the working directory at import time; import it while
# the session's directory is certainly there.
import transformers  # noqa: F401
from hypothesis import settings as hypothesis_settings

from loadtests.harness import ROOT, ServerProcess, free_port, http_ok, verifier
from service.config import CodeSettings, Settings
from service.engine.models import prepare_default_model
from service.engine.vllm_engine import VLLMEngine
from service.sandbox.runner import Sandbox
from tests.support.cluster import DEAD_EXIT_S
from tests.support.small_server import LORA_NAME, SMALL_LIMITS, SmallServer

_HERE = Path(__file__).resolve()
E2E = ROOT / "tests" / "e2e"
# Fixtures that start a server or an engine: any test using one is an engine test.
ENGINE_FIXTURES = frozenset({"server", "small_server"})
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


# Under `pytest -n 2` one xdist worker runs every engine test of the session servers, in
# collection order, and the other runs the rest beside it (the fast tier fills the core an
# engine start leaves idle). The scheduler sees node ids only, not markers, so the engine tier
# is named by file here; a test with the engine marker in a file this does not name fails at
# collection.
ENGINE_SCOPE = "the engine tier"
ENGINE_FILES = frozenset({"tests/deploy/test_dashboard.py", "tests/unit/test_models_convert.py"})
# Engine modules that start servers of their own on small models and compute little: the other
# worker runs them after the fast tier, beside the engine tier, since an engine start is mostly
# one core's imports and the engine tier left the second core idle for most of its run. They
# must not use the session servers (that would start a second one on the other worker).
SIDE_SCOPE = "the side engine tier"
SIDE_FILES = frozenset({"tests/e2e/test_pooling_http.py", "tests/e2e/test_models_http.py"})


def xdist_scope(nodeid: str) -> str:
    """The unit of work an xdist worker takes whole: one of the engine tiers, else one file."""
    path = nodeid.split("::", 1)[0]
    if path in SIDE_FILES:
        return SIDE_SCOPE
    return ENGINE_SCOPE if path.startswith("tests/e2e/") or path in ENGINE_FILES else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class EngineTierScheduling(LoadScopeScheduling):
        """xdist's loadscope with the engine tier as one scope: one session server, and the
        test that kills its engine still runs after every other test that uses it. The engine
        tier goes to the first worker; the side tier waits behind every other file, so its
        engine starts come after the session server's (together they slowed both)."""

        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if ENGINE_SCOPE in self.workqueue:
                self.workqueue.move_to_end(ENGINE_SCOPE, last=False)
            if SIDE_SCOPE in self.workqueue:
                self.workqueue.move_to_end(SIDE_SCOPE)
            super()._assign_work_unit(node)

    return EngineTierScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_e2e = E2E in Path(str(item.path)).parents
        if (in_e2e or _uses_engine_fixture(item)) and item.get_closest_marker("engine") is None:
            item.add_marker(pytest.mark.engine)
    strays = [
        item.nodeid
        for item in items
        if (
            item.get_closest_marker("engine") is not None
            and xdist_scope(item.nodeid) not in (ENGINE_SCOPE, SIDE_SCOPE)
        )
        or (xdist_scope(item.nodeid) == SIDE_SCOPE and _uses_engine_fixture(item))
    ]
    if strays:
        raise pytest.UsageError(
            f"engine tests outside tests/e2e and ENGINE_FILES, or session-server tests in "
            f"SIDE_FILES (tests/conftest.py): {strays}; under -n they would start a second "
            "session server"
        )
    # A test that kills the session server's engine runs after every other test (sort is
    # stable: the rest keep their order).
    items.sort(key=lambda item: item.get_closest_marker("kills_session_server") is not None)


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


@pytest.fixture(autouse=True)
def _collect_what_the_test_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Engine-tier tests only: collect garbage at each one's teardown, so that a socket or
    transport a test left open fails that test (warnings are errors), not whichever later test
    the collector happens to run in."""
    yield
    if request.node.get_closest_marker("engine") is not None:
        gc.collect()


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


@dataclass(frozen=True)
class Server:
    """A real `verifier serve` process (one vLLM engine for the whole test session)."""

    url: str
    log: Path
    # A judge call made once /health answered but before /ready: what a caller gets then.
    not_ready_response: httpx.Response | None
    process: ServerProcess


@pytest.fixture(scope="session")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
        # The code tests (tests/e2e/test_code_*.py) run programs here; the install script
        # puts bubblewrap on the machine, and the server refuses to start without it.
        "VERIFIER_CODE__ENABLED": "true",
        # The session's last test kills this server's engine (tests/e2e/test_dead_engine.py).
        "VERIFIER_QUEUE__ENGINE_DEAD_EXIT_S": str(DEAD_EXIT_S),
    }
    not_ready: list[httpx.Response] = []

    def call_before_ready() -> None:
        if not not_ready and http_ok(url + "/health"):
            with contextlib.suppress(httpx.TransportError):
                not_ready.append(
                    httpx.post(
                        url + "/v1/judge/outcome",
                        json={"question": "q", "response": "r"},
                        timeout=10,
                    )
                )

    proc = ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready", cwd=ROOT)
    proc.start()
    try:
        proc.wait_ready(on_poll=call_before_ready)
        yield Server(url, log, not_ready[0] if not_ready else None, proc)
    finally:
        # Checks that the server stopped cleanly (unless the dead-engine test ended it) and that
        # vLLM's engine processes went with it.
        proc.stop()


@pytest.fixture(scope="session")
def small_server(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SmallServer]:
    """One server for the LoRA tests and the schema fuzzing, which need a configuration the
    session server must not have: one engine start (half a minute on 2 cores) instead of two."""
    from tests.support.lora import build_adapter

    tmp = tmp_path_factory.mktemp("small-server")
    adapter = build_adapter(model_dir, tmp / LORA_NAME)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_ENGINE__DTYPE": "float32",
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
        "VERIFIER_ENGINE__MAX_MODEL_LEN": "2048",
        "VERIFIER_ENGINE__LORA_ADAPTERS": f'{{"{LORA_NAME}": "{adapter}"}}',
        "VERIFIER_CODE__ENABLED": "true",  # schema fuzzing reaches every operation, /run_code too
        **{f"VERIFIER_LIMITS__{k}": str(v) for k, v in SMALL_LIMITS.items()},
    }
    with ServerProcess(
        verifier("serve"), env=env, log=tmp / "serve.log", probe=url + "/ready", cwd=ROOT
    ):
        yield SmallServer(url, adapter)


# How far a logit may move between cold and prefix-cached, or single and batched, calls. In
# bf16 the two label logprobs (|logp| 4-16 here, bf16 ulp 0.0625) each move by whole ulps: up
# to 0.25 was seen between 16 sequential and 16 concurrent calls (2 of 3 runs before the
# continuous worker, too), so the bound is two such steps. float32 (dtype=auto on a CPU
# without native bf16) moves by far less.
LOGIT_TOL = {"bfloat16": 0.26, "float16": 0.26, "float32": 0.02}


@pytest.fixture(scope="session")
def code_sandbox() -> Sandbox:
    """The code sandbox as a worker starts it (fails, naming the missing part, on a host that
    cannot confine code: scripts/install.sh installs bubblewrap)."""
    return Sandbox.start(CodeSettings(enabled=True))


@pytest.fixture(scope="session")
def logit_tol(server: Any) -> float:
    dtype = httpx.get(server.url + "/v1/models", timeout=10).json()["data"][0]["dtype"]
    return LOGIT_TOL[dtype]


@pytest.fixture(scope="session")
def prob_tol(logit_tol: float) -> float:
    """How far a probability may move between two reads of the model: a sigmoid or a softmax
    share moves by at most a quarter of the logit gap's change, and the gap between two letters
    by twice one logprob's move, so half the logit tolerance bounds it (0.13 bf16, 0.01 fp32)."""
    return logit_tol / 2
