"""Redis-batched workers as real processes: two API processes, worker processes with real
engines, and a private Redis server this module may restart. Auth is on.

The order of the tests matters (they share the cluster and some kill workers), so they run in
file order; each test leaves at least one live worker behind or starts a replacement, but the
last, which kills one's engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from loadtests.harness import free_port
from loadtests.metrics_text import sample_sum
from service.stores.keys import RedisNames
from tests.support.cluster import (
    Cluster,
    auth,
    busy_worker,
    children_of,
    create_key,
    engine_core,
    exit_code,
    fire,
    fit_probability_calibration,
    freeze_busy_worker,
    judge,
    metric,
    pid_alive,
    post_long,
    probe,
    start_apis_and_workers,
    wait_api,
    wait_inflight,
    wait_taken,
    wait_worker,
)

pytestmark = pytest.mark.timeout(900)

CLAIM_IDLE_MS = 3000
MAX_DELIVERIES = 2
# How long a stopped worker waits for the other to take every job it holds.
STOP_MAX_S = 60
QUOTA = 3000
# Room for one hybrid judgment's estimate (about 300 tokens), not for two.
RULE_QUOTA = 450
# Workers exit on a job of this kind (fault injection); no other test here sends one.
POISON_KIND = "mcq_audit"
# The kill lands after 40 answers; the survivor takes the other 56 (32 callers keep it batching).
KILL_JOBS = 96


@pytest.fixture(scope="module")
def cluster(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "VERIFIER_REDIS__PREFIX": f"t{uuid.uuid4().hex[:8]}:",
        "VERIFIER_QUEUE__CLAIM_IDLE_MS": str(CLAIM_IDLE_MS),
        "VERIFIER_QUEUE__MAX_DELIVERIES": str(MAX_DELIVERIES),
        "VERIFIER_QUEUE__FAULT_CRASH_KIND": POISON_KIND,
        # A worker stopped (SIGSTOP) while another takes its jobs (up to STOP_MAX_S) and answers
        # them (as long again) must not find itself stalled on resume.
        "VERIFIER_QUEUE__STUCK_GRACE_S": str(2 * STOP_MAX_S + 30),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
        "VERIFIER_AUTH__ENABLED": "true",
        "VERIFIER_LIMITS__REQUEST_TIMEOUT_S": "180",
        "VERIFIER_LOG_LEVEL": "info",
    }
    c = Cluster(tmp=tmp_path_factory.mktemp("cluster"), env=env, redis_port=port)
    try:
        start_apis_and_workers(
            c,
            {"VERIFIER_QUEUE__MAX_QUEUE_DEPTH": "2", "VERIFIER_REWARD__MAX_CONCURRENT_ITEMS": "8"},
            {"alpha": None, "beta": None, "quota": QUOTA, "rules": RULE_QUOTA},
        )
        yield c
    finally:
        c.close()


def test_a_worker_is_healthy_before_it_is_ready(cluster: Cluster) -> None:
    # The engine takes seconds to start; /ready answered 503 before it was up (checked after
    # the fact, so a fast engine cannot make the test pass for the wrong reason).
    assert cluster.probes_before_ready == [(200, 503), (200, 503)]
    for w in cluster.workers[:2]:
        assert "ready (metrics port" in w.log.read_text()
        assert probe(f"http://127.0.0.1:{w.port}/metrics") == 200


# --- auth ------------------------------------------------------------------------------------


def test_every_route_but_health_needs_a_key(cluster: Cluster) -> None:
    from service.app import create_app
    from service.config import Settings

    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", auth={"enabled": True}))
    checked = 0
    for route in app.routes:
        path = getattr(route, "path", "")
        for method in sorted(getattr(route, "methods", None) or {"GET"}):
            if method == "HEAD":
                continue
            url = cluster.url + path.replace("{job_id}", "x").replace("{path}", "x")
            for headers in ({}, auth("vk_wrong"), {"Authorization": "Basic abc"}):
                r = httpx.request(method, url, json={}, headers=headers, timeout=10)
                if path in ("/health", "/ready"):
                    assert r.status_code == 200, (method, path)
                else:
                    assert r.status_code == 401, (method, path, r.text)
                    assert r.json()["error"]["type"] == "unauthorized"
            checked += 1
    assert checked >= 10


def test_tenants_cannot_read_each_others_results(cluster: Cluster) -> None:
    r = judge(cluster.url, cluster.keys["alpha"], 1)
    assert r.status_code == 200, r.text
    job_id = r.headers["X-Job-Id"]
    own = httpx.get(f"{cluster.url}/v1/results/{job_id}", headers=auth(cluster.keys["alpha"]))
    assert own.status_code == 200
    assert own.json()["score"] == r.json()["score"]
    other = httpx.get(f"{cluster.url}/v1/results/{job_id}", headers=auth(cluster.keys["beta"]))
    assert other.status_code == 404
    assert other.json()["error"]["type"] == "not_found"


def test_calibrations_are_per_tenant_and_outlive_an_api_restart(cluster: Cluster) -> None:
    alpha, beta = auth(cluster.keys["alpha"]), auth(cluster.keys["beta"])
    items = [
        {"question": "Which is a fruit?", "options": ["a stone", "a pear", "a car", "a cup"]},
        {"question": "Which one can fly?", "options": ["a fish", "a rock", "a bird", "a tree"]},
    ]
    fit = httpx.post(
        f"{cluster.url}/v1/mcq/calibrations",
        json={"method": "pride", "items": items},
        headers=alpha,
        timeout=300,
    )
    assert fit.status_code == 200, fit.text
    cal = fit.json()
    path = f"/v1/mcq/calibrations/{cal['id']}"
    # Tenant beta can neither read, list, use nor delete it.
    assert httpx.get(cluster.url + path, headers=beta).status_code == 404
    listed = httpx.get(f"{cluster.url}/v1/mcq/calibrations", headers=beta).json()["data"]
    assert cal["id"] not in [c["id"] for c in listed]
    use = {**items[0], "debias": "pride", "calibration_id": cal["id"]}
    refused = httpx.post(f"{cluster.url}/v1/mcq/answer", json=use, headers=beta, timeout=300)
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "unknown_calibration"
    assert httpx.delete(cluster.url + path, headers=beta).status_code == 404
    pcal = fit_probability_calibration(cluster.url, alpha)
    ppath = f"/v1/calibrations/{pcal['id']}"
    assert httpx.get(cluster.url + ppath, headers=beta).status_code == 404
    listed = httpx.get(f"{cluster.url}/v1/calibrations", headers=beta).json()["data"]
    assert pcal["id"] not in [c["id"] for c in listed]
    puse = {**PROBE, "calibration_id": pcal["id"]}
    refused = httpx.post(f"{cluster.url}/v1/judge/outcome", json=puse, headers=beta, timeout=300)
    assert refused.json()["error"]["type"] == "unknown_calibration"
    assert httpx.delete(cluster.url + ppath, headers=beta).status_code == 404
    mark = {"calibration_id": pcal["id"]}
    default = httpx.put(f"{cluster.url}/v1/calibrations/defaults/outcome", json=mark, headers=beta)
    assert default.status_code == 404
    # Restart the second API process: the calibration lives in Redis, not in the process.
    old = cluster.apis[1]
    old.stop()
    port = free_port()
    cluster.apis[1] = cluster.spawn(
        ["serve", "--no-worker", "--port", str(port)], "api1b", port, {}
    )
    wait_api(cluster.apis[1])
    url = f"http://127.0.0.1:{port}"
    again = httpx.get(url + path, headers=alpha)
    assert again.status_code == 200
    assert again.json()["params"] == cal["params"]
    used = httpx.post(f"{url}/v1/mcq/answer", json=use, headers=alpha, timeout=300)
    assert used.status_code == 200, used.text
    assert used.json()["debias"]["calibration_id"] == cal["id"]
    assert httpx.get(url + ppath, headers=alpha).json()["parameters"] == pcal["parameters"]
    pused = httpx.post(f"{url}/v1/judge/outcome", json=puse, headers=alpha, timeout=300)
    assert pused.status_code == 200, pused.text
    assert pused.json()["calibration"]["id"] == pcal["id"]
    # The record names the model it was read on: on another model it is refused.
    other = {**pcal, "id": pcal["id"] + "x", "model": "another-model"}
    names = RedisNames(cluster.env["VERIFIER_REDIS__PREFIX"])
    with redis.Redis(port=cluster.redis_port) as r:
        r.set(names.probability_calibration("alpha", other["id"]), json.dumps(other))
    wrong = {**PROBE, "calibration_id": other["id"]}
    refused = httpx.post(f"{url}/v1/judge/outcome", json=wrong, headers=alpha, timeout=300)
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "calibration_mismatch"
    assert "another-model" in refused.json()["error"]["message"]


PROBE = {"question": "What is 4 + 4?", "response": "4 + 4 = 8."}


def test_idempotency_key_returns_the_stored_result(cluster: Cluster) -> None:
    key = cluster.keys["alpha"]
    idem = {"Idempotency-Key": uuid.uuid4().hex}
    first = judge(cluster.url, key, 7, **idem)
    second = judge(f"http://127.0.0.1:{cluster.apis[1].port}", key, 7, **idem)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert first.headers["X-Job-Id"] != ""
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"


# --- backpressure, quotas, metrics -------------------------------------------------------------


def test_queue_full_gives_429_with_retry_after(cluster: Cluster) -> None:
    assert cluster.small_api is not None
    url = f"http://127.0.0.1:{cluster.small_api.port}"
    responses = fire(url, cluster.keys["alpha"], 40, concurrency=40, offset=1000)
    codes = [r.status_code for r in responses]
    assert 429 in codes
    assert set(codes) <= {200, 429}
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["type"] == "overloaded"
    assert int(refused.headers["Retry-After"]) >= 1


def test_quota_holds_across_two_api_processes(cluster: Cluster) -> None:
    key = cluster.keys["quota"]
    urls = [f"http://127.0.0.1:{a.port}" for a in cluster.apis]
    with ThreadPoolExecutor(64) as pool:
        responses = list(pool.map(lambda i: judge(urls[i % 2], key, 2000 + i), range(200)))
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert ok
    assert refused
    assert len(ok) + len(refused) == 200
    assert all(r.json()["error"]["type"] == "quota_exhausted" for r in refused)
    spent = sum(r.json()["usage"]["total_tokens"] for r in ok)
    biggest = max(r.json()["usage"]["total_tokens"] for r in ok)
    assert spent / QUOTA <= 1 + biggest / QUOTA


def test_reward_leases_are_shared_through_redis(cluster: Cluster) -> None:
    """Reward slots held elsewhere (here by the test, as another API process would) count
    against the tenant's cap (8 on the small API), then come back."""
    from service.stores.concurrency import RedisSlots
    from service.stores.connection import connect

    small, key = f"http://127.0.0.1:{cluster.small_api.port}", cluster.keys["alpha"]
    check = {"type": "string", "operation": "contains", "reference": "72"}

    def call(n: int) -> httpx.Response:
        body = {"items": [{"prompt": "Total?", "response": "It is 72.", "verifier": check}] * n}
        return httpx.post(small + "/v1/rewards", json=body, headers=auth(key), timeout=120)

    async def hold_then_call() -> list[httpx.Response]:
        r = connect(f"redis://127.0.0.1:{cluster.redis_port}/0")
        prefix = cluster.env["VERIFIER_REDIS__PREFIX"]
        lease = await RedisSlots(r, prefix, 60).acquire("alpha", 6, 8)
        out = [await asyncio.to_thread(call, 4), await asyncio.to_thread(call, 2)]
        await RedisSlots(r, prefix, 60).release(lease)
        out.append(await asyncio.to_thread(call, 8))
        assert await r.zcard(prefix + "inflight:alpha") == 0  # every call released its slots
        await r.aclose()
        return out

    refused, fits, after = asyncio.run(hold_then_call())
    assert (refused.status_code, refused.json()["error"]["type"]) == (429, "concurrency_limited")
    assert refused.headers["X-Reward-Concurrency-In-Use"] == "6"
    assert (fits.status_code, fits.headers["X-Reward-Concurrency-In-Use"]) == (200, "8")
    assert (after.status_code, after.headers["X-Reward-Concurrency-Limit"]) == (200, "8")
    assert after.json()["results"][0]["reward"] == 1.0


