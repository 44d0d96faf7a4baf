"""Local queue vs Redis Streams queue: latency, throughput and batch sizes, in one run.

The same direct-judgment workload (gsm8k questions x 4 solutions) goes through `verifier serve`
twice: with the in-process asyncio queue, then with VERIFIER_REDIS_URL set (API and worker in
one process, talking through Redis). Two phases per backend: one client (the queue's own
latency shows) and 32 concurrent clients (batching shows).

    verifier bench queue-latency [--redis redis://127.0.0.1:6379/15] [--requests 256]
    verifier bench queue-latency --smoke    # 4 requests per phase, both backends
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import httpx

from loadtests import bench
from loadtests.harness import ServerProcess, free_port, verifier
from loadtests.metrics_text import sample_sum, samples
from loadtests.workload import Pair, load_pairs
from service.config import Settings
from service.stores.connection import connect

NAME = "queue_latency"


async def phase(url: str, pairs: list[Pair], conc: int) -> dict[str, float]:
    latencies: list[float] = []
    queue: asyncio.Queue[Pair] = asyncio.Queue()
    for p in pairs:
        queue.put_nowait(p)
    limits = httpx.Limits(max_connections=conc * 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def worker() -> None:
            while not queue.empty():
                q, a = queue.get_nowait()
                t = time.perf_counter()
                r = await client.post(
                    "/v1/judge/outcome", json={"question": q, "response": a, "cache": False}
                )
                r.raise_for_status()
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        wall = time.perf_counter() - start
    latencies.sort()
    return {
        "p50_ms": 1000 * bench.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "rate": len(latencies) / wall,
    }


def batch_histogram(text: str) -> dict[str, float]:
    """The batch-size histogram: its buckets by ``le``, and its ``_sum`` and ``_count``."""
    out = {s.labels["le"]: s.value for s in samples(text, "verifier_batch_size_bucket")}
    for name in ("verifier_batch_size_sum", "verifier_batch_size_count"):
        out[name] = sample_sum(text, name)
    return out


async def drop(redis: str, prefix: str) -> None:
    """Delete the run's keys: its jobs stream never expires."""
    client = connect(redis)
    try:
        async for key in client.scan_iter(match=prefix + "*"):
            await client.delete(key)
    finally:
        await client.aclose()


async def run_backend(
    name: str, redis: str | None, args: Any, single: list[Pair], load: list[Pair]
) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    env.pop("VERIFIER_REDIS_URL", None)
    prefix = f"bench{uuid.uuid4().hex[:6]}:"
    if redis:
        env["VERIFIER_REDIS_URL"] = redis
        env["VERIFIER_REDIS__PREFIX"] = prefix
    url = f"http://127.0.0.1:{port}"
    log = args.out / f"queue_{name}.log"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        await phase(url, load[:32], 32)  # warm-up
        one = await phase(url, single, 1)
        many = await phase(url, load, args.concurrency)
        async with httpx.AsyncClient() as c:
            hist = batch_histogram((await c.get(url + "/metrics")).text)
    if redis:
        await drop(redis, prefix)
    return {"single": one, "concurrent": many, "batch_size": hist}


async def main() -> None:
    ap = bench.parser(NAME, __doc__, smoke={"requests": 4, "single": 4, "concurrency": 4})
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--single", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse()
    settings = Settings()
    load = load_pairs(settings, args.requests // 4)
    single = load_pairs(settings, args.single // 4, offset=500)
    rec = bench.record(
        NAME,
        args,
        config={
            "requests": len(load),
            "single": len(single),
            "concurrency": args.concurrency,
            "redis": args.redis,
        },
    )
    res = {
        "local": await run_backend("local", None, args, single, load),
        "redis": await run_backend("redis", args.redis, args, single, load),
    }
    print(f"\n{'backend':<8}{'clients':>8}{'p50 ms':>9}{'p99 ms':>9}{'judg/s':>9}")
    for name, r in res.items():
        for ph, conc in (("single", 1), ("concurrent", args.concurrency)):
            m = r[ph]
            print(f"{name:<8}{conc:>8}{m['p50_ms']:>9.1f}{m['p99_ms']:>9.1f}{m['rate']:>9.2f}")
    for ph in ("single", "concurrent"):
        d = res["redis"][ph]["p50_ms"] - res["local"][ph]["p50_ms"]
        ratio = res["redis"][ph]["rate"] / res["local"][ph]["rate"]
        print(
            f"{ph}: Redis adds {d:+.2f} ms p50 (target < 2 ms); throughput redis/local = {ratio:.3f}"
        )
    for name, r in res.items():
        h = r["batch_size"]
        mean = h.get("verifier_batch_size_sum", 0) / max(1.0, h.get("verifier_batch_size_count", 0))
        buckets = {k: v for k, v in h.items() if not k.startswith("verifier")}
        print(f"{name} batch sizes (cumulative le buckets): {buckets}  mean {mean:.2f}")
    rec.results = res
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
