"""Helpers of the cluster tests: real API and worker processes, a private Redis, probes.

Kept apart from tests/e2e/test_cluster.py so that module holds the tests and its fixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from service.engine import reaper
from tests.conftest import ROOT
from tests.prometheus_text import sample_sum


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    log: Path
    known_port: int | None

    @property
    def port(self) -> int:
        """The HTTP port; a worker's metrics port is the one it logged (it picks a free one)."""
        deadline = time.monotonic() + 60
        while self.known_port is None:
            found = re.search(r"metrics on port (\d+)", self.log.read_text())
            if found:
                self.known_port = int(found.group(1))
            elif time.monotonic() > deadline or not self.alive():
                raise RuntimeError(f"no metrics port in the log:\n{self.log.read_text()[-3000:]}")
            else:
                time.sleep(0.2)
        return self.known_port

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def stop(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.dump_stacks()
                self.popen.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # engine children, if any survived

    def dump_stacks(self) -> None:
        """Thread (SIGUSR1) and asyncio task (SIGUSR2) stacks into the log, for a post-mortem."""
        if self.alive():
            self.popen.send_signal(signal.SIGUSR1)
            self.popen.send_signal(signal.SIGUSR2)
            time.sleep(2)


@dataclass
class Cluster:
    tmp: Path
    env: dict[str, str]
    redis_port: int
    redis: subprocess.Popen[bytes] | None = None
    apis: list[Proc] = field(default_factory=list)
    small_api: Proc | None = None
    workers: list[Proc] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.apis[0].port}"

    def start_redis(self) -> None:
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (
                subprocess.run(
                    ["redis-cli", "-p", str(self.redis_port), "ping"],
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                == "PONG"
            ):
                return
            time.sleep(0.1)
        raise RuntimeError("private redis did not start")

    def stop_redis(self) -> None:
        assert self.redis is not None
        self.redis.kill()
        self.redis.wait()

    def spawn(self, args: list[str], name: str, port: int | None, extra: dict[str, str]) -> Proc:
        log = self.tmp / f"{name}.log"
        with log.open("w") as fh:
            popen = subprocess.Popen(
                [sys.executable, "-m", "service.cli", *args],
                cwd=ROOT,
                env={**self.env, **extra},
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Proc(popen, log, port)

    def start_worker(self) -> Proc:
        # Default settings: each worker on this host takes a free metrics port by itself.
        proc = self.spawn(["worker"], f"worker{len(self.workers)}", None, {})
        self.workers.append(proc)
        return proc

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]


def wait_worker(proc: Proc, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"worker exited:\n{proc.log.read_text()[-3000:]}")
        if "ready" in proc.log.read_text() and "worker worker-" in proc.log.read_text():
            return
        time.sleep(0.5)
    raise RuntimeError(f"worker not ready:\n{proc.log.read_text()[-3000:]}")


def wait_api(proc: Proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{proc.port}/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"api not ready:\n{proc.log.read_text()[-3000:]}")


def create_key(cluster: Cluster, tenant: str, quota: int | None = None) -> str:
    args = [sys.executable, "-m", "service.cli", "keys", "create", "--tenant", tenant]
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
    """SIGSTOP a worker that still holds pending jobs *while stopped* (checked after the stop,
    since on a slow CPU a worker found busy may finish its jobs before the signal lands)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker = busy_worker(cluster, timeout)
        worker.signal(signal.SIGSTOP)
        held = pending_by_pid(cluster).get(worker.popen.pid, 0)
        if held > 0:
            return worker, held
        worker.signal(signal.SIGCONT)
        time.sleep(0.01)
    raise RuntimeError("no worker held pending jobs once stopped")


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


def fire(
    url: str, key: str, n: int, concurrency: int = 32, offset: int = 0
) -> list[httpx.Response]:
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda i: judge(url, key, offset + i), range(n)))
