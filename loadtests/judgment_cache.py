"""Judgment cache: rates cold vs cached, on one server in one run.

Workloads (GSM8K questions with their 4 model solutions, gsm8k/example_model_solutions.jsonl):
- Best-of-8 rerank (fused, the default method): each question's 4 solutions twice, so half of
  the 8 candidates are duplicates. Cold (`cache: false`: every candidate judged) on one set of
  questions; with the cache on, on another set the engine has never seen (so vLLM's prefix
  cache favours neither: duplicates inside a request are judged once); then that set again
  (every judgment a hit).
- 256 direct judgments (64 questions x 4 solutions, apart from the rerank questions), cold
  with the cache on, then the same 256 again.

    python loadtests/judgment_cache.py
    python loadtests/judgment_cache.py --questions 8 --judgments 64   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier
from loadtests.workload import load_pairs
from service.config import Settings


async def timed(
    items: list[Any], conc: int, one: Callable[[Any], Awaitable[dict[str, Any]]]
) -> tuple[float, list[dict[str, Any]]]:
    sem = asyncio.Semaphore(conc)

    async def run(item: Any) -> dict[str, Any]:
        async with sem:
            return await one(item)

    start = time.perf_counter()
    out = await asyncio.gather(*(run(i) for i in items))
    return len(items) / (time.perf_counter() - start), list(out)


def totals(bodies: list[dict[str, Any]]) -> dict[str, int]:
    keys = ("total_tokens", "engine_calls", "cached_judgments")
    return {k: sum(int(b["usage"][k]) for b in bodies) for k in keys}


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--questions", type=int, default=16, help="Best-of-8 rerank requests")
    ap.add_argument("--judgments", type=int, default=256, help="repeated direct judgments")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--port", type=int, default=8751)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = Settings()
    n_rerank = 2 * args.questions
    pairs = load_pairs(settings, n_rerank + args.judgments // 4)
    questions: dict[str, list[str]] = {}
    for q, a in pairs:
        questions.setdefault(q, []).append(a)
    reranks = [(q, answers * 2) for q, answers in list(questions.items())[:n_rerank]]
    cold_reranks, cached_reranks = reranks[: args.questions], reranks[args.questions :]
    judgments = pairs[4 * n_rerank :][: args.judgments]

    env = {**os.environ, "VERIFIER_PORT": str(args.port), "VERIFIER_LOG_LEVEL": "warning"}
    url = f"http://127.0.0.1:{args.port}"
    log = args.out / "judgment_cache_service.log"
    rows: dict[str, dict[str, Any]] = {}
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        async with httpx.AsyncClient(base_url=url, timeout=900) as client:

            async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
                r = await client.post(path, json=body)
                r.raise_for_status()
                return dict(r.json())

            def rerank(cache: bool) -> Callable[[Any], Awaitable[dict[str, Any]]]:
                async def one(item: tuple[str, list[str]]) -> dict[str, Any]:
                    body = {"query": item[0], "documents": item[1], "cache": cache}
                    return await post("/v1/rerank", body)

                return one

            def judge(cache: bool) -> Callable[[Any], Awaitable[dict[str, Any]]]:
                async def one(pair: tuple[str, str]) -> dict[str, Any]:
                    body = {"question": pair[0], "response": pair[1], "cache": cache}
                    return await post("/v1/judge/outcome", body)

                return one

            runs: list[tuple[str, list[Any], Callable[[Any], Awaitable[dict[str, Any]]]]] = [
                ("rerank_cold", cold_reranks, rerank(False)),
                ("rerank_first_cached", cached_reranks, rerank(True)),
                ("rerank_repeated", cached_reranks, rerank(True)),
                ("judge_cold", judgments, judge(True)),
                ("judge_repeated", judgments, judge(True)),
            ]
            scores: dict[str, list[float]] = {}
            for name, items, one in runs:
                rate, bodies = await timed(items, args.concurrency, one)
                rows[name] = {"rate_per_s": rate, **totals(bodies)}
                scores[name] = [
                    x["relevance_score"] if "results" in b else b["score"]
                    for b in bodies
                    for x in (b.get("results") or [b])
                ]
    # gather keeps request order, so the two runs pair up item by item.
    pairs_scored = zip(scores["judge_cold"], scores["judge_repeated"], strict=True)
    drift = max(abs(a - b) for a, b in pairs_scored)
    print(
        f"\n{args.questions} Best-of-8 reranks (half duplicates) per run, {len(judgments)} direct "
        f"judgments, {args.concurrency} clients"
    )
    print(f"  {'run':<22} {'per s':>9} {'tokens':>10} {'engine calls':>13} {'cached':>8}")
    for name, r in rows.items():
        print(
            f"  {name:<22} {r['rate_per_s']:9.2f} {r['total_tokens']:10d} "
            f"{r['engine_calls']:13d} {r['cached_judgments']:8d}"
        )
    cold = rows["rerank_cold"]["rate_per_s"]
    print(
        f"  rerank: first cached / cold = {rows['rerank_first_cached']['rate_per_s'] / cold:.2f}"
        f", repeated / cold = {rows['rerank_repeated']['rate_per_s'] / cold:.2f}"
        "   (target >= 3)"
    )
    ratio = rows["judge_repeated"]["rate_per_s"] / rows["judge_cold"]["rate_per_s"]
    print(f"  judge: repeated / cold = {ratio:.2f}   (target >= 3)")
    print(f"  largest |cached - fresh| score on the repeated judgments: {drift:.2e}")
    (args.out / "judgment_cache.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
