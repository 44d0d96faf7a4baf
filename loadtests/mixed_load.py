"""Mixed load: do direct judgments wait behind long rationales? Service vs vLLM's own server.

Workload (GSM8K pairs from gsm8k/example_model_solutions.jsonl; every request to the service
sends `cache: false`, so every judgment is scored afresh), on each server in turn:

1. warm-up, not measured: 4 sequential direct judgments, then one reasoning judgment per
   reasoning client, all at once (pairs of other questions);
2. idle: 1 client sends 40 sequential direct judgments, pausing 0.5 s between them;
3. loaded: 8 closed-loop clients send reasoning judgments (`mode: reasoning`,
   `reasoning_tokens: 96` unless --reasoning-tokens says otherwise, greedy); after a 5 s
   ramp, 1 client sends 40 sequential direct judgments on other pairs, pausing 0.5 s between
   them. Reasoning throughput is the number of reasoning judgments that finished between the
   first direct send and the last direct answer, divided by that window. The reasoning pairs
   come from 800 questions (--reasoning-questions) and none is judged twice in a run: a repeat
   would be read from the prefix cache, so a faster server would earn cheaper judgments (the
   run reports any repeat).

A run measures this service first, then vLLM's own OpenAI server (`python -m
vllm.entrypoints.openai.api_server`, built with the in-process engine's settings:
`harness.vllm_openai_server`), each in a fresh server process (with --url, the running
service given is this service's). vLLM's server gets the same pairs, their prompt ids made
before the clock starts:
- a direct judgment is one /v1/completions call that reads the verdict: `max_tokens` 1 with
  `logprob_token_ids` for the labels "1" and "0";
- a reasoning judgment generates exactly as many tokens as this service's reasoning judgments
  (all after its warm-up) wrote on average in the same run (`max_tokens = min_tokens =
  round(mean)`, `ignore_eos`, no stop string), then reads the verdict after prompt + generated
  ids + "\\nVerdict: " as above. The service's rationale length is its `usage.generated_tokens`
  less the one verdict token.

Reported per server: direct p50 idle and loaded, reasoning judgments/s over the window, mean
rationale tokens and mean engine calls per reasoning judgment (the service's `usage`), and what
vLLM's engine did in the window, read from its own counters on each server's /metrics: engine
steps/s, tokens per step, generated tokens per step (about the requests decoding in a step),
generated and computed prompt tokens/s, engine requests/s. Per run, the ratios ours / vLLM of
reasoning judgments/s (target >= 0.95) and of the loaded direct p50 (target <= 1.25), then the
median of each ratio over the runs. All of it is written to out/bench/mixed_load.json
(mixed_load.smoke.json with --smoke), also when a run fails.

    verifier bench mixed-load                  # 3 runs of both servers, median ratios
    verifier bench mixed-load --runs 1
    verifier bench mixed-load --servers ours   # one server only, no ratios
    verifier bench mixed-load --smoke [--url URL]   # 1 short run: 2 clients, 2 direct, 16 tokens
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from loadtests import bench, harness, metrics_text, phases
from loadtests.workload import Pair, load_pairs, pretokenize
from service.config import Settings
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env
from service.scoring import prompts

NAME: Final = "mixed_load"
# Warm-up questions start here; the measured ones are below it.
WARM_OFFSET: Final = 1000
REASONING_TOKENS: Final = 96
# 3,200 reasoning pairs: more than 8 judgments/s for the longest windows run here.
REASONING_QUESTIONS: Final = 800
# ours-2req: the service with engine.one_call_reasoning off (a second request reads each
# reasoning verdict), for the one-request path's own effect.
SERVERS: Final = (
    "ours",
    "ours-2req",
    "vllm",
)  # the order of every run: ours first, its mean sets vLLM's
TARGETS: Final = {"reasoning_per_s": ">= 0.95", "direct_p50_loaded": "<= 1.25"}
# The mechanics only: seconds of each server (their boots are most of the smoke's time).
SMOKE: Final = {
    "runs": 1,
    "reasoning_clients": 2,
    "direct": 2,
    "direct_gap_s": 0.2,
    "ramp_s": 1.0,
    "warm_direct": 1,
    "reasoning_tokens": 16,
    "reasoning_questions": 8,
}


@dataclass(frozen=True)
class Plan:
    """The shape of one server's measurement."""

    reasoning_clients: int
    direct: int  # sequential direct judgments, idle and again loaded
    direct_gap_s: float  # the pause between two direct judgments
    ramp_s: float  # the reasoning clients fill the engine before the window opens
    warm_direct: int
    reasoning_tokens: int  # the service's rationale budget
    reasoning_questions: int  # the reasoning clients' pairs: 4 a question, none repeated


