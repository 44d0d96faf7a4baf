"""Mixed load: do direct judgments wait behind long rationales? Service vs vLLM's own server.

Workload (GSM8K pairs from gsm8k/example_model_solutions.jsonl):
- idle: 1 client sends 12 sequential direct judgments;
- loaded: 8 clients loop reasoning judgments (reasoning_tokens 96, greedy) while 1 client
  sends 12 sequential direct judgments on other pairs.
Reported per server: direct p50 idle and loaded, reasoning judgments/s during the loaded
window (from the first to the last direct judgment, which are 1 s apart), and the mean
rationale length. vLLM's server gets the same prompt ids: a reasoning
judgment there is a generation (max 96 tokens, stop at the verdict marker) followed by the
verdict call, exactly the two engine calls the service makes. Every judgment is scored afresh
(`cache: false`), and each server gets a fresh engine with the same settings.

    python loadtests/mixed_load.py                 # both servers, ratios printed
    python loadtests/mixed_load.py --servers ours  # one server only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier
from loadtests.workload import Pair, block_size, load_pairs
from service.config import Settings
from service.engine.device import resolve_dtype
from service.engine.judging import PROMPT_TOPK
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env
from service.scoring import prompts

REASONING_TOKENS = 96
One = Callable[[Pair], Awaitable[int]]  # returns rationale tokens (0 for direct)


async def sequential_latencies(one: One, pairs: list[Pair], gap_s: float = 0.0) -> list[float]:
    out = []
    for pair in pairs:
        start = time.perf_counter()
        await one(pair)
        out.append(time.perf_counter() - start)
        await asyncio.sleep(gap_s)
    return out


async def measure(
    direct: One, reason: One, settings: argparse.Namespace, work: Any
) -> dict[str, Any]:
    idle_pairs, loaded_pairs, reason_pairs = work
    await sequential_latencies(direct, reason_pairs[-4:])  # warm-up
    idle = await sequential_latencies(direct, idle_pairs)
    done: list[tuple[float, int]] = []  # (finished at, rationale tokens)
    stop = asyncio.Event()

    async def reasoner(k: int) -> None:
        i = k
        while not stop.is_set():
            tokens = await reason(reason_pairs[i % len(reason_pairs)])
            done.append((time.perf_counter(), tokens))
            i += settings.reasoning_clients

    clients = [asyncio.create_task(reasoner(k)) for k in range(settings.reasoning_clients)]
    await asyncio.sleep(settings.ramp_s)  # the reasoning clients fill the engine first
    start = time.perf_counter()
    # Spaced out, so the window over which reasoning throughput is counted is long enough
    # (about 12 x (latency + gap)) to hold dozens of reasoning judgments.
    loaded = await sequential_latencies(direct, loaded_pairs, settings.direct_gap_s)
    end = time.perf_counter()
    stop.set()
    await asyncio.gather(*clients)
    window = [t for at, t in done if start <= at <= end]
    return {
        "direct_p50_idle_ms": statistics.median(idle) * 1000,
        "direct_p50_loaded_ms": statistics.median(loaded) * 1000,
        "direct_max_loaded_ms": max(loaded) * 1000,
        "reasoning_per_s": len(window) / (end - start),
        "reasoning_done_in_window": len(window),
        "window_s": end - start,
        "mean_rationale_tokens": statistics.mean(t for _, t in done) if done else 0.0,
    }


async def run_vllm(
    cfg: Settings, model: str, args: argparse.Namespace, work: Any
) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tok: Any = AutoTokenizer.from_pretrained(model)
    labels = [tok.encode(x, add_special_tokens=False)[0] for x in ("1", "0")]
    e = cfg.engine
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--dtype", resolve_dtype(e.dtype, "cpu"), "--max-model-len", str(e.max_model_len),
        "--enable-prefix-caching", "--max-num-seqs", str(e.max_num_seqs),
        "--max-logprobs", str(PROMPT_TOPK), "--seed", str(e.seed), "--port", str(args.port),
        "--host", "127.0.0.1", "--served-model-name", "judge",
        "--block-size", str(block_size(cfg)), "--uvicorn-log-level", "warning",
    ]  # fmt: skip
    if e.enforce_eager:
        cmd.append("--enforce-eager")
    url = f"http://127.0.0.1:{args.port}"
    log = args.out / "mixed_vllm_server.log"
    with ServerProcess(cmd, log=log, probe=url + "/health"):
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:

            async def verdict(ids: list[int]) -> None:
                body = {
                    "model": "judge",
                    "prompt": ids,
                    "max_tokens": 1,
                    "temperature": 0,
                    "logprobs": 2,
                    "logprob_token_ids": labels,
                }
                (await client.post("/v1/completions", json=body)).raise_for_status()

            async def direct(pair: Pair) -> int:
                rendered = prompts.outcome_prompt(tok, pair[0], pair[1], False)
                await verdict(prompts.direct_prompt_ids(rendered))
                return 0

            async def reason(pair: Pair) -> int:
                rendered = prompts.outcome_prompt(tok, pair[0], pair[1], True)
                body = {
                    "model": "judge",
                    "prompt": rendered.prompt_ids,
                    "max_tokens": REASONING_TOKENS,
                    "temperature": 0,
                    "stop": [prompts.VERDICT_MARKER],
                }
                r = await client.post("/v1/completions", json=body)
                r.raise_for_status()
                data = r.json()
                text = data["choices"][0]["text"].rstrip()
                ids = tok.encode(text, add_special_tokens=False)
                await verdict([*rendered.prompt_ids, *ids, *rendered.after_rationale_ids])
                return int(data["usage"]["completion_tokens"])

            return await measure(direct, reason, args, work)


async def run_ours(args: argparse.Namespace, work: Any) -> dict[str, Any]:
    port = args.port + 1
    env = {**os.environ, "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    url = f"http://127.0.0.1:{port}"
    log = args.out / "mixed_service.log"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:

            async def judge(pair: Pair, **extra: Any) -> dict[str, Any]:
                body = {"question": pair[0], "response": pair[1], "cache": False, **extra}
                r = await client.post("/v1/judge/outcome", json=body)
                r.raise_for_status()
                return dict(r.json())

            async def direct(pair: Pair) -> int:
                await judge(pair)
                return 0

            async def reason(pair: Pair) -> int:
                body = await judge(pair, mode="reasoning", reasoning_tokens=REASONING_TOKENS)
                return int(body["usage"]["generated_tokens"]) - 1  # minus the verdict token

            return await measure(direct, reason, args, work)


def report(results: dict[str, dict[str, Any]]) -> None:
    print(
        f"\n8 reasoning clients (reasoning_tokens {REASONING_TOKENS}) + 1 client of 12 "
        "sequential direct judgments"
    )
    print(
        f"  {'server':<22} {'p50 idle ms':>12} {'p50 loaded ms':>14} {'reasoning/s':>12} "
        f"{'rationale tok':>14}"
    )
    for name, r in results.items():
        print(
            f"  {name:<22} {r['direct_p50_idle_ms']:12.0f} {r['direct_p50_loaded_ms']:14.0f} "
            f"{r['reasoning_per_s']:12.2f} {r['mean_rationale_tokens']:14.1f}"
        )
    if {"ours", "vllm"} <= set(results):
        ours, vllm = results["ours"], results["vllm"]
        lat = ours["direct_p50_loaded_ms"] / vllm["direct_p50_loaded_ms"]
        thr = ours["reasoning_per_s"] / vllm["reasoning_per_s"]
        print(f"  loaded direct p50, ours / vLLM = {lat:.2f}   (target <= 1.25)")
        print(f"  reasoning/s,       ours / vLLM = {thr:.2f}   (target >= 0.95)")


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--servers", default="vllm,ours")
    ap.add_argument("--reasoning-clients", type=int, default=8)
    ap.add_argument("--direct", type=int, default=12, help="sequential direct judgments")
    ap.add_argument("--ramp-s", type=float, default=5.0)
    ap.add_argument(
        "--direct-gap-s", type=float, default=1.0, help="pause between the direct judgments"
    )
    ap.add_argument("--port", type=int, default=8741)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    settings = Settings()
    model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    pairs = load_pairs(settings, 40)  # 160 pairs: idle, loaded and reasoning sets apart
    work = (pairs[: args.direct], pairs[args.direct : 2 * args.direct], pairs[2 * args.direct :])
    results: dict[str, dict[str, Any]] = {}
    for server in args.servers.split(","):
        if server == "vllm":
            results["vllm"] = await run_vllm(settings, model, args, work)
        elif server == "ours":
            results["ours"] = await run_ours(args, work)
    report(results)
    (args.out / "mixed_load.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
