"""Judgment cache: rates cold vs cached, on one server in one run.

Workloads (GSM8K questions with their 4 model solutions, gsm8k/example_model_solutions.jsonl):
- Best-of-8 rerank (fused, the default method): each question's 4 solutions twice, so half of
  the 8 candidates are duplicates. Cold (`cache: false`: every candidate judged) on one set of
  questions; with the cache on, on another set the engine has never seen (so vLLM's prefix
  cache favours neither: duplicates inside a request are judged once); then that set again
  (every judgment a hit).
- 256 direct judgments (64 questions x 4 solutions, apart from the rerank questions), cold
  with the cache on, then the same 256 again.

A service given with --url must have the judgment cache on; one that has seen these questions
before (a test session's) makes the "first cached" run partly hits.

    verifier bench judgment-cache
    verifier bench judgment-cache --questions 8 --judgments 64   # quicker
    verifier bench judgment-cache --smoke --url http://127.0.0.1:8000   # 1 question, 4 judgments
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from loadtests import bench
from loadtests.harness import service
from loadtests.workload import load_pairs
from service.config import Settings

NAME = "judgment_cache"
Call = Callable[[Any], Awaitable[dict[str, Any]]]


async def timed(items: list[Any], conc: int, one: Call) -> tuple[float, list[dict[str, Any]]]:
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


async def measure(
    client: httpx.AsyncClient, runs: list[tuple[str, list[Any], str, bool]], conc: int
) -> tuple[dict[str, dict[str, Any]], dict[str, list[float]]]:
    """Each run's rate and usage totals, and its scores in request order."""

    def call(kind: str, cache: bool) -> Call:
        async def one(item: tuple[str, Any]) -> dict[str, Any]:
            if kind == "rerank":
                path, body = "/v1/rerank", {"query": item[0], "documents": item[1]}
            else:
                path, body = "/v1/judge/outcome", {"question": item[0], "response": item[1]}
            r = await client.post(path, json={**body, "cache": cache})
            r.raise_for_status()
            return dict(r.json())

        return one

    rows: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[float]] = {}
    for name, items, kind, cache in runs:
        rate, bodies = await timed(items, conc, call(kind, cache))
        rows[name] = {"rate_per_s": rate, **totals(bodies)}
        scores[name] = [
            x["relevance_score"] if "results" in b else b["score"]
            for b in bodies
            for x in (b.get("results") or [b])
        ]
    return rows, scores


async def main() -> None:
    ap = bench.parser(NAME, __doc__, smoke={"questions": 1, "judgments": 4, "concurrency": 4})
    ap.add_argument("--url", help="A running service; none: start one here.")
    ap.add_argument("--questions", type=int, default=16, help="Best-of-8 rerank requests")
    ap.add_argument("--judgments", type=int, default=256, help="repeated direct judgments")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse()
    settings = Settings()
    n_rerank = 2 * args.questions
    pairs = load_pairs(settings, n_rerank + args.judgments // 4)
    questions: dict[str, list[str]] = {}
    for q, a in pairs:
        questions.setdefault(q, []).append(a)
    reranks = [(q, answers * 2) for q, answers in list(questions.items())[:n_rerank]]
    cold_reranks, cached_reranks = reranks[: args.questions], reranks[args.questions :]
    judgments = pairs[4 * n_rerank :][: args.judgments]
    rec = bench.record(
        NAME,
        args,
        config={
            "questions": args.questions,
            "judgments": len(judgments),
            "concurrency": args.concurrency,
            "url": args.url,
        },
    )
    runs: list[tuple[str, list[Any], str, bool]] = [
        ("rerank_cold", cold_reranks, "rerank", False),
        ("rerank_first_cached", cached_reranks, "rerank", True),
        ("rerank_repeated", cached_reranks, "rerank", True),
        ("judge_cold", judgments, "judge", True),
        ("judge_repeated", judgments, "judge", True),
    ]
    with service(args.url, args.out / f"{NAME}_service.log") as (url, _):
        async with httpx.AsyncClient(base_url=url, timeout=900) as client:
            rows, scores = await measure(client, runs, args.concurrency)
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
    first, repeated = (
        rows[k]["rate_per_s"] / cold for k in ("rerank_first_cached", "rerank_repeated")
    )
    print(
        f"  rerank: first cached / cold = {first:.2f}, repeated / cold = {repeated:.2f}"
        "   (target >= 3)"
    )
    ratio = rows["judge_repeated"]["rate_per_s"] / rows["judge_cold"]["rate_per_s"]
    print(f"  judge: repeated / cold = {ratio:.2f}   (target >= 3)")
    print(f"  largest |cached - fresh| score on the repeated judgments: {drift:.2e}")
    rec.results = {
        **rows,
        "rerank_first_cached_over_cold": first,
        "rerank_repeated_over_cold": repeated,
        "judge_repeated_over_cold": ratio,
        "max_abs_score_drift": drift,
    }
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
