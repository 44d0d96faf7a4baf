"""A vLLM OpenAI server on the default model (built as the in-process engine is) and a
``verifier serve`` that uses it through ``engine.backend=openai``: one of each per module."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loadtests.harness import ROOT, ServerProcess, free_port, verifier, vllm_openai_server
from service.config import Settings

SERVED_NAME = "remote-judge"


@dataclass(frozen=True)
class Proc:
    url: str
    pid: int
    log: Path


@contextlib.contextmanager
def vllm_openai_process(settings: Settings, model_dir: Path, log: Path) -> Iterator[Proc]:
    """vLLM's OpenAI server with a 1 GiB KV cache, ready once its /health answers."""
    port = free_port()
    server = vllm_openai_server(
        settings,
        str(model_dir),
        port=port,
        log=log,
        served_name=SERVED_NAME,
        extra_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
        cwd=ROOT,
    )
    with server:
        yield Proc(f"http://127.0.0.1:{port}", server.pid, log)


@contextlib.contextmanager
def remote_backed_service(vllm_url: str, log: Path) -> Iterator[Proc]:
    port = free_port()
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_ENGINE__BACKEND": "openai",
        "VERIFIER_ENGINE__OPENAI__BASE_URL": vllm_url + "/v1",
        # The audit's remote judge: the same server, so its reads can be checked against the
        # served model's.
        "VERIFIER_AUDIT__REMOTE_JUDGE": "true",
        "VERIFIER_AUDIT__JUDGE__BASE_URL": vllm_url,
    }
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(
        verifier("serve"), env=env, log=log, probe=url + "/ready", cwd=ROOT
    ) as server:
        yield Proc(url, server.pid, log)
