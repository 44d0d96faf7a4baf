"""The cluster tests' process set: API and worker processes, a private Redis, and probes.

Every process is a `loadtests.harness.ServerProcess`: its own process group, ready when its
/ready answers (a worker's on its metrics port), stopped with a check that nothing of it is
left.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from loadtests.harness import (
    ROOT,
    RedisProcess,
    ServerProcess,
    free_port,
    http_ok,
    stop_all,
    verifier,
)
from loadtests.metrics_text import sample_sum
from service.engine import reaper

_METRICS_PORT = re.compile(r"metrics on port (\d+)")


@dataclass
class Proc:
    """A verifier process of the cluster; ``known_port`` is its HTTP port, None for a worker
    that picks its metrics port itself (then read from its log)."""

    server: ServerProcess
    known_port: int | None

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        return self.server.popen

    @property
    def log(self) -> Path:
        return self.server.log

    def logged_port(self) -> int | None:
        if self.known_port is None:
            found = _METRICS_PORT.search(self.server.log_tail(chars=1_000_000))
            self.known_port = int(found.group(1)) if found else None
        return self.known_port

    @property
    def port(self) -> int:
        """The HTTP port; a worker's metrics port is the one it logged (it picks a free one)."""
        deadline = time.monotonic() + 60
        while (port := self.logged_port()) is None:
            if time.monotonic() > deadline or not self.alive():
                raise RuntimeError(f"no metrics port in the log:\n{self.server.log_tail()}")
            time.sleep(0.2)
        return port

    def ready(self) -> bool:
        """Whether /ready answers 200 (a worker's on its metrics port, once it logged it)."""
        port = self.logged_port()
        return port is not None and http_ok(f"http://127.0.0.1:{port}/ready")

    def alive(self) -> bool:
        return self.server.alive()

    def signal(self, sig: int) -> None:
        self.server.signal(sig)

    def stop(self) -> None:
        self.server.stop()