@dataclass(frozen=True)
class Work:
    warm: list[Pair]  # warm-up of both paths (other questions)
    idle: list[Pair]
    loaded: list[Pair]
    reason: list[Pair]  # the reasoning clients cycle through these


@dataclass(frozen=True)
class Reasoned:
    rationale_tokens: int
    engine_calls: int


Direct = Callable[[Pair], Awaitable[None]]
Reason = Callable[[Pair], Awaitable[Reasoned]]


async def spaced(
    direct: Direct, pairs: list[Pair], gap_s: float
) -> tuple[list[float], float, float]:
    """Sequential direct judgments, ``gap_s`` apart: their latencies, the first send and the
    last answer (perf_counter)."""
    latencies = []
    first = time.perf_counter()
    for k, pair in enumerate(pairs):
        if k:
            await asyncio.sleep(gap_s)
        start = time.perf_counter()
        await direct(pair)
        latencies.append(time.perf_counter() - start)
    return latencies, first, time.perf_counter()


async def warm_up(direct: Direct, reason: Reason, plan: Plan, work: Work) -> None:
    for pair in work.warm[: plan.warm_direct]:
        await direct(pair)
    await asyncio.gather(*(reason(p) for p in work.warm[: plan.reasoning_clients]))


async def measure(
    direct: Direct, reason: Reason, plan: Plan, work: Work, scrape: metrics_text.Scrape
) -> dict[str, Any]:
    began = time.perf_counter()
    await warm_up(direct, reason, plan, work)
    idle, _, _ = await spaced(direct, work.idle, plan.direct_gap_s)
    done: list[tuple[float, Reasoned]] = []  # (finished at, what it took)
    stop = asyncio.Event()

    async def reasoner(k: int) -> None:
        i = k
        while not stop.is_set():
            result = await reason(work.reason[i % len(work.reason)])
            done.append((time.perf_counter(), result))
            i += plan.reasoning_clients
        sent[k] = i // plan.reasoning_clients  # pairs this client sent (k, k + clients, ...)

    sent = [0] * plan.reasoning_clients

    clients = [asyncio.create_task(reasoner(k)) for k in range(plan.reasoning_clients)]
    try:
        await asyncio.sleep(plan.ramp_s)
        engine = metrics_text.EngineWindow(scrape)
        await engine.open()
        loaded, start, end = await spaced(direct, work.loaded, plan.direct_gap_s)
        engine_window = await engine.close(end - start)
        stop.set()
        await asyncio.gather(*clients)  # each finishes the judgment it is in
    finally:
        for client in clients:
            client.cancel()
    in_window = [r for at, r in done if start <= at <= end]
    window_s = end - start
    per_s = len(in_window) / window_s
    return {
        "direct_p50_idle_ms": bench.median(idle) * 1000,
        "direct_p50_loaded_ms": bench.median(loaded) * 1000,
        "direct_max_loaded_ms": max(loaded) * 1000,
        "reasoning_per_s": per_s,
        "reasoning_done_in_window": len(in_window),
        "window_s": window_s,
        "reasoning_done": len(done),  # after the warm-up: ramp, window and the tail
        # judgments of a pair judged before in the run (prefix-cached): 0 unless too few pairs
        "reasoning_repeats": max(0, sum(sent) - len(work.reason)),
        "mean_rationale_tokens": statistics.fmean(r.rationale_tokens for _, r in done),
        "mean_engine_calls_per_reasoning": statistics.fmean(r.engine_calls for _, r in done),
        "measure_s": time.perf_counter() - began,  # warm-up to the end, server start not in it
        "engine": engine_window,
        # a reasoning judgment's time in the closed loop (clients / judgments/s), in steps
        "steps_per_reasoning": (
            plan.reasoning_clients / per_s * engine_window["steps_per_s"] if per_s else None
        ),
    }


