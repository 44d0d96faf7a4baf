"""Process-scoring modes on ProcessBench GSM8K: wall time, prompt tokens computed, F1.

Modes, each through a fresh `verifier serve` (cold cache):
  multi-step direct, prefix caching off   (VERIFIER_ENGINE__ENABLE_PREFIX_CACHING=false)
  multi-step direct, prefix caching on    (the default)
  single_pass, prefix caching on          (one prefill per solution, verdict slots read from
                                           prompt logprobs)

"Computed" prompt tokens = prompt_tokens - cached_tokens (what the engine actually prefilled).
"One full-solution pass" = the tokens of the last step's prompt (question + every step), i.e.
what a single judgment of the whole solution would prefill.

    python loadtests/process_modes.py [--limit 400] [--concurrency 16]

--limit N takes every (400 // N)-th item, so a subset keeps both classes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier
from service.config import Settings
from service.engine.models import resolve_model
from service.evals.data import load_processbench
from service.scoring import prompts
from service.scoring.metrics_eval import processbench_metric


async def run_mode(
    items: list[Any],
    mode: str,
    caching: bool,
    conc: int,
    port: int,
    out: Path,
    block_size: int | None = None,
) -> dict[str, Any]:
    env = {**os.environ, "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    env["VERIFIER_ENGINE__ENABLE_PREFIX_CACHING"] = "true" if caching else "false"
    if block_size:
        env["VERIFIER_ENGINE__BLOCK_SIZE"] = str(block_size)
    log = out / f"process_{mode}_{'cache' if caching else 'nocache'}_{block_size or 'default'}.log"
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        sem = asyncio.Semaphore(conc)
        limits = httpx.Limits(max_connections=conc * 2)
        async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:

            async def one(item: Any) -> dict[str, Any]:
                async with sem:
                    body = {"question": item.problem, "steps": list(item.steps), "mode": mode}
                    body["cache"] = False  # measure the engine, not the judgment cache
                    r = await client.post("/v1/judge/process", json=body)
                    r.raise_for_status()
                    return dict(r.json())

            start = time.perf_counter()
            results = await asyncio.gather(*(one(it) for it in items))
            wall = time.perf_counter() - start
    prompt = sum(r["usage"]["prompt_tokens"] for r in results)
    cached = sum(r["usage"]["cached_tokens"] for r in results)
    metric = processbench_metric(
        [r["first_error_step"] for r in results],
        [it.label for it in items],
        [len(it.steps) for it in items],
    )
    fallbacks = sum(r.get("exact_fallbacks") or 0 for r in results)
    slots = sum(len(it.steps) for it in items)
    return {
        "mode": mode,
        "prefix_caching": caching,
        "block_size": block_size or "default",
        "wall_s": wall,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "computed_tokens": prompt - cached,
        "engine_calls": sum(r["usage"]["engine_calls"] for r in results),
        "exact_fallbacks": fallbacks,
        "slots": slots,
        "step_logits": [r["step_logits"] for r in results],
        **{k: metric[k] for k in ("acc_err", "acc_corr", "f1")},
    }


def pearson(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    va = sum((x - ma) ** 2 for x in a) ** 0.5
    vb = sum((y - mb) ** 2 for y in b) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def full_pass_tokens(items: list[Any], model: str) -> int:
    from transformers import AutoTokenizer

    tok: Any = AutoTokenizer.from_pretrained(model)
    total = 0
    for it in items:
        last = prompts.process_prompts(tok, it.problem, list(it.steps), reasoning=False)[-1]
        total += len(prompts.direct_prompt_ids(last))
    return total


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--port", type=int, default=8741)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = Settings()
    model = resolve_model(settings)
    every = load_processbench(settings.data_dir / "processbench" / "gsm8k.json", None)
    # The file lists the 207 erroneous items first: take an even stride so both classes show.
    items = every[:: max(1, len(every) // args.limit)][: args.limit]
    full = full_pass_tokens(items, model)
    rows = [
        await run_mode(items, "direct", False, args.concurrency, args.port, args.out),
        await run_mode(items, "direct", True, args.concurrency, args.port + 1, args.out),
        await run_mode(items, "single_pass", True, args.concurrency, args.port + 2, args.out),
        # vLLM's own CPU block size, against our default of 32 (partial blocks are recomputed).
        await run_mode(items, "direct", True, args.concurrency, args.port + 3, args.out, 128),
    ]
    print(
        f"\nProcessBench GSM8K, {len(items)} items, {rows[0]['slots']} steps, {args.concurrency} concurrent"
    )
    print(f"{'mode':<36}{'wall s':>8}{'prompt tok':>12}{'computed':>10}{'comp/full':>10}{'F1':>7}")
    for r in rows:
        cache = f"cache, block {r['block_size']}" if r["prefix_caching"] else "no cache"
        name = f"{r['mode']} ({cache})"
        print(
            f"{name:<36}{r['wall_s']:>8.1f}{r['prompt_tokens']:>12}{r['computed_tokens']:>10}"
            f"{r['computed_tokens'] / full:>10.2f}{r['f1']:>7.1f}"
        )
    print(f"one full-solution pass per item: {full} prompt tokens")
    multi = [x for item in rows[1]["step_logits"] for x in item]
    single = [x for item in rows[2]["step_logits"] for x in item]
    print(
        f"Pearson r of step logits, single_pass vs multi-step direct: {pearson(multi, single):.3f}"
    )
    speed = rows[1]["wall_s"] / rows[2]["wall_s"]
    speed_nc = rows[0]["wall_s"] / rows[2]["wall_s"]
    print(
        f"single_pass speed-up vs multi-step direct: {speed:.2f}x (cached), {speed_nc:.2f}x (no cache)   (target >= 3)"
    )
    print(
        f"multi-step computed / full pass, cached: {rows[1]['computed_tokens'] / full:.2f} "
        f"(default 32-token blocks), {rows[3]['computed_tokens'] / full:.2f} (128-token blocks)   (target < 1.5)"
    )
    print(
        f"single_pass slots re-scored exactly (label outside top-20): {rows[2]['exact_fallbacks']}/{rows[2]['slots']}"
    )
    (args.out / "process_modes.json").write_text(
        json.dumps({"full_pass_tokens": full, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    asyncio.run(main())
