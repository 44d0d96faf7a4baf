"""Score precision in one engine dtype: the verdict logit's grid, and how much reads move.

Starts ``verifier serve`` with ``VERIFIER_ENGINE__DTYPE=<--dtype>`` (or uses ``--url``) and
measures, all with ``cache: false``:

- resolution: the coarsest power-of-two grid step the verdict logits of every read sit on
  (the largest 2^k dividing all of them), over the fixed solution read ``--reads`` times and
  ``--items`` GSM8K solutions;
- fixed: one ProcessBench GSM8K solution's logit (``--fixed``, default gsm8k-0), every read;
- batch variance: the items judged one at a time vs the same requests inside one burst
  (the items plus the fixed one, ~17 in flight): max |delta logit|;
- mcq: the first ``--mcq-items`` ARC items through /v1/mcq/audit twice (base conditions):
  max |delta p| over every option probability.

    verifier bench precision --dtype float32 --out out/bench/float32   # a folder per dtype
    verifier bench precision --dtype bfloat16 --smoke    # seconds once the engine is up
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time
from typing import Any, Final

import httpx

from loadtests import bench, harness
from service.config import Settings

NAME: Final = "precision"
GRID_TOL = 1e-6  # logit units; float32 rounding here is ~6e-8
PRECISION_ENV = ("VERIFIER_ENGINE__DTYPE", "VERIFIER_ENGINE__HEAD_DTYPE", "VLLM_BATCH_INVARIANT")
MCQ_CONDITIONS = ["full_base", "choices_only_base"]


def grid_step(values: list[float], tol: float = GRID_TOL) -> float | None:
    """The largest power of two every value is a multiple of, within ``tol`` (the float32
    rounding of the logsumexp both label logprobs subtract); None when all are 0. A float32
    engine's reads come out near ``tol`` itself: no grid at that tolerance."""
    nonzero = [abs(v) for v in values if v != 0.0]
    if not nonzero:
        return None
    step = 2.0 ** math.ceil(math.log2(max(nonzero)))
    while step > tol:
        if all(abs(v - round(v / step) * step) <= tol for v in nonzero):
            return step
        step /= 2.0
    return step


def gsm8k_pairs(n: int) -> list[tuple[str, str]]:
    path = Settings().data_dir / "gsm8k" / "example_model_solutions.jsonl"
    out: list[tuple[str, str]] = []
    with path.open() as fh:
        for line in fh:
            row = json.loads(line)
            out.append((row["question"], row["175b_verification"]["solution"]))
            if len(out) == n:
                break
    return out


def processbench_solution(item_id: str) -> tuple[str, str]:
    rows = json.loads((Settings().data_dir / "processbench" / "gsm8k.json").read_text())
    row = next(r for r in rows if r["id"] == item_id)
    return row["problem"], "\n\n".join(row["steps"])


def arc_items(n: int) -> list[dict[str, Any]]:
    from service.evals.audits import DEFAULT_ARC
    from service.evals.data import read_items

    items, _ = read_items(Settings().data_dir / DEFAULT_ARC)
    return [
        {"id": it.id, "question": it.question, "options": it.options,
         "answer_index": it.answer_index}
        for it in items[:n]
    ]  # fmt: skip


async def judge(client: httpx.AsyncClient, pair: tuple[str, str]) -> float:
    q, a = pair
    r = await client.post("/v1/judge/outcome", json={"question": q, "response": a, "cache": False})
    r.raise_for_status()
    return float(r.json()["logit"])


async def audit_probs(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> list[float]:
    body = {"items": items, "conditions": MCQ_CONDITIONS, "cache": False}
    r = await client.post("/v1/mcq/audit", json=body)
    r.raise_for_status()
    return [
        p
        for item in r.json()["items"]
        for cond in MCQ_CONDITIONS
        for p in item["conditions"][cond]["probs"]
    ]


def max_delta(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    fixed_pair = processbench_solution(args.fixed)
    items = gsm8k_pairs(args.items)
    mcq = arc_items(args.mcq_items)
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        (card,) = (await client.get("/v1/models")).json()["data"]
        await judge(client, fixed_pair)  # warm-up: first-call costs stay out of the reads
        fixed = [await judge(client, fixed_pair) for _ in range(args.reads)]
        t0 = time.perf_counter()
        alone = [await judge(client, p) for p in items]
        t1 = time.perf_counter()
        burst = await asyncio.gather(*(judge(client, p) for p in [fixed_pair, *items]))
        t2 = time.perf_counter()
        first = await audit_probs(client, mcq)
        second = await audit_probs(client, mcq)
    reads = fixed + alone + list(burst)
    return {
        "served_dtype": card.get("dtype"),
        "logit_grid_step": grid_step(reads),
        "n_reads": len(reads),
        "fixed": {
            "id": args.fixed,
            "logits": fixed,
            "distinct": sorted(set(fixed)),
            "in_burst": burst[0],
        },
        "batch_variance": {
            "items": len(items),
            "burst_size": len(burst),
            "alone": alone,
            "in_burst": list(burst[1:]),
            "max_abs_delta_logit": max_delta(alone, list(burst[1:])),
            "fixed_alone_vs_burst": abs(fixed[0] - burst[0]),
            "alone_s_per_item": (t1 - t0) / len(items),
            "burst_s": t2 - t1,
        },
        "mcq_audit": {
            "items": len(mcq),
            "conditions": MCQ_CONDITIONS,
            "n_probs": len(first),
            "max_abs_delta_p": max_delta(first, second),
        },
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(
        NAME,
        __doc__,
        smoke={"reads": 2, "items": 3, "mcq_items": 2},  # 2 reads, 3 + 2 items
    )
    p.add_argument("--url", default=None, help="A running service (its dtype is its own).")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32", "float16"])
    p.add_argument("--fixed", default="gsm8k-0", help="The ProcessBench GSM8K solution read.")
    p.add_argument("--reads", type=int, default=8)
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--mcq-items", type=int, default=16)
    return p.parse(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.url and args.dtype != "auto":
        # The served engine reads it; set before the server process starts (and the record).
        os.environ["VERIFIER_ENGINE__DTYPE"] = args.dtype
    keys = ("url", "dtype", "fixed", "reads", "items", "mcq_items")
    config: dict[str, Any] = {k: getattr(args, k) for k in keys}
    # engine options that change precision, passed through the environment
    config["env"] = {k: v for k, v in os.environ.items() if k in PRECISION_ENV}
    rec = bench.record(NAME, args, config=config)
    with harness.service(args.url, args.out / f"{NAME}_service.log") as (url, _pid):
        rec.results = asyncio.run(measure(url, args))
    result = rec.results
    bv, mq = result["batch_variance"], result["mcq_audit"]
    print(f"dtype={args.dtype} cpu={rec.machine.cpu}")
    print(f"logit grid step: {result['logit_grid_step']} over {result['n_reads']} reads")
    print(f"fixed {args.fixed} logit: {result['fixed']['distinct']}")
    print(
        f"batch variance: max |dlogit| alone vs burst of {bv['burst_size']}: "
        f"{bv['max_abs_delta_logit']:.4f} ({bv['alone_s_per_item']:.3f} s/item alone)"
    )
    print(f"mcq audit twice ({mq['items']} items): max |dp| {mq['max_abs_delta_p']:.4f}")
    bench.write(rec, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