async def run_ours(
    args: argparse.Namespace, plan: Plan, work: Work, run: int, *, two_requests: bool = False
) -> dict[str, Any]:
    # one_call_reasoning off needs a server of its own; the plain one may be running already
    env = {"VERIFIER_ENGINE__ONE_CALL_REASONING": "false"} if two_requests else {}
    log = args.out / f"mixed_service{'_2req' if two_requests else ''}_{run}.log"
    url = None if two_requests else args.url
    with harness.service(url, log, env) as (base, _):
        async with phases.client(base, plan.reasoning_clients + 1) as client:

            async def direct(pair: Pair) -> None:
                await phases.judge(client, pair)

            async def reason(pair: Pair) -> Reasoned:
                body = await phases.judge(
                    client,
                    pair,
                    mode="reasoning",
                    reasoning_tokens=plan.reasoning_tokens,
                    temperature=0,
                )
                usage = body["usage"]
                # generated_tokens counts the rationale and the one verdict token
                return Reasoned(int(usage["generated_tokens"]) - 1, int(usage["engine_calls"]))

            return await measure(direct, reason, plan, work, metrics_text.scrape_with(client))


class VLLMPrompts:
    """Every prompt vLLM's server gets, made once before any clock starts."""

    def __init__(self, tok: Any, work: Work) -> None:
        self.labels = phases.label_ids(tok)
        self.direct = pretokenize(tok, [*work.warm, *work.idle, *work.loaded])
        self.reason = {
            p: prompts.outcome_prompt(tok, p[0], p[1], True) for p in [*work.warm, *work.reason]
        }


async def run_vllm(
    args: argparse.Namespace, plan: Plan, work: Work, ids: VLLMPrompts, tokens: int, run: int
) -> dict[str, Any]:
    """``tokens``: the rationale length every reasoning judgment generates."""
    log = args.out / f"mixed_vllm_server_{run}.log"
    with phases.vllm_server(args.settings, args.model, log) as (url, _):
        async with phases.client(url, plan.reasoning_clients + 1) as client:

            async def direct(pair: Pair) -> None:
                await phases.verdict(client, ids.direct[pair], ids.labels)

            async def reason(pair: Pair) -> Reasoned:
                rendered = ids.reason[pair]
                body = {"prompt": rendered.prompt_ids, "max_tokens": tokens, "min_tokens": tokens}
                choice = await phases.completion(
                    client, {**body, "ignore_eos": True, "return_token_ids": True}
                )
                rationale = list(choice["token_ids"])
                prompt = [*rendered.prompt_ids, *rationale, *rendered.after_rationale_ids]
                await phases.verdict(client, prompt, ids.labels)
                return Reasoned(len(rationale), 2)

            return await measure(direct, reason, plan, work, metrics_text.scrape_with(client))


def ratio(ours: float, vllm: float) -> float | None:
    return ours / vllm if vllm > 0 else None  # None: vLLM finished nothing in the window


def ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """ours / vLLM of one run: reasoning judgments/s and the loaded direct p50."""
    ours, vllm = result["ours"], result["vllm"]
    return {
        "reasoning_per_s": ratio(ours["reasoning_per_s"], vllm["reasoning_per_s"]),
        "direct_p50_loaded": ratio(ours["direct_p50_loaded_ms"], vllm["direct_p50_loaded_ms"]),
    }


