"""A real `verifier worker`: the probes Kubernetes and Docker use on its metrics port.

/health answers while the engine starts, /ready only once it scored its probe judgment, and
not after SIGTERM (the drain); the process exits 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from tests.conftest import ROOT, _free_port

pytestmark = pytest.mark.engine
REDIS_URL = "redis://127.0.0.1:6379/0"


def status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


def test_worker_probe_port(model_dir: Path, tmp_path: Path) -> None:
    port = _free_port()
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": REDIS_URL,
        "VERIFIER_REDIS__PREFIX": prefix,
        "VERIFIER_QUEUE__WORKER_METRICS_PORT": str(port),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker"],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while status(base + "/health") != 200:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no /health within 60 s"
            time.sleep(0.2)
        ready_before_engine = status(base + "/ready")
        deadline = time.monotonic() + 600
        while status(base + "/ready") != 200:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "not ready within 600 s"
            time.sleep(0.5)
        assert "ready (metrics port" in log.read_text()
        # The engine takes seconds to start; the probe answered 503 before it was up (checked
        # after the fact, so a fast engine cannot make the test pass for the wrong reason).
        assert ready_before_engine == 503
        assert status(base + "/metrics") == 200

        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert status(base + "/ready") in (503, None)  # draining, or already gone
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
