"""The worker's probe port: /health, /ready following the worker's state, /metrics with the
process-wide registry after the worker's own."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from loadtests.harness import free_port
from service import app as app_module
from service.ops import healthcheck
from service.ops.probe_server import ProbeState, start_probe_server


def test_health_ready_and_metrics() -> None:
    registry = CollectorRegistry()
    Counter("verifier_probe_test", "a counter", registry=registry).inc(3)
    state = ProbeState()
    port = free_port()
    start_probe_server(port, registry, state)
    base = f"http://127.0.0.1:{port}"

    assert httpx.get(base + "/health", timeout=5).status_code == 200
    not_ready = httpx.get(base + "/ready", timeout=5)
    assert (not_ready.status_code, not_ready.json()) == (503, {"status": "starting"})
    state.ready = True
    assert httpx.get(base + "/ready", timeout=5).status_code == 200
    state.ready = False  # draining
    assert httpx.get(base + "/ready", timeout=5).status_code == 503
    metrics = httpx.get(base + "/metrics", timeout=5)
    assert metrics.status_code == 200
    assert "verifier_probe_test_total 3.0" in metrics.text
    # Then the process-wide registry, where an in-process vLLM engine keeps its metrics.
    engine_side = Counter("verifier_probe_process_wide", "in the default registry")
    try:
        engine_side.inc(2)
        text = httpx.get(base + "/metrics", timeout=5).text
        assert "verifier_probe_process_wide_total 2.0" in text
    finally:
        REGISTRY.unregister(engine_side)


def test_metrics_server_reports_taken_port() -> None:
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = int(busy.getsockname()[1])
        with pytest.raises(SystemExit, match="VERIFIER_QUEUE__WORKER_METRICS_PORT"):
            app_module.start_metrics_server(port, CollectorRegistry())


def test_healthcheck_default_worker_port_is_the_apps() -> None:
    assert healthcheck.WORKER_PORT == app_module.METRICS_PORT


def test_healthcheck_finds_the_worker_port(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    start_probe_server(port, CollectorRegistry(), ProbeState())
    monkeypatch.setenv("VERIFIER_PORT", str(free_port()))  # nothing listens there
    monkeypatch.setenv("VERIFIER_QUEUE__WORKER_METRICS_PORT", str(port))
    assert healthcheck.main() == 0
    monkeypatch.setenv("VERIFIER_QUEUE__WORKER_METRICS_PORT", str(free_port()))
    assert healthcheck.main() == 1