def print_run(k: int, runs: int, result: dict[str, Any], plan: Plan) -> None:
    print(
        f"\nrun {k}/{runs}: {plan.reasoning_clients} reasoning clients (reasoning_tokens "
        f"{plan.reasoning_tokens}) + 1 client of {plan.direct} direct judgments "
        f"{plan.direct_gap_s:g} s apart"
    )
    print(
        f"  {'server':<10} {'p50 idle ms':>12} {'p50 loaded ms':>14} {'reasoning/s':>12} "
        f"{'in window':>10} {'rationale tok':>14} {'engine calls':>13} {'measured s':>11}"
    )
    for name in SERVERS:
        if name in result:
            r = result[name]
            print(
                f"  {name:<10} {r['direct_p50_idle_ms']:12.0f} {r['direct_p50_loaded_ms']:14.0f} "
                f"{r['reasoning_per_s']:12.2f} {r['reasoning_done_in_window']:10d} "
                f"{r['mean_rationale_tokens']:14.1f} {r['mean_engine_calls_per_reasoning']:13.2f} "
                f"{r['measure_s']:11.1f}"
            )
    print(
        f"  {'engine':<10} {'steps/s':>8} {'tok/step':>9} {'gen/step':>9} {'gen tok/s':>10} "
        f"{'new prompt tok/s':>17} {'requests/s':>11} {'steps a reasoning':>18}"
    )
    for name in SERVERS:
        if name in result:
            e = result[name]["engine"]
            print(
                f"  {name:<10} {e['steps_per_s']:8.2f} {e['tokens_per_step']:9.1f} "
                f"{e['generation_tokens_per_step']:9.2f} {e['generation_tokens_per_s']:10.1f} "
                f"{e['computed_prompt_tokens_per_s']:17.1f} {e['engine_requests_per_s']:11.2f} "
                f"{fmt(result[name]['steps_per_reasoning']):>18}"
            )
    for name in SERVERS:
        if result.get(name, {}).get("reasoning_repeats"):
            print(
                f"  {name}: {result[name]['reasoning_repeats']} reasoning judgments repeated a "
                "pair (prefix-cached): raise --reasoning-questions"
            )
    if "vllm_rationale_tokens" in result:
        print(
            f"  vllm's reasoning judgments generated {result['vllm_rationale_tokens']} tokens each"
        )
    if "ratios" in result:
        print_ratios("  ours / vLLM:", result["ratios"])


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_ratios(head: str, r: dict[str, float | None]) -> None:
    print(
        f"{head} reasoning/s {fmt(r['reasoning_per_s'])} (target {TARGETS['reasoning_per_s']}), "
        f"loaded direct p50 {fmt(r['direct_p50_loaded'])} "
        f"(target {TARGETS['direct_p50_loaded']})"
    )


