"""Reward models and PRMs on vLLM's pooling runner: the service against vLLM's own pooling
server, and a PRM's process scores against the generative judge's.

Checkpoints: built here by ``loadtests.checkpoints`` with ``--layers`` layers (default 30: the
default model's size, 135M parameters), since no trained RM or PRM can be downloaded.

**RM throughput.** The first ``--questions`` GSM8K questions x 4 solutions, each rendered as
the RM reads it (its chat template over question and solution), ``--concurrency`` clients,
prefix cache off (every round reads the same texts). Both servers run at once, on the same
checkpoint and engine settings; each of ``--runs`` rounds times every mode once, in a rotated
order with a pause between, so the machine's drift falls on every mode alike:

- ``vllm``: vLLM's OpenAI server with ``--runner pooling``, POST /classify, one text a request
  (``{"input": text, "use_activation": false}``, verl's body);
- ``ours-classify``: the service's /classify with the same bodies;
- ``ours-outcome``: the service's /v1/judge/outcome with (question, solution).

The ratios ours / vLLM (target >= 0.95) are printed per round and as the median.

**PRM vs the generative judge.** The same solutions, one step per line, scored by
/v1/judge/process on a PRM server (one pooling call per solution) and on the default
generative judge (direct mode: one judgment per step, prefix cache on), one server at a time:
solutions per second, prompt and generated tokens and engine calls per solution.

    python loadtests/pooling.py                  # 5 rounds, 16 questions (64 judgments)
    python loadtests/pooling.py --smoke          # 1 round, 2 questions, 2-layer checkpoints
    verifier bench pooling [the same options]

Writes out/bench/pooling.json (with --smoke: pooling.smoke.json).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx

from loadtests import bench
from loadtests.checkpoints import build_prm, build_reward
from loadtests.harness import ROOT, ServerProcess, free_port, verifier, vllm_openai_server
from loadtests.workload import Pair, drive, load_pairs
from service.config import Settings

NAME: Final = "pooling"


@contextmanager
def ours(model: Path | None, log: Path, prefix_caching: bool = True) -> Iterator[str]:
    """``verifier serve`` on ``model`` (None: the default generative judge)."""
    port = free_port()
    env = {
        **os.environ,
        "VERIFIER_ENGINE__ENABLE_PREFIX_CACHING": str(prefix_caching).lower(),
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_LOG_LEVEL": "warning",
        "VERIFIER_CACHE__ENABLED": "false",
    }
    if model is not None:
        env["VERIFIER_ENGINE__MODEL"] = str(model)
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready", cwd=ROOT):
        yield url


def client(url: str, conc: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
    return httpx.AsyncClient(base_url=url, timeout=600, limits=limits)


async def rate(
    url: str, items: list[Any], conc: int, body: Callable[[Any], dict[str, Any]], path: str
) -> float:
    """Items per second through POST ``path``."""
    async with client(url, conc) as http:

        async def one(item: Any) -> None:
            r = await http.post(path, json=body(item))
            r.raise_for_status()

        return await drive(items, conc, one)


def rm_texts(model: Path, pairs: list[Pair]) -> dict[Pair, str]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    return {
        p: str(
            tok.apply_chat_template(
                [{"role": "user", "content": p[0]}, {"role": "assistant", "content": p[1]}],
                tokenize=False,
            )
        )
        for p in pairs
    }


# vLLM's engine processes spin for about 1 s after their last message: a pause between two
# servers' batches keeps one's spin out of the other's clock.
PAUSE_S = 1.5
MODES = ("vllm", "ours-classify", "ours-outcome")


async def rm_rounds(
    settings: Settings, rm: Path, work: list[Pair], warm: list[Pair], args: argparse.Namespace,
    out: Path,
) -> list[dict[str, float]]:  # fmt: skip
    """Both servers up at once; each round times every mode once, in a rotated order, so the
    machine's drift falls on all of them alike."""
    texts = rm_texts(rm, work + warm)

    def classify(p: Pair) -> dict[str, Any]:
        return {"model": "rm", "input": texts[p], "use_activation": False}

    def outcome(p: Pair) -> dict[str, Any]:
        return {"question": p[0], "response": p[1]}

    # Every round reads the same texts: with the prefix cache on, rounds after the first (and
    # the second of our two modes) would read cached prompts.
    cold = settings.model_copy(deep=True)
    cold.engine.enable_prefix_caching = False
    port = free_port()
    server = vllm_openai_server(
        cold, str(rm), port=port, log=out / "vllm_pooling.log", served_name="rm",
        extra_args=["--runner", "pooling"], cwd=ROOT,
    )  # fmt: skip
    with server, ours(rm, out / "service_rm.log", prefix_caching=False) as url:
        calls = {
            "vllm": (f"http://127.0.0.1:{port}", classify, "/classify"),
            "ours-classify": (url, classify, "/classify"),
            "ours-outcome": (url, outcome, "/v1/judge/outcome"),
        }
        for base, body, path in calls.values():  # warm-up, not counted
            await rate(base, warm, args.concurrency, body, path)
        rounds = []
        for k, order in enumerate(bench.rotated(MODES, args.runs)):
            rates: dict[str, float] = {}
            for mode in order:
                await asyncio.sleep(PAUSE_S)
                base, body, path = calls[mode]
                rates[mode] = await rate(base, work, args.concurrency, body, path)
            rates["ours_classify_over_vllm"] = rates["ours-classify"] / rates["vllm"]
            rates["ours_outcome_over_vllm"] = rates["ours-outcome"] / rates["vllm"]
            print(
                f"round {k + 1}/{args.runs}: judgments/s vLLM {rates['vllm']:.2f}, ours "
                f"/classify {rates['ours-classify']:.2f} ({rates['ours_classify_over_vllm']:.3f}x), "
                f"ours outcome {rates['ours-outcome']:.2f} ({rates['ours_outcome_over_vllm']:.3f}x)"
            )
            rounds.append(rates)
    return rounds


