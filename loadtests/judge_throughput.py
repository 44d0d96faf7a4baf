"""Direct-judgment throughput: raw vLLM engine vs vLLM's OpenAI server vs this service.

Workload: the first 64 questions x 4 solutions of gsm8k/example_model_solutions.jsonl = 256
direct judgments, 32 concurrent clients. Every mode gets a fresh engine (so the workload's
prefix cache is cold), identical engine settings and identical prompt token ids, and a warm-up
of 8 judgments on other questions before the clock starts.

The whole measurement (every mode, each on a fresh engine) is repeated `--runs` times (default
3); each run's ratios ours / raw (target >= 0.95) and ours / vLLM server (target >= 1.0) are
printed, then their median over the runs, and all of it is written to
out/bench/judge_throughput_<eager|compiled>.json.

    python loadtests/judge_throughput.py                # eager (the service default), 3 runs
    python loadtests/judge_throughput.py --runs 1
    python loadtests/judge_throughput.py --compiled     # torch.compile (slow start)
    python loadtests/judge_throughput.py --modes ours   # one mode only
    python loadtests/judge_throughput.py --smoke        # 1 run of 8 judgments, a quick check
    verifier bench judge-throughput [the same options]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Final

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier
from loadtests.workload import Pair, block_size, drive, load_pairs, pretokenize, raw_engine
from service.config import Settings
from service.engine.device import resolve_dtype
from service.engine.judging import PROMPT_TOPK
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env


async def run_raw(
    settings: Settings, model: str, work: list[Pair], warm: list[Pair], conc: int
) -> float:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    llm = raw_engine(settings, model)
    tok = llm.get_tokenizer()
    labels = [
        tok.encode("1", add_special_tokens=False)[0],
        tok.encode("0", add_special_tokens=False)[0],
    ]
    params = SamplingParams(
        max_tokens=1,
        temperature=0,
        logprob_token_ids=labels,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )
    counter = iter(range(10**9))
    ids = pretokenize(tok, work + warm)

    async def one(pair: Pair) -> float:
        out = None
        gen = llm.generate(TokensPrompt(prompt_token_ids=ids[pair]), params, f"r{next(counter)}")
        async for item in gen:
            out = item
        assert out is not None
        lp = out.outputs[0].logprobs[0]
        return float(lp[labels[0]].logprob - lp[labels[1]].logprob)

    try:
        await drive(warm, conc, one)
        return await drive(work, conc, one)
    finally:
        llm.shutdown()


async def run_vllm_server(
    settings: Settings,
    model: str,
    work: list[Pair],
    warm: list[Pair],
    conc: int,
    port: int,
    out: Path,
) -> float:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    ids = pretokenize(tok, work + warm)
    labels = [
        tok.encode("1", add_special_tokens=False)[0],
        tok.encode("0", add_special_tokens=False)[0],
    ]
    cfg = settings.engine
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--dtype", resolve_dtype(cfg.dtype, "cpu"), "--max-model-len", str(cfg.max_model_len), "--enable-prefix-caching",
        "--max-num-seqs", str(cfg.max_num_seqs), "--max-logprobs", str(PROMPT_TOPK), "--seed", str(cfg.seed),
        "--port", str(port), "--host", "127.0.0.1", "--served-model-name", "judge",
        "--block-size", str(block_size(settings)),
        "--uvicorn-log-level", "warning",
    ]  # fmt: skip
    if cfg.enforce_eager:
        cmd.append("--enforce-eager")
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(cmd, log=out / "vllm_server.log", probe=url + "/health"):
        limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

            async def one(pair: Pair) -> float:
                body = {
                    "model": "judge",
                    "prompt": ids[pair],
                    "max_tokens": 1,
                    "temperature": 0,
                    "logprobs": 2,
                    "logprob_token_ids": labels,
                }
                r = await client.post("/v1/completions", json=body)
                r.raise_for_status()
                top = r.json()["choices"][0]["logprobs"]["top_logprobs"][0]
                return float(top["1"] - top["0"])

            await drive(warm, conc, one)
            return await drive(work, conc, one)


async def run_ours(
    work: list[Pair], warm: list[Pair], conc: int, port: int, out: Path, compiled: bool
) -> float:
    env = {**os.environ, "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    if compiled:
        env["VERIFIER_ENGINE__ENFORCE_EAGER"] = "false"
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(verifier("serve"), env=env, log=out / "service.log", probe=url + "/ready"):
        limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

            async def one(pair: Pair) -> float:
                body = {"question": pair[0], "response": pair[1], "cache": False}
                r = await client.post("/v1/judge/outcome", json=body)
                r.raise_for_status()
                return float(r.json()["logit"])

            await drive(warm, conc, one)
            return await drive(work, conc, one)


NAMES: Final = {
    "raw": "raw in-process engine",
    "vllm": "vLLM OpenAI server",
    "ours": "verifier-service",
}
# ours / baseline: the ratio's name, its baseline and its target
RATIOS: Final = (("ours_over_raw", "raw", 0.95), ("ours_over_vllm", "vllm", 1.0))


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--questions", type=int, default=64, help="questions (x4 solutions)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--modes", default="raw,vllm,ours")
    ap.add_argument("--runs", type=int, default=3, help="repeats of the whole measurement")
    ap.add_argument("--compiled", action="store_true", help="torch.compile instead of eager")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="defaults for a quick check: 1 run of 2 questions (8 judgments), 8 clients",
    )
    ap.add_argument("--port", type=int, default=8731)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    if "--smoke" in sys.argv[1:]:  # new defaults: options given explicitly still win
        ap.set_defaults(runs=1, questions=2, concurrency=8)
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs: at least 1")
    return args


async def one_run(
    args: argparse.Namespace, settings: Settings, model: str, work: list[Pair], warm: list[Pair]
) -> dict[str, float]:
    """Every mode once, each on a fresh engine; judgments/s per mode and the ratios."""
    modes = args.modes.split(",")
    rates: dict[str, float] = {}
    if "raw" in modes:
        rates["raw"] = await run_raw(settings, model, work, warm, args.concurrency)
    if "vllm" in modes:
        rates["vllm"] = await run_vllm_server(
            settings, model, work, warm, args.concurrency, args.port, args.out
        )
    if "ours" in modes:
        rates["ours"] = await run_ours(
            work, warm, args.concurrency, args.port + 1, args.out, args.compiled
        )
    for name, base, _ in RATIOS:
        if "ours" in rates and base in rates:
            rates[name] = rates["ours"] / rates[base]
    return rates


def print_run(k: int, runs: int, rates: dict[str, float]) -> None:
    print(f"  run {k}/{runs}:")
    for key, name in NAMES.items():
        if key in rates:
            print(f"    {name:<24} {rates[key]:7.2f} judgments/s")
    print_ratios(rates)


def print_ratios(rates: dict[str, float]) -> None:
    for name, _, target in RATIOS:
        if name in rates:
            print(f"    {name:<24} {rates[name]:7.3f}   (target >= {target})")


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = [*NAMES, *(name for name, _, _ in RATIOS)]
    return {k: statistics.median(run[k] for run in runs) for k in keys if k in runs[0]}


async def main() -> None:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    settings = Settings()
    settings.engine.enforce_eager = not args.compiled
    model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    work = load_pairs(settings, args.questions)
    warm = load_pairs(settings, 2, offset=1000)
    mode = "compiled" if args.compiled else "eager"
    print(
        f"{len(work)} direct judgments, {args.concurrency} concurrent clients, {mode}, "
        f"cold prefix cache, {args.runs} run(s)"
    )
    runs: list[dict[str, float]] = []
    for k in range(1, args.runs + 1):
        runs.append(await one_run(args, settings, model, work, warm))
        print_run(k, args.runs, runs[-1])
    median = medians(runs)
    if len(runs) > 1:
        print("\n  ratios per run:")
        for k, rates in enumerate(runs, 1):
            print(f"  run {k}:")
            print_ratios(rates)
    print(f"  median over {len(runs)} run(s):")
    print_ratios(median)
    result = {
        "workload": {
            "judgments": len(work),
            "concurrency": args.concurrency,
            "mode": mode,
            "runs": len(runs),
            "smoke": args.smoke,
        },
        "targets": {name: f">= {target}" for name, _, target in RATIOS},
        "runs": runs,
        "median": median,
    }
    path = args.out / f"judge_throughput_{mode}{'_smoke' if args.smoke else ''}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