def median_ratios(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """The median of each ratio over the runs that have it."""
    out: dict[str, float | None] = {}
    for key in TARGETS:
        values = [run["ratios"][key] for run in runs if run["ratios"][key] is not None]
        out[key] = bench.median(values) if values else None
    return out


def print_summary(runs: list[dict[str, Any]]) -> None:
    print(f"\nours / vLLM over {len(runs)} run(s):")
    for k, run in enumerate(runs, 1):
        print_ratios(f"  run {k}:", run["ratios"])
    print_ratios("  median:", median_ratios(runs))


def direct_questions(direct: int) -> int:
    """Questions (4 pairs each) that hold the idle and the loaded direct judgments."""
    return math.ceil(2 * direct / 4)


def workload(settings: Settings, plan: Plan) -> Work:
    """Idle and loaded pairs apart, then ``plan.reasoning_questions`` questions (4 pairs each)
    for the reasoning clients, the warm-up on questions from ``WARM_OFFSET`` on. A reasoning
    pair judged twice would be read from the prefix cache the second time, so a faster server
    would earn cheaper judgments: there are enough pairs that none repeats in a run, and the
    run counts any that do."""
    first = direct_questions(plan.direct)
    pairs = load_pairs(settings, first + plan.reasoning_questions)
    d = plan.direct
    warm_questions = math.ceil(max(plan.warm_direct, plan.reasoning_clients) / 4)
    return Work(
        warm=load_pairs(settings, warm_questions, offset=WARM_OFFSET),
        idle=pairs[:d],
        loaded=pairs[d : 2 * d],
        reason=pairs[4 * first :],
    )


def parse_args() -> argparse.Namespace:
    ap = bench.parser(NAME, __doc__, runs=3, smoke=SMOKE)
    ap.add_argument(
        "--servers",
        default="ours,vllm",
        help="a comma list of ours, ours-2req (one_call_reasoning off), vllm; ours runs first",
    )
    ap.add_argument(
        "--url", help="a running service for ours (not ours-2req); none: start one per run here"
    )
    ap.add_argument("--reasoning-clients", type=int, default=8)
    # 40: a window of 30-50 s on a 2-core CPU, about 80-130 reasoning judgments in it
    ap.add_argument("--direct", type=int, default=40, help="sequential direct judgments")
    ap.add_argument("--direct-gap-s", type=float, default=0.5, help="pause between them")
    ap.add_argument("--ramp-s", type=float, default=5.0, help="reasoning alone before the window")
    ap.add_argument("--warm-direct", type=int, default=4, help="direct warm-up judgments")
    ap.add_argument(
        "--reasoning-questions",
        type=int,
        default=REASONING_QUESTIONS,
        help=f"GSM8K questions (4 pairs each) the reasoning clients judge, each pair once while "
        f"they last (default {REASONING_QUESTIONS})",
    )
    ap.add_argument(
        "--reasoning-tokens",
        type=int,
        default=REASONING_TOKENS,
        help=f"the service's rationale budget (default {REASONING_TOKENS})",
    )
    ap.add_argument(
        "--rationale-tokens",
        type=int,
        default=None,
        help="tokens a vLLM reasoning judgment generates; default: the service's mean in the "
        "same run (the budget when vllm runs alone)",
    )
    args = ap.parse()
    if args.runs < 1:
        ap.error("--runs: at least 1")
    if direct_questions(args.direct) + args.reasoning_questions > WARM_OFFSET:
        ap.error(f"--direct and --reasoning-questions: more than {WARM_OFFSET} questions")
    servers = set(args.servers.split(","))
    if not servers or not servers <= set(SERVERS):
        ap.error(f"--servers: {args.servers!r}: a comma list of {', '.join(SERVERS)}")
    args.servers = [s for s in SERVERS if s in servers]
    return args


async def one_run(
    args: argparse.Namespace, plan: Plan, work: Work, ids: VLLMPrompts | None, run: int
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if "ours" in args.servers:
        result["ours"] = await run_ours(args, plan, work, run)
    if "ours-2req" in args.servers:
        result["ours-2req"] = await run_ours(args, plan, work, run, two_requests=True)
    if ids is not None:
        tokens = args.rationale_tokens
        if tokens is None:
            mean = result["ours"]["mean_rationale_tokens"] if "ours" in result else None
            tokens = plan.reasoning_tokens if mean is None else round(mean)
        result["vllm_rationale_tokens"] = max(1, tokens)
        result["vllm"] = await run_vllm(args, plan, work, ids, result["vllm_rationale_tokens"], run)
    if {"ours", "vllm"} <= set(result):
        result["ratios"] = ratios(result)
    return result


async def main() -> None:
    args = parse_args()
    plan = Plan(*(getattr(args, f.name) for f in fields(Plan)))  # its fields are options
    args.settings = settings = Settings()
    args.model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    work = workload(settings, plan)
    ids = VLLMPrompts(phases.tokenizer(args.model), work) if "vllm" in args.servers else None
    rec = bench.record(
        NAME,
        args,
        config={
            **asdict(plan),
            "runs": args.runs,
            "rationale_tokens_given": args.rationale_tokens,
            "servers": args.servers,
            "service_url_given": bool(args.url),
        },
    )
    runs: list[dict[str, Any]] = []
    rec.results = {"targets": TARGETS, "runs": runs}
    try:
        for k in range(1, args.runs + 1):
            result = await one_run(args, plan, work, ids, k)
            runs.append(result)
            print_run(k, args.runs, result, plan)
            if "ratios" in result:
                rec.results["median_ratios"] = median_ratios(runs)
    finally:  # the runs that finished are kept even if a later one fails
        if "median_ratios" in rec.results:
            print_summary(runs)
        bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