def test_rule_decisions_spend_no_quota(cluster: Cluster) -> None:
    """Hybrid reserves what the model would cost and settles what ran: a rule decision, 0.
    Twenty of them fit a quota that holds one estimate; the first model judgment then spends."""
    key = cluster.keys["rules"]
    url = f"http://127.0.0.1:{cluster.apis[0].port}"
    q = "Natalia sold 48 clips in April and half as many in May. How many clips in all?"

    def hybrid(i: int, response: str) -> httpx.Response:
        body = {"question": q, "response": response, "reference": "72", "cache": False}
        return httpx.post(url + "/v1/judge/outcome", json=body, headers=auth(key), timeout=300)

    for i in range(20):
        r = hybrid(i, f"Attempt {i}: 48 + 24 = 72. The answer is 72.")
        assert r.status_code == 200, r.text
        assert (r.json()["decided_by"], r.json()["usage"]["total_tokens"]) == ("rule", 0)
    vague = hybrid(20, "She sold some clips in April and more in May.")
    assert vague.status_code == 200, vague.text
    assert vague.json()["decided_by"] == "model"
    assert vague.json()["usage"]["total_tokens"] > 0
    # the model's judgment spent more than what is left for a second one
    again = hybrid(21, "She sold clips twice, in April and in May.")
    assert again.status_code == 429, again.text
    assert again.json()["error"]["type"] == "quota_exhausted"


