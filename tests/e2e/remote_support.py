"""A vLLM OpenAI server on the default model (built as the in-process engine is) and a
``verifier serve`` that uses it through ``engine.backend=openai``: one of each per module."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from service.config import Settings
from service.engine.vllm_engine import _cpu_list, openai_server_args
from tests.conftest import ROOT, _free_port, _wait_ready

SERVED_NAME = "remote-judge"


@dataclass(frozen=True)
class Proc:
    url: str
    pid: int
    log: Path


@contextlib.contextmanager
def _process(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):  # engine children left by a killed server
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def vllm_openai_server(settings: Settings, model_dir: Path, log: Path) -> Iterator[Proc]:
    port = _free_port()
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": _cpu_list(),
        "VLLM_CACHE_ROOT": str(settings.vllm_cache_dir),
    }
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        *openai_server_args(settings, str(model_dir)),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--disable-uvicorn-access-log",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with _process(cmd, env, log) as proc:
        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited:\n{log.read_text()[-4000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM server not up in time:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield Proc(url, proc.pid, log)


@contextlib.contextmanager
def remote_backed_service(vllm_url: str, log: Path) -> Iterator[Proc]:
    port = _free_port()
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_ENGINE__BACKEND": "openai",
        "VERIFIER_ENGINE__OPENAI__BASE_URL": vllm_url + "/v1",
    }
    url = f"http://127.0.0.1:{port}"
    with _process([sys.executable, "-m", "service.cli", "serve"], env, log) as proc:
        _wait_ready(proc, url, log)
        yield Proc(url, proc.pid, log)
