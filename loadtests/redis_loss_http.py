"""Redis loss window over HTTP: kill -9 Redis under load, count accepted requests never answered.

The whole service: a private redis-server, one ``verifier serve --no-worker`` API and one
``verifier worker`` with its engine (auth off), direct judgments sent open loop at ``--rate``
for ``--seconds`` with distinct texts (judgment cache skipped). Halfway, Redis is killed with
SIGKILL and restarted at once on the same port and directory. Both persistence modes run
against the same API and worker (a new Redis each, on the same port: the processes reconnect
as after any restart), so the engine starts once.

What each caller sees first: 200 (answered), or a typed 503 ``queue_unavailable`` (Redis went
away while the API queued the job or waited for its result; the job may still run). Each caller
sends an ``Idempotency-Key`` and retries a 503 every second with the same key until an answer or
``--request-timeout``, as the client library does. A retry answered as a replay
(``Idempotent-Replayed: true``) got the result of the job accepted before the kill; a retry
answered by a fresh run means that job was lost with Redis (or never queued), and it ran again.
``never_answered`` counts callers with no 200 by their deadline.

    verifier bench redis-loss-http [--rate 4] [--seconds 30] [--request-timeout 120] [--smoke]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from loadtests import bench
from loadtests.harness import RedisProcess, ServerProcess, free_port, verifier
from loadtests.metrics_text import has_sample, sample_sum
from loadtests.workload import judgment_body, open_loop

NAME = "redis_loss_http"
# Persistence modes: AOF with fsync every second, or none.
MODES = {"aof_everysec": True, "none": False}


async def _depth(client: httpx.AsyncClient) -> float | None:
    """The API's verifier_queue_depth (read from Redis), or None if it cannot be read."""
    with contextlib.suppress(httpx.HTTPError):
        text = (await client.get("/metrics", timeout=5)).text
        if has_sample(text, "verifier_queue_depth"):
            return sample_sum(text, "verifier_queue_depth")
    return None


async def _answers(client: httpx.AsyncClient, timeout: float = 300) -> None:
    """One judgment end to end: the API and the worker are on the new Redis."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.TransportError):
            r = await client.post("/v1/judge/outcome", json=judgment_body(), timeout=60)
            if r.status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError("the service did not answer on the new Redis; see the logs")
        await asyncio.sleep(1)


async def run_mode(
    name: str, url: str, redis_port: int, rate: float, seconds: float, data: Path, deadline_s: float
) -> dict[str, Any]:
    redis = RedisProcess(redis_port, aof=MODES[name], data_dir=data).start()
    status: Counter[str] = Counter()  # each caller's first answer
    retried: Counter[str] = (
        Counter()
    )  # first answer -> final answer, for callers not served at once
    latency: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=url, timeout=None) as client:
        await _answers(client)  # before the clock runs

        async def send(scheduled: float) -> None:
            """One caller: the first answer, then idempotent retries of a 503 (as the client
            library does) until an answer or the deadline."""
            body, headers = judgment_body(), {"Idempotency-Key": uuid.uuid4().hex}
            first: str | None = None
            while True:
                try:
                    r = await client.post("/v1/judge/outcome", json=body, headers=headers)
                    got = str(r.status_code)
                    if r.status_code != 200:
                        got += " " + str(r.json().get("error", {}).get("type"))
                except httpx.TransportError as exc:
                    got = f"transport {type(exc).__name__}"
                first = first or got
                late = time.monotonic() - scheduled > deadline_s
                if got == "200" or late or not got.startswith(("503", "transport")):
                    break
                await asyncio.sleep(1)
            status[first] += 1
            if first != "200":
                replayed = got == "200" and r.headers.get("Idempotent-Replayed") == "true"
                retried[f"{first} -> {got}{' (replayed)' if replayed else ''}"] += 1
            latency.setdefault(got, []).append(round(time.monotonic() - scheduled, 2))

        depth_at_kill: float | None = None

        async def kill_and_restart() -> None:
            nonlocal depth_at_kill
            depth_at_kill = await _depth(client)
            redis.kill()  # SIGKILL, then a new server at once on the same port and directory
            redis.start()

        sent = await open_loop(rate, seconds, send, kill_and_restart)
    redis.kill()
    return {
        "mode": name,
        "sent": sent,
        "queue_depth_at_kill": depth_at_kill,
        "first_answer": dict(sorted(status.items())),
        "after_retries": dict(sorted(retried.items())),
        "never_answered": sum(
            n for k, n in retried.items() if not k.endswith(("200", "(replayed)"))
        ),
        "max_latency_s": {k: max(v) for k, v in sorted(latency.items())},
    }


async def main() -> int:
    ap = bench.parser(
        NAME,
        __doc__,
        smoke={"rate": 2.0, "seconds": 2.0},  # both modes, a kill each: mechanics
    )
    ap.add_argument("--rate", type=float, default=4.0, help="requests per second, open loop")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--request-timeout", type=float, default=120.0, help="the service's deadline")
    ap.add_argument("--logs", type=Path, help="Process logs (default <out>/redis_loss_http_logs).")
    args = ap.parse()
    args.logs = args.logs or args.out / f"{NAME}_logs"
    args.logs.mkdir(parents=True, exist_ok=True)
    config = {"rate": args.rate, "seconds": args.seconds, "request_timeout_s": args.request_timeout}
    rec = bench.record(NAME, args, config=config)
    redis_port, api_port, worker_port = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "VERIFIER_LIMITS__REQUEST_TIMEOUT_S": str(args.request_timeout),
        "VERIFIER_AUTH__ENABLED": "false",
        "VERIFIER_LOG_LEVEL": "info",
    }
    url = f"http://127.0.0.1:{api_port}"
    api = ServerProcess(
        verifier("serve", "--no-worker", "--port", str(api_port)),
        env=env,
        log=args.logs / "api.log",
        probe=f"{url}/ready",
    )
    worker = ServerProcess(
        verifier("worker"),
        env={**env, "VERIFIER_QUEUE__WORKER_METRICS_PORT": str(worker_port)},
        log=args.logs / "worker.log",
        probe=f"http://127.0.0.1:{worker_port}/ready",
    )
    results: list[dict[str, Any]] = []
    rec.results["modes"] = results
    with tempfile.TemporaryDirectory() as tmp:
        # A first Redis only lets the processes start; each mode then gets its own.
        boot = RedisProcess(redis_port, data_dir=Path(tmp) / "boot").start()
        with api, worker:
            boot.kill()
            for name in MODES:
                data = Path(tmp) / name
                data.mkdir()
                results.append(
                    await run_mode(
                        name, url, redis_port, args.rate, args.seconds, data, args.request_timeout
                    )
                )
    print(json.dumps(results, indent=2))
    bench.write(rec, args)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
