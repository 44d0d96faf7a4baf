"""The queue's own round trip, without a model: local asyncio queue vs Redis Streams.

A worker with a handler that returns at once; one client submits jobs one after another and
times submit -> result. What is left is the queue: the batch window (queue.batch_wait_ms, 5 ms
by default, the same for both) plus, for Redis, its round trips.

    verifier bench queue-overhead [--redis redis://127.0.0.1:6379/15] [--jobs 300]
    verifier bench queue-overhead --smoke    # 5 jobs per queue
"""

from __future__ import annotations

import asyncio
import time
import uuid

from loadtests import bench
from service.config import QueueSettings, RedisSettings
from service.queue.base import Job, JobQueue, JobResult, new_job_id
from service.queue.local import LocalQueue
from service.queue.redis_streams import RedisQueue
from service.queue.worker import Worker
from service.stores.connection import connect

NAME = "queue_overhead"
SMOKE_JOBS = 5


async def instant(job: Job) -> JobResult:
    return JobResult.success({"id": job.id})


async def measure(queue: JobQueue, settings: QueueSettings, jobs: int) -> dict[str, float]:
    worker = Worker(queue, instant, settings)
    task = asyncio.create_task(worker.run())
    latencies = []
    for _ in range(jobs):
        start = time.perf_counter()
        job = Job(id=new_job_id(), kind="outcome", payload={}, deadline=time.time() + 30)
        (await queue.submit(job)).raise_for_error()
        latencies.append(1000 * (time.perf_counter() - start))
    worker.stop()
    await task
    latencies.sort()
    return {
        "p50_ms": bench.median(latencies),
        "p99_ms": latencies[int(0.99 * (len(latencies) - 1))],
    }


async def main() -> None:
    ap = bench.parser(NAME, __doc__, smoke={"jobs": SMOKE_JOBS})
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    ap.add_argument("--jobs", type=int, default=300)
    args = ap.parse()
    jobs = args.jobs
    settings = QueueSettings()
    redis = RedisSettings(prefix=f"bench{uuid.uuid4().hex[:8]}:")
    rec = bench.record(
        NAME,
        args,
        config={"jobs": jobs, "redis": args.redis, "batch_wait_ms": settings.batch_wait_ms},
    )
    local = await measure(LocalQueue(settings), settings, jobs)
    redis_queue = RedisQueue(args.redis, settings, redis, "bench-worker")
    try:
        remote = await measure(redis_queue, settings, jobs)
    finally:
        await redis_queue.close()
        client = connect(args.redis)
        async for key in client.scan_iter(match=redis.prefix + "*"):
            await client.delete(key)
        await client.aclose()
    added = remote["p50_ms"] - local["p50_ms"]
    print(f"{'queue':<8}{'p50 ms':>9}{'p99 ms':>9}")
    print(f"{'local':<8}{local['p50_ms']:>9.2f}{local['p99_ms']:>9.2f}")
    print(f"{'redis':<8}{remote['p50_ms']:>9.2f}{remote['p99_ms']:>9.2f}")
    print(f"Redis adds {added:+.2f} ms p50 (target < 2 ms)")
    rec.results = {"local": local, "redis": remote, "redis_adds_p50_ms": added}
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
