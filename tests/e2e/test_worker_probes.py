"""A real `verifier worker`: the probes Kubernetes and Docker use on its metrics port.

/health answers while the engine starts, /ready only once it scored its probe judgment, and
not after SIGTERM (the drain); the process exits 0.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from loadtests.harness import ROOT, ServerProcess, free_port, verifier

pytestmark = pytest.mark.engine
REDIS_URL = "redis://127.0.0.1:6379/0"


def status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


def test_worker_probe_port(model_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": REDIS_URL,
        "VERIFIER_REDIS__PREFIX": prefix,
        "VERIFIER_QUEUE__WORKER_METRICS_PORT": str(port),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
    }
    base = f"http://127.0.0.1:{port}"
    worker = ServerProcess(
        verifier("worker"), env=env, log=tmp_path / "worker.log", probe=base + "/ready", cwd=ROOT
    ).start()
    try:
        worker.wait_ready(probe=lambda: status(base + "/health") == 200, timeout_s=60)
        ready_before_engine = status(base + "/ready")
        worker.wait_ready(timeout_s=600)
        assert "ready (metrics port" in worker.log.read_text()
        # The engine takes seconds to start; the probe answered 503 before it was up (checked
        # after the fact, so a fast engine cannot make the test pass for the wrong reason).
        assert ready_before_engine == 503
        assert status(base + "/metrics") == 200

        worker.signal(signal.SIGTERM)
        time.sleep(1.0)
        assert status(base + "/ready") in (503, None)  # draining, or already gone
        assert worker.popen.wait(timeout=120) == 0, worker.log_tail()
    finally:
        worker.stop()
