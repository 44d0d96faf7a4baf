"""The fast tier stays fast: a test without the ``engine`` marker cannot start a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
