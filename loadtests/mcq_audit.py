"""MCQ audit throughput: items per second through /v1/mcq/audit, batched vs one item a request.

Workload: the first ``--items`` ARC-Dev items (default 100) in all four conditions with
``--reasoning-tokens`` (default 64), sent in chunks of ``--chunk`` items (8) with ``--concurrency``
requests in flight (2); then the first ``--sequential-items`` (default 16) of them one item per
request, one request at a time. Both against the same service (``--url``, or one started here),
in one run; prints items/s of each, their ratio, and tokens per item per condition.

    verifier bench mcq-audit --url http://127.0.0.1:8000
    verifier bench mcq-audit --url http://127.0.0.1:8000 --items 24 --sequential-items 8

``--smoke``: 2 items batched and 2 one at a time, 8 reasoning tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from loadtests import bench, harness
from service.config import Settings
from service.evals.audits import DEFAULT_ARC, run_choices_only

NAME = "mcq_audit"


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    data = Settings().data_dir / DEFAULT_ARC
    common = {"reasoning_tokens": args.reasoning_tokens}
    batched = await run_choices_only(
        url, data, limit=args.items, chunk=args.chunk, concurrency=args.concurrency, **common
    )
    sequential = await run_choices_only(
        url, data, limit=args.sequential_items, chunk=1, concurrency=1, **common
    )
    s = batched["summary"]["conditions"]
    return {
        "items": batched["n_items"],
        "reasoning_tokens": args.reasoning_tokens,
        "batched_items_per_s": batched["items_per_s"],
        "sequential_items_per_s": sequential["items_per_s"],
        "ratio_batched_vs_sequential": batched["items_per_s"] / sequential["items_per_s"],
        "tokens_per_item_by_condition": batched["tokens_per_item_by_condition"],
        "accuracy": {c: (v["accuracy"], v["chance"]) for c, v in s.items()},
        "reasoning_effect": batched["summary"]["reasoning_effect"],
        "parse_failure_rate": {c: v.get("parse_failure_rate") for c, v in s.items()},
        "wall_s": {"batched": batched["wall_s"], "sequential": sequential["wall_s"]},
    }


def parse() -> argparse.Namespace:
    p = bench.parser(
        NAME, __doc__, smoke={"items": 2, "sequential_items": 2, "reasoning_tokens": 8}
    )
    p.add_argument("--url", help="A running service; none: start one here.")
    p.add_argument("--items", type=int, default=100)
    p.add_argument("--sequential-items", type=int, default=16)
    p.add_argument("--reasoning-tokens", type=int, default=64)
    p.add_argument("--chunk", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=2)
    return p.parse()


async def main() -> None:
    args = parse()
    config = {
        k: getattr(args, k)
        for k in ("items", "sequential_items", "reasoning_tokens", "chunk", "concurrency")
    }
    rec = bench.record(NAME, args, config=config)
    log = bench.result_path(NAME, args).with_suffix(".server.log")
    with harness.service(args.url, log) as (url, _pid):
        rec.results.update(await measure(url, args))
    print(json.dumps(rec.results, indent=2))
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
