"""Process-scoring modes on ProcessBench GSM8K: wall time, prompt tokens computed, F1.

Modes (--arms), each through a fresh `verifier serve` (cold cache):
  direct-nocache   multi-step direct, prefix caching off
                   (VERIFIER_ENGINE__ENABLE_PREFIX_CACHING=false)
  direct           multi-step direct, prefix caching on (the default)
  single_pass      single_pass, prefix caching on (one prefill per solution, verdict slots
                   read from prompt logprobs)
  direct-block128  multi-step direct, vLLM's own CPU block size of 128, against our default
                   of 32 (partial blocks are recomputed)

"Computed" prompt tokens = prompt_tokens - cached_tokens (what the engine actually prefilled).
"One full-solution pass" = the tokens of the last step's prompt (question + every step), i.e.
what a single judgment of the whole solution would prefill. Written to
out/bench/process_modes.json.

    verifier bench process-modes [--limit 400] [--concurrency 16] [--arms direct,single_pass]
    verifier bench process-modes --smoke [--url URL]   # direct and single_pass on 2 items

--limit N takes every (400 // N)-th item, so a subset keeps both classes. --url: a running
service (default engine settings, its cache not cold) for the direct and single_pass arms;
--smoke without it starts one service for both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Final

from loadtests import bench, harness, phases
from service.config import Settings
from service.engine.models import resolve_model
from service.evals.data import load_processbench
from service.scoring import prompts
from service.scoring.metrics_eval import processbench_metric

NAME: Final = "process_modes"


@dataclass(frozen=True)
class Arm:
    mode: str  # the request's mode
    caching: bool
    block_size: int | None = None  # None: the service's default

    def env(self) -> dict[str, str]:
        env = {"VERIFIER_ENGINE__ENABLE_PREFIX_CACHING": "true" if self.caching else "false"}
        if self.block_size:
            env["VERIFIER_ENGINE__BLOCK_SIZE"] = str(self.block_size)
        return env


ARMS: Final = {
    "direct-nocache": Arm("direct", False),
    "direct": Arm("direct", True),
    "single_pass": Arm("single_pass", True),
    "direct-block128": Arm("direct", True, 128),
}
# Arms on the default engine settings: a running service (--url) can stand for their server.
DEFAULT_SETTINGS: Final = ("direct", "single_pass")
SMOKE: Final = {"limit": 2, "arms": "direct,single_pass"}


async def run_arm(
    args: argparse.Namespace, items: list[Any], name: str, shared: str | None
) -> dict[str, Any]:
    """One arm on a fresh server, or on ``shared`` (a running one) if its settings allow."""
    arm = ARMS[name]
    log = args.out / f"process_{name}.log"
    url = shared if name in DEFAULT_SETTINGS else None
    conc = args.concurrency
    with harness.service(url, log, arm.env()) as (base, _):
        sem = asyncio.Semaphore(conc)
        async with phases.client(base, conc, timeout_s=900) as client:

            async def one(item: Any) -> dict[str, Any]:
                async with sem:
                    body = {"question": item.problem, "steps": list(item.steps), "mode": arm.mode}
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
    return {
        "mode": arm.mode,
        "prefix_caching": arm.caching,
        "block_size": arm.block_size or "default",
        "wall_s": wall,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "computed_tokens": prompt - cached,
        "engine_calls": sum(r["usage"]["engine_calls"] for r in results),
        "exact_fallbacks": sum(r.get("exact_fallbacks") or 0 for r in results),
        "slots": sum(len(it.steps) for it in items),
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
    tok = phases.tokenizer(model)
    total = 0
    for it in items:
        last = prompts.process_prompts(tok, it.problem, list(it.steps), reasoning=False)[-1]
        total += len(prompts.direct_prompt_ids(last))
    return total


def print_table(rows: dict[str, dict[str, Any]], full: int, items: int, conc: int) -> None:
    """The table, then each comparison whose arms ran."""
    slots = next(iter(rows.values()))["slots"]
    print(f"\nProcessBench GSM8K, {items} items, {slots} steps, {conc} concurrent")
    print(f"{'mode':<36}{'wall s':>8}{'prompt tok':>12}{'computed':>10}{'comp/full':>10}{'F1':>7}")
    for r in rows.values():
        cache = f"cache, block {r['block_size']}" if r["prefix_caching"] else "no cache"
        name = f"{r['mode']} ({cache})"
        print(
            f"{name:<36}{r['wall_s']:>8.1f}{r['prompt_tokens']:>12}{r['computed_tokens']:>10}"
            f"{r['computed_tokens'] / full:>10.2f}{r['f1']:>7.1f}"
        )
    print(f"one full-solution pass per item: {full} prompt tokens")
    nocache, multi, single = (rows.get(k) for k in ("direct-nocache", "direct", "single_pass"))
    block128 = rows.get("direct-block128")
    if multi and single:
        m = [x for item in multi["step_logits"] for x in item]
        s = [x for item in single["step_logits"] for x in item]
        print(f"Pearson r of step logits, single_pass vs multi-step direct: {pearson(m, s):.3f}")
    if multi and single and nocache:
        speed = multi["wall_s"] / single["wall_s"]
        speed_nc = nocache["wall_s"] / single["wall_s"]
        print(
            f"single_pass speed-up vs multi-step direct: {speed:.2f}x (cached), {speed_nc:.2f}x (no cache)   (target >= 3)"
        )
    if multi and block128:
        print(
            f"multi-step computed / full pass, cached: {multi['computed_tokens'] / full:.2f} "
            f"(default 32-token blocks), {block128['computed_tokens'] / full:.2f} (128-token blocks)   (target < 1.5)"
        )
    if single:
        print(
            f"single_pass slots re-scored exactly (label outside top-20): {single['exact_fallbacks']}/{single['slots']}"
        )


def parse_args() -> argparse.Namespace:
    ap = bench.parser(NAME, __doc__, smoke=SMOKE)
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--arms", default=",".join(ARMS), help=f"a comma list of {', '.join(ARMS)}")
    ap.add_argument("--url", help="a running service for direct and single_pass; none: start one")
    args = ap.parse()
    args.arms = [a for a in ARMS if a in args.arms.split(",")]
    if not args.arms:
        ap.error(f"--arms: a comma list of {', '.join(ARMS)}")
    return args


async def main() -> None:
    args = parse_args()
    settings = Settings()
    model = resolve_model(settings)
    every = load_processbench(settings.data_dir / "processbench" / "gsm8k.json", None)
    # The file lists the 207 erroneous items first: take an even stride so both classes show.
    items = every[:: max(1, len(every) // args.limit)][: args.limit]
    config = {"items": len(items), "concurrency": args.concurrency, "arms": args.arms}
    rec = bench.record(NAME, args, config={**config, "service_url_given": bool(args.url)})
    full = full_pass_tokens(items, model)
    with contextlib.ExitStack() as stack:
        shared = args.url
        if args.smoke and not shared and set(args.arms) & set(DEFAULT_SETTINGS):
            # the mechanics only: one server for the default-settings arms, not one each
            shared, _ = stack.enter_context(harness.service(None, args.out / "process_default.log"))
        rows = {name: await run_arm(args, items, name, shared) for name in args.arms}
    print_table(rows, full, len(items), args.concurrency)
    rec.results = {"full_pass_tokens": full, "rows": list(rows.values())}
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
