"""The fast tier stays fast: a test without the ``engine`` marker cannot start a server; under
``-n`` the engine tier is one worker's unit of work."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from loadtests.harness import ServerProcess, verifier
from service.config import Settings
from service.engine.vllm_engine import VLLMEngine


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-m", "service.cli", "serve", "--help"],
        [sys.executable, "-m", "service.cli", "worker"],
        ["/opt/venv/bin/verifier", "serve"],
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--help"],
    ],
)
def test_an_unmarked_test_cannot_start_a_server_or_an_engine(argv: list[str]) -> None:
    with pytest.raises(RuntimeError, match="is not an engine test"):
        subprocess.Popen(argv)


def test_other_commands_still_run() -> None:
    # The guard looks at the command, not at its words anywhere: this is no server.
    done = subprocess.run([sys.executable, "-c", "print('serve')"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "serve\n")


def test_an_unmarked_test_cannot_build_an_in_process_engine() -> None:
    with pytest.raises(RuntimeError, match="builds an in-process vLLM engine but is not an engine"):
        VLLMEngine.start(Settings(), "/no/such/model")


def test_the_process_harness_is_guarded_too(tmp_path: Path) -> None:
    server = ServerProcess(verifier("serve"), log=tmp_path / "serve.log", probe="http://x/ready")
    with pytest.raises(RuntimeError, match="is not an engine test"):
        server.start()
    assert not server.alive()


@pytest.fixture
def conftest(request: pytest.FixtureRequest) -> Any:
    """tests/conftest.py as pytest loaded it (every conftest.py outside a package is imported as
    the module `conftest`, so `import conftest` gives whichever was loaded last)."""
    plugin = request.config.pluginmanager.get_plugin(str(Path(__file__).parents[1] / "conftest.py"))
    assert plugin is not None
    return plugin


def test_the_engine_tier_is_one_unit_of_work_under_xdist(conftest: Any) -> None:
    scope = conftest.xdist_scope
    assert scope("tests/e2e/test_outcome.py::test_x[a::b]") == conftest.ENGINE_SCOPE
    assert {scope(f"{path}::test_x") for path in conftest.ENGINE_FILES} == {conftest.ENGINE_SCOPE}
    assert {scope(f"{path}::test_x") for path in conftest.SIDE_FILES} == {conftest.SIDE_SCOPE}
    assert scope("tests/unit/test_budget.py::test_x") == "tests/unit/test_budget.py"
    assert scope("tests/integration/test_queue_redis.py::T::test_x") == (
        "tests/integration/test_queue_redis.py"
    )


@dataclass
class _Item:
    """What the collection hook reads of a test."""

    nodeid: str
    path: Path
    markers: list[str]

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.name)


@pytest.mark.parametrize("engine", [False, True])
def test_an_engine_test_outside_the_engine_tier_files_stops_the_collection(
    conftest: Any, engine: bool
) -> None:
    nodeid = "tests/unit/test_new.py::test_x"
    item = _Item(nodeid, conftest.ROOT / nodeid.split("::")[0], ["engine"] if engine else [])
    e2e = _Item("tests/e2e/test_new.py::test_y", conftest.E2E / "test_new.py", [])
    if engine:
        with pytest.raises(pytest.UsageError, match="tests/unit/test_new.py::test_x"):
            conftest.pytest_collection_modifyitems([item, e2e])  # type: ignore[list-item]
    else:
        conftest.pytest_collection_modifyitems([item, e2e])  # type: ignore[list-item]
    assert e2e.markers == ["engine"]  # marked by its folder


def test_a_side_tier_test_on_a_session_server_stops_the_collection(conftest: Any) -> None:
    (path,) = sorted(conftest.SIDE_FILES)[:1]
    item = _Item(f"{path}::test_x", conftest.ROOT / path, [])
    conftest.pytest_collection_modifyitems([item])  # type: ignore[list-item]
    assert item.markers == ["engine"]
    # A fixture named as a session server's and defined in tests/conftest.py.
    defs = {"server": [SimpleNamespace(func=conftest.xdist_scope)]}
    item._fixtureinfo = SimpleNamespace(name2fixturedefs=defs)  # type: ignore[attr-defined]
    with pytest.raises(pytest.UsageError, match=f"{path}::test_x"):
        conftest.pytest_collection_modifyitems([item])  # type: ignore[list-item]


@dataclass(eq=False)  # hashed by identity, as the scheduler keys its workers
class _Node:
    """An xdist worker as the scheduler sees it."""

    sent: list[list[int]] = field(default_factory=list)
    shutting_down: bool = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)


def test_the_engine_tier_goes_to_the_first_worker_and_the_side_tier_after_the_fast_files(
    conftest: Any,
) -> None:
    side = sorted(conftest.SIDE_FILES)[0]
    # Collection order with the fast tier's largest file first, as loadscope's reorder leaves it.
    ids = [
        "tests/unit/test_big.py::test_1",
        "tests/unit/test_big.py::test_2",
        f"{side}::test_3",
        "tests/e2e/test_outcome.py::test_4",
        "tests/unit/test_small.py::test_5",
    ]
    config = SimpleNamespace(getvalue={"tx": ["2*popen"]}.__getitem__)  # what `-n 2` sets
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    nodes = [_Node(), _Node()]
    for node in nodes:
        scheduler.registered_collections[node] = ids
    for nodeid in ids:
        scheduler.workqueue.setdefault(conftest.xdist_scope(nodeid), {})[nodeid] = False
    for node in nodes:
        scheduler._assign_work_unit(node)
    assert [node.sent for node in nodes] == [[[3]], [[0, 1]]]
    scheduler._assign_work_unit(nodes[1])
    assert nodes[1].sent[-1] == [4]  # the fast files in the order they were queued
    scheduler._assign_work_unit(nodes[1])
    assert nodes[1].sent[-1] == [2]  # the side tier last, whichever worker asks