def test_token_metrics_equal_usage(cluster: Cluster) -> None:
    port = cluster.apis[0].port
    key = cluster.keys["beta"]
    before = {k: metric_kind(port, key, k) for k in ("prompt", "generated", "cached")}
    responses = fire(cluster.url, cluster.keys["beta"], 10, offset=3000)
    assert all(r.status_code == 200 for r in responses)
    for kind, field_name in (
        ("prompt", "prompt_tokens"),
        ("generated", "generated_tokens"),
        ("cached", "cached_tokens"),
    ):
        spent = sum(r.json()["usage"][field_name] for r in responses)
        assert metric_kind(port, key, kind) - before[kind] == spent, kind


def test_tenant_metric_labels_never_cross(cluster: Cluster) -> None:
    """Two keys, by trying: each tenant's tokens land under its own label and nowhere else."""
    port = cluster.apis[0].port
    alpha, beta = cluster.keys["alpha"], cluster.keys["beta"]
    for mine, theirs, name, other, offset in (
        (alpha, beta, "alpha", "beta", 5000),
        (beta, alpha, "beta", "alpha", 5100),
    ):
        before = budget_by_tenant(port, theirs)
        responses = fire(cluster.url, mine, 4, offset=offset)
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        after = budget_by_tenant(port, theirs)  # read with the other tenant's key
        spent = sum(r.json()["usage"]["total_tokens"] for r in responses)
        assert spent > 0
        assert after[(name, "spent")] - before.get((name, "spent"), 0.0) == spent
        assert after[(name, "granted")] > before.get((name, "granted"), 0.0)
        untouched = {k: v for k, v in after.items() if k[0] == other}
        assert untouched == {k: v for k, v in before.items() if k[0] == other}
        assert not {k[0] for k in after} - set(cluster.keys), after


