"""Memory soak: sequential judgments, RSS of the service's processes sampled as they go.

Sends ``--requests`` distinct direct judgments one after another (judgment cache skipped) and
reads the resident set size of each given process and of its children (the engine core) from
/proc every ``--every`` requests. Passes (exit 0) when every process ends within ``--tolerance``
of its level after the first ``--baseline`` requests (a smoke run records the verdict, but its
few requests say nothing of a leak, so it exits 0 either way).

    verifier bench memory-soak    # a service started here
    VERIFIER_API_KEY=vk_... verifier bench memory-soak --url http://127.0.0.1:8000 \
        [--pid <API pid>] [--pid <worker pid>]
    verifier bench memory-soak --smoke --url http://127.0.0.1:8000    # 4 requests
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from loadtests import bench
from loadtests.harness import service
from service.engine import reaper

NAME = "memory_soak"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree(pid: int) -> dict[str, int]:
    """The process and its descendants (engine core, model worker), by a short name."""
    procs = {f"{pid}": pid}
    pending = [pid]
    while pending:
        for child in reaper.children(pending.pop()):
            cmd = Path(f"/proc/{child}/cmdline").read_text(errors="replace").replace("\0", " ")
            if "reaper" in cmd or "resource_tracker" in cmd:
                continue
            procs[f"{pid}/{cmd.split()[0][:24]}"] = child
            pending.append(child)
    return procs


def listener(url: str) -> int:
    """The process on this machine that listens on ``url``'s port."""
    port = urlsplit(url).port or 80
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    raise SystemExit(f"no process of this user listens on {url}: give its --pid")


def soak(url: str, procs: dict[str, int], args: Any) -> dict[int, dict[str, float]]:
    """RSS of every process after the baseline and every ``args.every`` requests."""
    key = os.environ.get("VERIFIER_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    samples: dict[int, dict[str, float]] = {}
    with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
        for i in range(1, args.requests + 1):
            a, b = 100 + i % 900, 3 + i % 17
            body = {
                "question": f"What is {a} + {b}? (soak {i})",
                "response": f"{a} + {b} = {a + b}.",
                "cache": False,
            }
            client.post("/v1/judge/outcome", json=body).raise_for_status()
            if i % args.every == 0 or i == args.baseline:
                samples[i] = {name: round(rss_mib(p), 1) for name, p in procs.items()}
    return samples


def main() -> int:
    ap = bench.parser(NAME, __doc__, smoke={"requests": 4, "baseline": 2, "every": 2})
    ap.add_argument("--url", help="A running service; none: start one here.")
    ap.add_argument(
        "--pid",
        type=int,
        action="append",
        help="A process to watch, with its children (repeatable; default: the service's: the "
        "one started here, or the one listening on --url's port)",
    )
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=200)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse()
    with service(args.url, args.out / f"{NAME}_service.log") as (url, started):
        pids = args.pid or [started or listener(url)]
        procs = {name: p for pid in pids for name, p in tree(pid).items()}
        rec = bench.record(
            NAME,
            args,
            config={
                "requests": args.requests,
                "baseline": args.baseline,
                "every": args.every,
                "tolerance": args.tolerance,
                "url": args.url,
                "processes": list(procs),
            },
        )
        samples = soak(url, procs, args)
    base, last = samples[args.baseline], samples[args.requests]
    growth = {name: round(last[name] / base[name] - 1, 4) for name in procs}
    print(json.dumps({"rss_mib": samples, "growth_after_baseline": growth}, indent=2))
    passed = all(abs(g) <= args.tolerance for g in growth.values())
    rec.results = {"rss_mib": samples, "growth_after_baseline": growth, "passed": passed}
    bench.write(rec, args)
    return 0 if passed or args.smoke else 1


if __name__ == "__main__":
    raise SystemExit(main())