Steps = tuple[str, tuple[str, ...]]


async def process_figures(url: str, items: list[Steps], conc: int) -> dict[str, float]:
    """Solutions/s and per-solution usage of /v1/judge/process over given steps."""
    usage: list[dict[str, int]] = []
    async with client(url, conc) as http:

        async def one(item: Steps) -> None:
            r = await http.post(
                "/v1/judge/process", json={"question": item[0], "steps": list(item[1])}
            )
            r.raise_for_status()
            usage.append(r.json()["usage"])

        await one(items[0])  # warm-up, not counted
        usage.clear()
        rate = await drive(items, conc, one)

    def per(key: str) -> float:
        return sum(u[key] for u in usage) / len(usage)

    return {
        "solutions_per_s": rate,
        "prompt_tokens": per("prompt_tokens"),
        "generated_tokens": per("generated_tokens"),
        "cached_tokens": per("cached_tokens"),
        "engine_calls": per("engine_calls"),
    }


async def prm_vs_generative(
    prm: Path, pairs: list[Pair], conc: int, out: Path
) -> dict[str, dict[str, float]]:
    items: list[Steps] = []
    for q, a in pairs:
        # GSM8K solutions write one step per line (the heuristic splitter wants blank lines).
        steps = [line.strip() for line in a.splitlines() if line.strip()]
        items.append((q, tuple(steps)))
    figures: dict[str, dict[str, float]] = {}
    with ours(prm, out / "service_prm.log") as url:
        figures["prm"] = await process_figures(url, items, conc)
    with ours(None, out / "service_generative.log") as url:
        figures["generative"] = await process_figures(url, items, conc)
    figures["steps_per_solution"] = {"mean": sum(len(i[1]) for i in items) / len(items)}
    return figures


def parse_args() -> argparse.Namespace:
    p = bench.parser(NAME, __doc__, runs=5, smoke={"runs": 1, "questions": 2, "layers": 2})
    p.add_argument("--questions", type=int, default=16, help="GSM8K questions (x4 solutions)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--layers", type=int, default=30, help="layers of the built checkpoints")
    p.add_argument("--skip-prm", action="store_true", help="RM throughput only")
    return p.parse()


async def run(args: argparse.Namespace, rec: bench.Record) -> None:
    settings = Settings()
    work = load_pairs(settings, args.questions)
    warm = load_pairs(settings, 2, offset=args.questions)
    logs = args.out / "pooling_logs"
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rm = build_reward(Path(tmp) / "rm", layers=args.layers)
        prm = build_prm(Path(tmp) / "prm", layers=args.layers)
        runs = await rm_rounds(settings, rm, work, warm, args, logs)
        rec.config["judgments"] = len(work)
        rec.results["rm_runs"] = runs
        med = rec.results["rm_median"] = bench.medians(runs)
        print(
            f"median: ours /classify / vLLM {med['ours_classify_over_vllm']:.3f} (target >= "
            f"0.95), ours outcome / vLLM {med['ours_outcome_over_vllm']:.3f}"
        )
        if not args.skip_prm:
            fig = await prm_vs_generative(prm, work, args.concurrency, logs)
            rec.results["prm_vs_generative"] = fig
            for name in ("prm", "generative"):
                f = fig[name]
                print(
                    f"{name}: {f['solutions_per_s']:.2f} solutions/s, per solution "
                    f"{f['prompt_tokens']:.0f} prompt + {f['generated_tokens']:.1f} generated "
                    f"tokens, {f['engine_calls']:.1f} engine calls"
                )


def main() -> int:
    args = parse_args()
    keys = ("questions", "concurrency", "layers", "runs", "skip_prm")
    rec = bench.record(NAME, args, config={k: getattr(args, k) for k in keys})
    asyncio.run(run(args, rec))
    bench.write(rec, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