def budget_by_tenant(port: int, key: str) -> dict[tuple[str, str], float]:
    """``verifier_budget_tokens_total`` as {(tenant, result): value}."""
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=auth(key), timeout=10)
    assert r.status_code == 200, r.text
    return {
        (s.labels["tenant"], s.labels["result"]): s.value
        for family in text_string_to_metric_families(r.text)
        if family.name == "verifier_budget_tokens"
        for s in family.samples
        if s.name == "verifier_budget_tokens_total"
    }


def metric_kind(port: int, key: str, kind: str) -> float:
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=auth(key), timeout=10)
    assert r.status_code == 200, r.text
    return sample_sum(r.text, "verifier_eval_tokens_total", endpoint="/v1/judge/outcome", kind=kind)


# --- failures ----------------------------------------------------------------------------------


def test_kill_9_mid_batch_loses_nothing(cluster: Cluster) -> None:
    key = cluster.keys["alpha"]
    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(judge, cluster.url, key, 5000 + i) for i in range(KILL_JOBS)]
        while sum(f.done() for f in futures) < 40:
            time.sleep(0.05)
        victim = busy_worker(cluster)
        engine = children_of(victim.popen.pid)
        victim.signal(signal.SIGKILL)
        survivor = next(w for w in cluster.live_workers() if w is not victim)
        responses = [f.result() for f in futures]
    # The killed worker's engine core does not linger as an orphan holding its memory.
    assert engine
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in engine) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in engine if pid_alive(p)], "orphaned engine processes"
    replacement = cluster.start_worker()
    assert [r.status_code for r in responses] == [200] * KILL_JOBS
    ids = [r.headers["X-Job-Id"] for r in responses]
    assert len(set(ids)) == KILL_JOBS
    # Each answer is a real judgment: scored, or (a job the killed worker had scored but not
    # answered) found in the shared judgment cache.
    for i, r in enumerate(responses):
        usage = r.json()["usage"]
        assert usage["prompt_tokens"] > 0 or usage["cached_judgments"] == 1, (i, usage)
    assert metric(survivor.port, "verifier_jobs_redelivered_total") >= 1
    assert metric(survivor.port, "verifier_batch_size_sum") > metric(
        survivor.port, "verifier_batch_size_count"
    )
    wait_worker(replacement)


