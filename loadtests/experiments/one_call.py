"""A reasoning judgment in one engine request vs two, on one in-process engine.

The same GSM8K judgments (greedy, ``reasoning_tokens`` 96) go through both paths of one
``VLLMEngine``: the verdict read inside the rationale's request (``engine.one_request``, in the
mode ``VERIFIER_ENGINE__ONE_CALL_MODE`` sets, with the fallback to a second request) and the
two-request path (``engine.judging.judge_one``). Printed:
how the one-request path ended each judgment (engine calls, rationale finish), the largest
|delta logit| and how many rationales, finishes and token counts were identical; then
judgments/s of closed-loop clients through each path, rounds alternating.

    python -m loadtests.experiments.one_call           # 16 questions x 4 solutions, 8 clients, 3 rounds
    python -m loadtests.experiments.one_call --smoke   # 2 questions, 1 round
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from loadtests import bench
from loadtests.workload import load_pairs
from service.config import Settings
from service.engine.base import GenerateCall, GenerateResult, JudgeCall, JudgeResult
from service.engine.judging import judge_one
from service.engine.models import resolve_model
from service.engine.vllm_engine import VLLMEngine
from service.scoring import prompts
from service.serving.outcome import judge_calls

JudgePath = Callable[[JudgeCall], Awaitable[JudgeResult]]


async def closed_loop(path: JudgePath, calls: list[JudgeCall], clients: int) -> float:
    """Judgments/s of ``clients`` clients working through ``calls``."""
    slots = asyncio.Semaphore(clients)

    async def one(call: JudgeCall) -> None:
        async with slots:
            await path(call)

    start = time.perf_counter()
    await asyncio.gather(*(one(c) for c in calls))
    return len(calls) / (time.perf_counter() - start)


def agreement(two: list[JudgeResult], one: list[JudgeResult]) -> dict[str, Any]:
    pairs = list(zip(two, one, strict=True))
    return {
        "judgments": len(pairs),
        "one_request_paths": dict(
            Counter(f"{r.usage.engine_calls} call(s), {r.rationale_finish}" for r in one)
        ),
        "max_abs_delta_logit": max(abs(a.logit - b.logit) for a, b in pairs),
        "same_rationale": sum(a.rationale == b.rationale for a, b in pairs),
        "same_finish": sum(a.rationale_finish == b.rationale_finish for a, b in pairs),
        "same_rationale_tokens": sum(a.rationale_tokens == b.rationale_tokens for a, b in pairs),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    engine = VLLMEngine.start(settings, resolve_model(settings))
    try:
        tok = engine.tokenizer
        calls = [
            judge_calls(prompts.outcome_prompt(tok, q, r, True), reasoning_tokens=96)[0]
            for q, r in load_pairs(settings, args.questions)
        ]

        async def generate(call: GenerateCall) -> GenerateResult:
            return (await engine.generate([call]))[0]

        async def two(call: JudgeCall) -> JudgeResult:
            return await judge_one(call, tok, engine._verdict, generate)

        async def one(call: JudgeCall) -> JudgeResult:
            return (await engine.judge([call]))[0]

        await asyncio.gather(*(p(c) for c in calls[:4] for p in (one, two)))  # warm-up
        out: dict[str, Any] = {
            "agreement": agreement(
                list(await asyncio.gather(*(two(c) for c in calls))),
                list(await asyncio.gather(*(one(c) for c in calls))),
            ),
            "rounds": [],
        }
        for k in range(args.rounds):
            order = [("one", one), ("two", two)] if k % 2 else [("two", two), ("one", one)]
            rates = {name: await closed_loop(path, calls, args.clients) for name, path in order}
            out["rounds"].append(rates)
        return out
    finally:
        await engine.shutdown()


def main() -> None:
    ap = bench.parser("one_call", __doc__, smoke={"questions": 2, "rounds": 1})
    ap.add_argument("--questions", type=int, default=16, help="GSM8K questions (x4 solutions)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="closed-loop rounds, order alternating")
    args = ap.parse()
    rec = bench.record("one_call", args, vars(args) | {"out": str(args.out)})
    result = asyncio.run(run(args))
    agree = result["agreement"]
    print(f"{agree['judgments']} reasoning judgments, one request vs two on one engine:")
    for path, n in agree["one_request_paths"].items():
        print(f"  one-request path: {path}: {n}")
    print(
        f"  max |delta logit| {agree['max_abs_delta_logit']:.2e}; identical rationale "
        f"{agree['same_rationale']}, finish {agree['same_finish']}, rationale tokens "
        f"{agree['same_rationale_tokens']}"
    )
    for k, rates in enumerate(result["rounds"], 1):
        print(
            f"  round {k}, {args.clients} clients: one request {rates['one']:.2f} judgments/s, "
            f"two {rates['two']:.2f} (one / two {rates['one'] / rates['two']:.3f})"
        )
    rec.results = result
    bench.write(rec, args)


if __name__ == "__main__":
    main()