@dataclass
class Cluster:
    tmp: Path
    env: dict[str, str]
    redis_port: int
    redis: RedisProcess | None = None
    apis: list[Proc] = field(default_factory=list)
    small_api: Proc | None = None
    workers: list[Proc] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    # (/health, /ready) of each first worker once its /health answered, before its engine was up
    probes_before_ready: list[tuple[int | None, int | None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.apis[0].port}"

    def start_redis(self) -> None:
        """The private Redis (no persistence), again on the same port after stop_redis."""
        if self.redis is None:
            self.redis = RedisProcess(self.redis_port, data_dir=self.tmp / "redis")
        self.redis.start()

    def stop_redis(self) -> None:
        """SIGKILL the private Redis: what the processes see when Redis dies."""
        assert self.redis is not None
        self.redis.kill()

    def spawn(self, args: list[str], name: str, port: int | None, extra: dict[str, str]) -> Proc:
        server = ServerProcess(
            verifier(*args),
            env={**self.env, **extra},
            log=self.tmp / f"{name}.log",
            cwd=ROOT,
            dump_stacks_on_timeout=True,
        )
        return Proc(server.start(), port)

    def start_worker(self) -> Proc:
        # Default settings: each worker on this host takes a free metrics port by itself.
        proc = self.spawn(["worker"], f"worker{len(self.workers)}", None, {})
        self.workers.append(proc)
        return proc

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def close(self) -> None:
        """Stop every process side by side, then Redis; the first failed check is raised after
        all stop."""
        procs = [*self.workers, *self.apis, *([self.small_api] if self.small_api else [])]
        try:
            stop_all([p.server for p in procs])
        finally:
            if self.redis is not None:
                self.redis.stop()


def probe(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


def health_then_ready(worker: Proc) -> tuple[int | None, int | None]:
    """Once a starting worker's /health answers 200: its /health and /ready statuses."""
    deadline = time.monotonic() + 60
    while (port := worker.logged_port()) is None or probe(f"http://127.0.0.1:{port}/health") != 200:
        assert time.monotonic() < deadline, f"no /health 200:\n{worker.server.log_tail()}"
        worker.server.check_alive()
        time.sleep(0.1)
    return 200, probe(f"http://127.0.0.1:{port}/ready")


def wait_worker(proc: Proc, timeout: float = 600) -> None:
    """Until the worker's probe port answers /ready (its engine scored the probe judgment)."""
    proc.server.wait_ready(probe=proc.ready, timeout_s=timeout)


def wait_api(proc: Proc, timeout: float = 120) -> None:
    proc.server.wait_ready(probe=proc.ready, timeout_s=timeout)


def create_key(cluster: Cluster, tenant: str, quota: int | None = None) -> str:
    args = verifier("keys", "create", "--tenant", tenant)
    if quota is not None:
        args += ["--quota", str(quota), "--window", "3600"]
    out = subprocess.run(
        args, cwd=ROOT, env=cluster.env, capture_output=True, text=True, check=True
    )
    key = out.stdout.strip()
    assert key.startswith("vk_")
    return key


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def judge(url: str, key: str, i: int, **extra: Any) -> httpx.Response:
    body = {"question": f"Item {i}: what is {i} + 1?", "response": f"{i} + 1 = {i + 1}."}
    return httpx.post(
        url + "/v1/judge/outcome", json=body, headers={**auth(key), **extra}, timeout=300
    )


def metric(port: int, name: str) -> float:
    """The sum of the samples named ``name`` on a process's /metrics page (all label sets)."""
    return sample_sum(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text, name)


def pending_by_pid(cluster: Cluster) -> dict[int, int]:
    """Pending (delivered, unacked) entries per worker pid, read with XPENDING."""
    stream = cluster.env["VERIFIER_REDIS__PREFIX"] + "jobs"
    out = subprocess.run(
        ["redis-cli", "-p", str(cluster.redis_port), "--json", "XPENDING", stream, "workers"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    summary = json.loads(out) if out.startswith("[") else []
    consumers = summary[3] if len(summary) > 3 and summary[3] else []
    return {int(str(name).rsplit("-", 1)[-1]): int(count) for name, count in consumers}


def busy_worker(cluster: Cluster, timeout: float = 60) -> Proc:
    """A live worker that holds pending jobs right now (found through XPENDING)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = pending_by_pid(cluster)
        for w in cluster.live_workers():
            if pending.get(w.popen.pid, 0) > 0:
                return w
        time.sleep(0.02)
    raise RuntimeError("no worker held pending jobs")


def freeze_busy_worker(cluster: Cluster, timeout: float = 60) -> tuple[Proc, int]:
    """SIGSTOP a worker that has jobs running and still holds pending jobs *while stopped*
    (checked after the stop, since on a slow CPU a worker found busy may finish its jobs
    before the signal lands). Running, not only held: a job it pulled but had not started
    is skipped on resume once another worker took it, so it never runs twice."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker = busy_worker(cluster, timeout)
        if metric(worker.port, "verifier_worker_inflight_jobs") < 1:
            time.sleep(0.01)
            continue
        worker.signal(signal.SIGSTOP)
        held = pending_by_pid(cluster).get(worker.popen.pid, 0)
        if held > 0:
            return worker, held
        worker.signal(signal.SIGCONT)
        time.sleep(0.01)
    raise RuntimeError("no worker held pending jobs once stopped")


def wait_taken(cluster: Cluster, worker: Proc, timeout: float) -> int:
    """Wait (bounded) until no entry is pending for ``worker`` (another worker reclaimed or
    finished every job it held); returns how many are still its own."""
    deadline = time.monotonic() + timeout
    while (left := pending_by_pid(cluster).get(worker.popen.pid, 0)) > 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return left


def children_of(pid: int) -> list[int]:
    """The worker's children but its reaper (the engine core, vLLM's resource tracker)."""
    return [
        child
        for child in reaper.children(pid)
        if "reaper" not in Path(f"/proc/{child}/cmdline").read_text(errors="replace")
    ]


def pid_alive(pid: int) -> bool:
    try:  # a zombie is dead, only not yet collected
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def start_apis_and_workers(
    c: Cluster, small_api_env: dict[str, str], keys: dict[str, int | None]
) -> None:
    """Redis, two API processes, a third (``small_api``) with ``small_api_env``, and two workers
    started at once with default settings; then one key per tenant of ``keys`` (its quota)."""
    c.start_redis()
    for i in range(2):
        p = free_port()
        c.apis.append(c.spawn(["serve", "--no-worker", "--port", str(p)], f"api{i}", p, {}))
    p = free_port()
    c.small_api = c.spawn(["serve", "--no-worker", "--port", str(p)], "api_small", p, small_api_env)
    workers = [c.start_worker(), c.start_worker()]
    # The probes Kubernetes and Docker use on a worker's metrics port: /health answers while
    # the engine starts, /ready only once it scored its probe judgment.
    c.probes_before_ready = [health_then_ready(w) for w in workers]
    for api in [*c.apis, c.small_api]:
        wait_api(api)
    for w in workers:
        wait_worker(w)
    # Two workers started at once with default settings took two metrics ports.
    assert workers[0].port != workers[1].port
    c.keys = {tenant: create_key(c, tenant, quota) for tenant, quota in keys.items()}


def fire(
    url: str, key: str, n: int, concurrency: int = 32, offset: int = 0
) -> list[httpx.Response]:
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda i: judge(url, key, offset + i), range(n)))


def fit_probability_calibration(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """A temperature fit on 10 small labelled sums (every other one wrong)."""
    examples = [
        {
            "question": f"What is {i} + {i}?",
            "response": f"{i} + {i} = {2 * i + i % 2}.",
            "label": 1 - i % 2,
        }
        for i in range(10)
    ]
    fit = httpx.post(
        url + "/v1/calibrations",
        json={"target": "outcome", "examples": examples},
        headers=headers,
        timeout=300,
    )
    assert fit.status_code == 200, fit.text
    cal: dict[str, Any] = fit.json()
    return cal


# How long an in-process server whose engine died answers /ready 503 before it exits (the
# session server's setting). At the default 3 s, one CI run on an AVX2-only CPU never saw the
# 503: the first probe after the kill came after the exit, while the killed engine's model
# worker still ran its forward pass on both cores.
DEAD_EXIT_S = 15.0

# The job must still run when the engine is killed, on any CPU and dtype. A reasoning judgment
# is not long enough: the model may write the verdict marker after a few tokens (21 tokens,
# under a second, on one machine). A rerank of 8 long documents in direct mode is all prefill:
# no early stop, about 15 s here, and never from the judgment cache.
LONG_URL = "/v1/rerank"
LONG = {
    "query": "Which list is sorted?",
    "documents": [
        " ".join(str(1000 + (i * 7919 + j * 104729) % 9000) for j in range(500)) for i in range(8)
    ],
    "method": "outcome",
    "cache": False,
}


def post_long(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """The long job (``LONG``) sent to the service at ``url``."""
    return httpx.post(url + LONG_URL, json=LONG, headers=headers or {}, timeout=300)


def engine_core(pid: int) -> int:
    for child in reaper.children(pid):
        if "EngineCore" in Path(f"/proc/{child}/cmdline").read_text(errors="replace"):
            return child
    raise AssertionError(f"no EngineCore child of {pid}")


def wait_inflight(port: int, pending: Future[httpx.Response], timeout: float = 120) -> None:
    """The precondition of a kill: the long job is running in the engine, not answered."""
    deadline = time.monotonic() + timeout
    while metric(port, "verifier_worker_inflight_jobs") < 1:
        assert not pending.done(), f"the long job ended before the kill: {pending.result().text}"
        assert time.monotonic() < deadline, "the long job never started"
        time.sleep(0.1)
    assert not pending.done(), "the long job ended before the kill"


def exit_code(proc: Proc | ServerProcess, timeout: float) -> int | None:
    try:
        return proc.popen.wait(timeout=timeout)
    except Exception:
        return None