def test_stopped_worker_jobs_answered_exactly_once(cluster: Cluster) -> None:
    workers = cluster.live_workers()
    before_dup = {w.port: metric(w.port, "verifier_jobs_duplicate_results_total") for w in workers}
    before_red = {w.port: metric(w.port, "verifier_jobs_redelivered_total") for w in workers}
    key = cluster.keys["alpha"]
    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(judge, cluster.url, key, 7000 + i) for i in range(64)]
        frozen, held = freeze_busy_worker(cluster)
        assert held > 0  # the precondition: the stopped worker holds jobs the other must take
        other = next(w for w in workers if w is not frozen)
        # Resume only once the other worker took every job the stopped one holds and answered
        # every caller: a busy thief reclaims only as it has room, and one that held a stolen
        # job unstarted dropped it when the resumed worker answered it first, so it ran once.
        try:
            left = wait_taken(cluster, frozen, STOP_MAX_S)
            assert left == 0, f"the other worker left {left} of {held} jobs in {STOP_MAX_S} s"
            _, waiting = wait(futures, timeout=STOP_MAX_S)
            assert not waiting, f"{len(waiting)} callers unanswered {STOP_MAX_S} s after the take"
        finally:
            frozen.signal(signal.SIGCONT)
        responses = [f.result() for f in futures]
    assert [r.status_code for r in responses] == [200] * 64
    assert len({r.headers["X-Job-Id"] for r in responses}) == 64
    assert metric(other.port, "verifier_jobs_redelivered_total") > before_red[other.port]

    # The jobs the stopped worker was running finish once it resumes, after the other worker
    # answered them: that second write is dropped and counted.
    def duplicates() -> float:
        return (
            metric(frozen.port, "verifier_jobs_duplicate_results_total") - before_dup[frozen.port]
        )

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and duplicates() < 1:
        time.sleep(0.5)
    assert duplicates() >= 1


