"""Memory soak: sequential judgments, RSS of the service's processes sampled as they go.

Sends ``--requests`` distinct direct judgments one after another (judgment cache skipped) and
reads the resident set size of each given process and of its children (the engine core) from
/proc every ``--every`` requests. Passes (exit 0) when every process ends within ``--tolerance``
of its level after the first ``--baseline`` requests.

    VERIFIER_API_KEY=vk_... python loadtests/memory_soak.py --url http://127.0.0.1:8000 \
        --pid <API pid> [--pid <worker pid>]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import httpx

from service.engine import reaper


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--pid", type=int, action="append", required=True)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=200)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse_args()
    key = os.environ.get("VERIFIER_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    procs = {name: p for pid in args.pid for name, p in tree(pid).items()}
    samples: dict[int, dict[str, float]] = {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=300) as client:
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
    base, last = samples[args.baseline], samples[args.requests]
    growth = {name: round(last[name] / base[name] - 1, 4) for name in procs}
    print(json.dumps({"rss_mib": samples, "growth_after_baseline": growth}, indent=2))  # noqa: T201
    return 0 if all(abs(g) <= args.tolerance for g in growth.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
