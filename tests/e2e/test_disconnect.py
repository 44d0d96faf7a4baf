"""A client that hangs up stops costing compute: its long judgment is aborted in the engine,
and it is charged for what it spent."""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(240)

# Sampled rationales at the largest budget: minutes of decoding on a CPU if left to run.
LONG = {
    "question": "Explain, step by step and in great detail, why 17 * 23 = 391.",
    "response": "17 * 23 = 391",
    "mode": "reasoning",
    "reasoning_tokens": 1024,
    "samples": 16,
    "temperature": 1.0,
    "cache": False,
}
INFLIGHT = "verifier_worker_inflight_jobs"
ENGINE_RUNNING = "vllm:num_requests_running"
GENERATED = "vllm:generation_tokens"
CANCELLED = "verifier_jobs_cancelled"
BUDGET = "verifier_budget_tokens"
# The worker's 0.2 s cancel poll, the abort between two engine steps of 16 rows, and this
# test's own /metrics reads of a busy server on 2 cores: 1.14 s was seen on an AVX512-BF16 CPU.
FREED_S = 2.0


def metric(url: str, family: str, **labels: str) -> float | None:
    """The sum of a metric family's samples (None when the family is not exposed)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    found = [f for f in text_string_to_metric_families(text) if f.name == family]
    if not found:
        return None
    return sum(
        s.value
        for f in found
        for s in f.samples
        if not s.name.endswith("_created") and labels.items() <= s.labels.items()
    )


def open_judgment(url: str, body: dict[str, Any]) -> socket.socket:
    """Send a judgment on a raw socket and leave it unanswered (the caller closes it)."""
    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    head = (
        f"POST /v1/judge/outcome HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def wait_for(check: Any, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "condition not reached in time"
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_client_that_hangs_up_frees_the_engine(server: Any) -> None:
    url = server.url

    def engine_busy() -> float | None:
        return metric(url, ENGINE_RUNNING)

    # The session's server is shared: measure this job alone, once what earlier tests left
    # running (a timed-out call's job runs to its end) has finished.
    wait_for(lambda: metric(url, INFLIGHT) == 0 and not engine_busy(), 90.0)

    def generated() -> float:
        # inf where the engine exposes no token counter: nothing to wait for
        found = metric(url, GENERATED)
        return float("inf") if found is None else found

    cancelled_before = metric(url, CANCELLED, reason="client_disconnect") or 0.0
    generated_before = generated()
    granted_before = metric(url, BUDGET, result="granted") or 0.0
    spent_before = metric(url, BUDGET, result="spent") or 0.0
    sent = time.monotonic()
    sock = open_judgment(url, LONG)
    try:
        wait_for(lambda: (metric(url, INFLIGHT) or 0) >= 1, 5.0)  # the job is running
        # ... and its requests reached the engine (when vLLM exposes its gauge).
        wait_for(lambda: (metric(url, ENGINE_RUNNING) or 0) >= 1 or engine_busy() is None, 5.0)
        # ... and they are decoding: the prefill of 16 samples is done. vLLM aborts between
        # steps, so a hang-up during that one long step (long in float32 on 2 cores) would
        # measure the step, not the abort; a rationale left to run is all decode steps.
        decoding = wait_for(lambda: generated() >= generated_before + 16, 30.0)
        print(f"decoding {decoding:.2f} s after the running requests were seen")  # noqa: T201
        time.sleep(max(0.0, 0.3 - (time.monotonic() - sent)))
        engine_busy_at_close = engine_busy()
    finally:
        sock.close()
    closed = time.monotonic()

    # The job leaves the worker and vLLM stops running its requests within FREED_S, where the
    # rationales left to run would take minutes.
    freed = wait_for(lambda: metric(url, INFLIGHT) == 0, FREED_S)
    if engine_busy_at_close is not None:  # vLLM's gauge, when the engine exposes it
        assert engine_busy_at_close >= 1
        wait_for(lambda: metric(url, ENGINE_RUNNING) == 0, max(0.05, FREED_S - freed))
    drop = time.monotonic() - closed
    print(f"running requests dropped {drop:.2f} s after the client left")  # noqa: T201
    assert drop < FREED_S
    # Counted once the worker reported what the job spent (or the 2 s wait for it ended).
    wait_for(
        lambda: metric(url, CANCELLED, reason="client_disconnect") == cancelled_before + 1, 3.0
    )
    # The quota is settled for what the aborted job spent: its prompts, not the estimate of
    # 16 rationales of 1024 tokens.
    estimate = (metric(url, BUDGET, result="granted") or 0.0) - granted_before
    spent = (metric(url, BUDGET, result="spent") or 0.0) - spent_before
    print(f"charged {spent:.0f} of an estimate of {estimate:.0f} tokens")  # noqa: T201
    assert 0 < spent < estimate

    # The engine is free: a direct judgment is answered at once, not after 16 long rationales.
    start = time.monotonic()
    direct = httpx.post(
        url + "/v1/judge/outcome",
        json={"question": "Is 2 + 2 = 4?", "response": "4", "cache": False},
        timeout=60,
    )
    took = time.monotonic() - start
    assert direct.status_code == 200, direct.text
    assert took < 3.0, f"the direct judgment waited {took:.1f} s"