def test_poison_job_is_dead_lettered(cluster: Cluster) -> None:
    import asyncio

    from service.config import QueueSettings, RedisSettings
    from service.errors import JobFailed
    from service.queue.base import Job, new_job_id
    from service.queue.redis_streams import RedisQueue

    settings = QueueSettings(claim_idle_ms=CLAIM_IDLE_MS, max_deliveries=MAX_DELIVERIES)
    redis_settings = RedisSettings(prefix=cluster.env["VERIFIER_REDIS__PREFIX"])
    url = cluster.env["VERIFIER_REDIS_URL"]

    async def submit() -> None:
        queue = RedisQueue(url, settings, redis_settings, "test-submitter")
        try:
            job = Job(id=new_job_id(), kind=POISON_KIND, payload={}, deadline=time.time() + 600)
            outcome = await queue.submit(job)
            with pytest.raises(JobFailed):
                outcome.raise_for_error()
        finally:
            await queue.close()

    done = asyncio.Event()

    async def keep_two_workers_alive() -> None:
        # Each new worker may reclaim the poison job and die before it even logs "ready". Two,
        # booting side by side, are what the next test needs.
        while not done.is_set():
            while len(cluster.live_workers()) < 2:
                cluster.start_worker()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1.0)

    async def main() -> None:
        watcher = asyncio.ensure_future(keep_two_workers_alive())
        try:
            await asyncio.wait_for(submit(), 600)
        finally:
            done.set()
            await asyncio.wait_for(watcher, 10)

    asyncio.run(main())
    dead = subprocess.run(
        ["redis-cli", "-p", str(cluster.redis_port), "XLEN", redis_settings.prefix + "dead"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert int(dead) == 1


def two_ready_workers(cluster: Cluster) -> None:
    while len(cluster.live_workers()) < 2:
        cluster.start_worker()
    for w in cluster.live_workers():
        wait_worker(w)  # the poison test's replacements may still be booting


def test_redis_restart_under_traffic(cluster: Cluster) -> None:
    two_ready_workers(cluster)
    key = cluster.keys["alpha"]
    results: list[tuple[int, float, float]] = []  # (status, started, ended)
    stop = threading.Event()

    def client(n: int) -> None:
        i = 0
        while not stop.is_set():
            started = time.monotonic()
            status = judge(cluster.url, key, 20_000 + 1000 * n + i).status_code
            results.append((status, started, time.monotonic()))
            i += 1

    with ThreadPoolExecutor(16) as pool:
        clients = [pool.submit(client, n) for n in range(16)]
        warm = time.monotonic() + 120
        while sum(r[0] == 200 for r in results) < 16:
            if time.monotonic() > warm:
                stop.set()
                raise AssertionError(f"no traffic before the kill: {results[:5]}")
            time.sleep(0.1)
        killed = time.monotonic()
        cluster.stop_redis()
        time.sleep(3)  # traffic keeps coming during the outage
        stop.set()
        for c in clients:
            c.result(timeout=60)
    cluster.start_redis()
    # Nothing is persisted: keys are gone with the restart, so issue them again (before any
    # assertion, so that a failure here does not fail the tests after it).
    cluster.keys = {t: create_key(cluster, t) for t in ("alpha", "beta")}
    statuses = {r[0] for r in results}
    assert statuses <= {200, 503}, statuses
    outage = [r for r in results if r[2] > killed]
    assert any(r[0] == 503 for r in outage)
    # Requests in flight at the kill and those sent during the outage fail fast.
    assert max(end - max(start, killed) for status, start, end in outage if status == 503) < 5
    # Every live worker takes jobs again (a worker that silently stopped pulling would
    # keep its batch counter still).
    workers = cluster.live_workers()
    before = [metric(w.port, "verifier_batch_size_count") for w in workers]
    deadline = time.monotonic() + 120
    offset = 30_000
    while True:
        responses = fire(cluster.url, cluster.keys["alpha"], 64, offset=offset)
        offset += 64
        assert [r.status_code for r in responses] == [200] * 64, responses[0].text
        after = [metric(w.port, "verifier_batch_size_count") for w in workers]
        if all(a > b for a, b in zip(after, before, strict=True)):
            break
        assert time.monotonic() < deadline, f"idle workers after the restart: {before} -> {after}"
    # Their liveness heartbeat is fresh (the gauge an alert would watch).
    for w in workers:
        assert time.time() - metric(w.port, "verifier_worker_progress_timestamp_seconds") < 30


def test_sigterm_drains_under_load(cluster: Cluster) -> None:
    # Another worker must be there to take the jobs the draining one no longer pulls.
    two_ready_workers(cluster)
    target = cluster.live_workers()[0]
    key = cluster.keys["alpha"]
    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(judge, cluster.url, key, 9000 + i) for i in range(64)]
        while sum(f.done() for f in futures) < 8:
            time.sleep(0.05)
        target.signal(signal.SIGTERM)
        # Draining: not ready for new work (or already gone), within seconds of the signal.
        deadline = time.monotonic() + 10
        while probe(f"http://127.0.0.1:{target.port}/ready") == 200:
            assert time.monotonic() < deadline, "/ready still 200 10 s after SIGTERM"
            time.sleep(0.1)
        responses = [f.result() for f in futures]
    assert [r.status_code for r in responses] == [200] * 64
    assert target.popen.wait(timeout=120) == 0, target.server.log_tail()


def test_a_worker_notices_its_dead_engine(cluster: Cluster) -> None:
    # Last: it leaves the cluster without the worker it kills. The health loop (every 2 s by
    # default) notices the killed engine core: the job in flight is answered 503 and the worker
    # exits 1, so its supervisor restarts it.
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post_long, cluster.url, auth(cluster.keys["alpha"]))
        worker = busy_worker(cluster, timeout=120)
        wait_inflight(worker.port, pending)
        os.kill(engine_core(worker.popen.pid), signal.SIGKILL)
        killed = time.monotonic()
        code = exit_code(worker, 60)
        exited = time.monotonic() - killed
        answer = pending.result(timeout=60)
    assert code == 1, worker.log.read_text()[-3000:]
    assert "engine dead" in worker.log.read_text()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["type"] == "engine_unavailable"
    print(f"redis worker: exited 1 {exited:.1f} s after the kill")  # noqa: T201
