"""Redis loss window: kill -9 Redis under load and count accepted jobs never answered.

No engine: a private redis-server, the real Redis Streams queue and worker loop, and a handler
that answers after 20 ms, so only the queue's own durability is measured. For each persistence
mode (AOF ``appendfsync everysec``; no persistence), jobs are submitted open loop at ``--rate``
for ``--seconds``; Redis is killed with SIGKILL halfway and restarted at once on the same port
and directory. A job counts as accepted once the submit script that adds it to the stream has
returned; after the run (and a settle period) each accepted job is either answered (its
submitter got the result), completed late (the submitter had already been told 503/504, but a
result exists) or lost (no result anywhere).

    verifier bench redis-loss [--rate 200] [--seconds 10] [--smoke]
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from loadtests import bench
from loadtests.harness import RedisProcess
from loadtests.workload import open_loop
from service.config import QueueSettings, RedisSettings
from service.errors import ServiceError
from service.queue.base import Job, JobResult, new_job_id
from service.queue.redis_streams import RedisQueue
from service.queue.worker import Worker

NAME = "redis_loss"
# Persistence modes: AOF with fsync every second, or none.
MODES = {"aof_everysec": True, "none": False}
# After the last submit: time for reclaimed jobs to complete late (claim_idle_ms is 1 s).
SETTLE_S = 3.0


async def _handler(job: Job) -> JobResult:
    await asyncio.sleep(0.02)
    return JobResult.success({"id": job.id})


async def run_mode(name: str, rate: float, seconds: float, settle_s: float) -> dict[str, Any]:
    settings = QueueSettings(claim_idle_ms=1000)
    names = RedisSettings(prefix=f"loss{uuid.uuid4().hex[:6]}:")
    accepted: set[str] = set()
    answered: set[str] = set()
    told: dict[str, str] = {}
    with RedisProcess(aof=MODES[name]) as redis:
        api = RedisQueue(redis.url, settings, names, f"api-{name}")
        # Accepted = the submit script (XADD) returned; wrapped here, the queue is unchanged.
        submit_lua = api._submit_lua

        async def tracked(keys: list[str], args: list[Any]) -> Any:
            owner = await submit_lua(keys=keys, args=args)
            accepted.add(str(args[1]))
            return owner

        api._submit_lua = tracked  # type: ignore[assignment]
        wq = RedisQueue(redis.url, settings, names, f"worker-{name}")
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

        async def kill_and_restart() -> None:
            """SIGKILL, then a new server at once on the same port and directory."""
            redis.kill()
            redis.start()

        sent = await open_loop(rate, seconds, lambda _: submit(), kill_and_restart)
        await asyncio.sleep(settle_s)  # late completions of reclaimed jobs
        worker.stop()
        await asyncio.wait_for(worker_task, 30)
        late = 0
        for job_id in accepted - answered:
            if await api._redis.get(api.names.result("default", job_id)) is not None:
                late += 1
        await api.close()
        await wq.close()
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
    # the smoke: both modes, a kill each: the mechanics, not a loss figure
    ap = bench.parser(NAME, __doc__, smoke={"rate": 20.0, "seconds": 1.0})
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse()
    settle = 1.5 if args.smoke else SETTLE_S
    config = {"rate": args.rate, "seconds": args.seconds, "settle_s": settle}
    rec = bench.record(NAME, args, config=config)
    rec.results["modes"] = [await run_mode(m, args.rate, args.seconds, settle) for m in MODES]
    print(json.dumps(rec.results["modes"], indent=2))  # noqa: T201
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
