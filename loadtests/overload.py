"""Overload: measure capacity, then offer twice that rate for 60 s, open loop.

Phase 1 (closed loop): ``--concurrency`` clients send direct judgments back to back for
``--measure-s``; capacity = answers per second. Phase 2 (open loop): one request every
1/(factor x capacity) s for ``--duration-s``, each sent at its scheduled time whatever the
earlier ones are doing; latency is counted from the scheduled send, so a client that falls
behind cannot hide queueing. Judgments are distinct and skip the judgment cache.

What must hold (exit 1 otherwise): no 5xx, every refusal a 429 with Retry-After, and the p99
of admitted requests within the service's deadline.

    verifier bench overload    # a service started here
    VERIFIER_API_KEY=vk_... verifier bench overload --url http://127.0.0.1:8000
    verifier bench overload --smoke --url http://127.0.0.1:8000    # 1 s + 2 s, 2 clients
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from loadtests import bench
from loadtests.harness import service
from loadtests.workload import judgment_body
from service.config import LimitSettings

NAME = "overload"


@dataclass
class Tally:
    status: Counter[int] = field(default_factory=Counter)
    ok_latency: list[float] = field(default_factory=list)
    refused_without_retry_after: int = 0
    untyped_refusals: int = 0
    transport_errors: int = 0


async def _send(client: httpx.AsyncClient, tally: Tally, scheduled: float) -> None:
    try:
        r = await client.post("/v1/judge/outcome", json=judgment_body())
    except httpx.TransportError:
        tally.transport_errors += 1
        return
    tally.status[r.status_code] += 1
    if r.status_code == 200:
        tally.ok_latency.append(time.monotonic() - scheduled)
    elif r.status_code == 429:
        if "retry-after" not in r.headers:
            tally.refused_without_retry_after += 1
        if r.json().get("error", {}).get("type") not in ("overloaded", "quota_exhausted"):
            tally.untyped_refusals += 1


async def capacity(client: httpx.AsyncClient, concurrency: int, seconds: float) -> float:
    done = 0
    end = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal done
        while time.monotonic() < end:
            r = await client.post("/v1/judge/outcome", json=judgment_body())
            r.raise_for_status()
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done / (time.monotonic() - start)


async def open_loop(client: httpx.AsyncClient, rate: float, seconds: float) -> Tally:
    tally = Tally()
    tasks = []
    start = time.monotonic()
    n = int(rate * seconds)
    for k in range(n):
        scheduled = start + k / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_send(client, tally, scheduled)))
    await asyncio.gather(*tasks)
    return tally


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(tally: Tally, cap: float, rate: float, args: Any, deadline: float) -> dict[str, Any]:
    return {
        "capacity_per_s": round(cap, 2),
        "offered_per_s": round(rate, 2),
        "duration_s": args.duration_s,
        "sent": sum(tally.status.values()) + tally.transport_errors,
        "status": dict(sorted(tally.status.items())),
        "transport_errors": tally.transport_errors,
        "refused_without_retry_after": tally.refused_without_retry_after,
        "untyped_refusals": tally.untyped_refusals,
        "admitted_latency_s": {
            "p50": _pct(tally.ok_latency, 0.50),
            "p95": _pct(tally.ok_latency, 0.95),
            "p99": _pct(tally.ok_latency, 0.99),
            "max": round(max(tally.ok_latency), 3) if tally.ok_latency else None,
        },
        "deadline_s": deadline,
    }


async def main() -> int:
    ap = bench.parser(NAME, __doc__, smoke={"concurrency": 2, "measure_s": 1.0, "duration_s": 2.0})
    ap.add_argument("--url", help="A running service; none: start one here.")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--measure-s", type=float, default=30.0)
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--capacity", type=float, help="skip phase 1 and use this rate")
    args = ap.parse()
    key = os.environ.get("VERIFIER_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    deadline = LimitSettings().request_timeout_s
    limits = httpx.Limits(max_connections=10_000, max_keepalive_connections=200)
    config = {k: getattr(args, k) for k in ("url", "concurrency", "measure_s", "factor")}
    rec = bench.record(NAME, args, config={**config, "capacity_given": args.capacity})
    with service(args.url, args.out / f"{NAME}_service.log") as (url, _):
        async with httpx.AsyncClient(
            base_url=url, headers=headers, timeout=deadline + 60, limits=limits
        ) as client:
            cap = args.capacity or await capacity(client, args.concurrency, args.measure_s)
            rate = args.factor * cap
            tally = await open_loop(client, rate, args.duration_s)
    report = summary(tally, cap, rate, args, deadline)
    print(json.dumps(report, indent=2))
    p99 = report["admitted_latency_s"]["p99"]
    ok = (
        all(s < 500 for s in tally.status)
        and tally.transport_errors == 0
        and tally.refused_without_retry_after == 0
        and tally.untyped_refusals == 0
        and p99 is not None
        and p99 <= deadline
    )
    rec.results = {**report, "passed": ok}
    bench.write(rec, args)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
