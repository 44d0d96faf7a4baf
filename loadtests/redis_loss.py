"""Redis loss window: kill -9 Redis under load and count accepted jobs never answered.

No engine: a private redis-server, the real Redis Streams queue and worker loop, and a handler
that answers after 20 ms, so only the queue's own durability is measured. For each persistence
mode (AOF ``appendfsync everysec``; no persistence), jobs are submitted open loop at ``--rate``
for ``--seconds``; Redis is killed with SIGKILL halfway and restarted at once on the same port
and directory. A job counts as accepted once the submit script that adds it to the stream has
returned; after the run (and a settle period) each accepted job is either answered (its
submitter got the result), completed late (the submitter had already been told 503/504, but a
result exists) or lost (no result anywhere).

    python loadtests/redis_loss.py [--rate 200] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from service.config import QueueSettings, RedisSettings
from service.errors import ServiceError
from service.queue.base import Job, JobResult, new_job_id
from service.queue.redis_streams import RedisQueue
from service.queue.worker import Worker

MODES = {
    "aof_everysec": ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
    "none": ["--appendonly", "no", "--save", ""],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_redis(port: int, data: Path, args: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), *args],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(100):
        ping = subprocess.run(
            ["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True, check=False
        )
        if ping.stdout.strip() == "PONG":
            return proc
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def kill_restart(
    redis: subprocess.Popen[bytes], port: int, data: Path, args: list[str]
) -> subprocess.Popen[bytes]:
    """SIGKILL the Redis server, then start a new one at once on the same port and directory."""
    redis.kill()
    redis.wait()
    return _start_redis(port, data, args)


async def open_loop(
    rate: float,
    seconds: float,
    send: Callable[[float], Coroutine[Any, Any, None]],
    halfway: Callable[[], Awaitable[None]],
) -> int:
    """Call ``send(scheduled)`` ``rate`` times a second for ``seconds``, each at its scheduled
    time whatever the earlier ones are doing, and ``halfway()`` once in the middle; returns the
    number sent once every send has finished."""
    tasks = []
    start = time.monotonic()
    fired = False
    for k in range(int(rate * seconds)):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if not fired and time.monotonic() - start >= seconds / 2:
            await halfway()
            fired = True
        tasks.append(asyncio.create_task(send(time.monotonic())))
    await asyncio.gather(*tasks)
    return len(tasks)


async def _handler(job: Job) -> JobResult:
    await asyncio.sleep(0.02)
    return JobResult.success({"id": job.id})


async def run_mode(name: str, rate: float, seconds: float) -> dict[str, Any]:
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    settings = QueueSettings(claim_idle_ms=1000)
    names = RedisSettings(prefix=f"loss{uuid.uuid4().hex[:6]}:")
    accepted: set[str] = set()
    answered: set[str] = set()
    told: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        redis = _start_redis(port, Path(tmp), MODES[name])
        api = RedisQueue(url, settings, names, f"api-{name}")
        # Accepted = the submit script (XADD) returned; wrapped here, the queue is unchanged.
        submit_lua = api._submit_lua

        async def tracked(keys: list[str], args: list[Any]) -> Any:
            owner = await submit_lua(keys=keys, args=args)
            accepted.add(str(args[1]))
            return owner

        api._submit_lua = tracked  # type: ignore[assignment]
        wq = RedisQueue(url, settings, names, f"worker-{name}")
        worker = Worker(wq, _handler, settings)
        worker_task = asyncio.create_task(worker.run())

        async def submit() -> None:
            job = Job(id=new_job_id(), kind="outcome", payload={}, deadline=time.time() + 20)
            try:
                outcome = await api.submit(job)
            except ServiceError as exc:
                told[job.id] = exc.type
                return
            if outcome.ok:
                answered.add(job.id)

        data = Path(tmp)

        async def kill_and_restart() -> None:
            nonlocal redis
            redis = kill_restart(redis, port, data, MODES[name])

        sent = await open_loop(rate, seconds, lambda _: submit(), kill_and_restart)
        await asyncio.sleep(3)  # late completions of reclaimed jobs
        worker.stop()
        await asyncio.wait_for(worker_task, 30)
        late = 0
        for job_id in accepted - answered:
            if await api._redis.get(api.names.result("default", job_id)) is not None:
                late += 1
        await api.close()
        await wq.close()
        redis.kill()
        redis.wait()
    unanswered = accepted - answered
    return {
        "mode": name,
        "sent": sent,
        "accepted": len(accepted),
        "answered": len(answered),
        "told_error": dict(
            sorted({t: list(told.values()).count(t) for t in told.values()}.items())
        ),
        "accepted_not_answered": len(unanswered),
        "completed_late": late,
        "lost": len(unanswered) - late,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    results = [await run_mode(m, args.rate, args.seconds) for m in MODES]
    print(json.dumps(results, indent=2))  # noqa: T201


if __name__ == "__main__":
    asyncio.run(main())
