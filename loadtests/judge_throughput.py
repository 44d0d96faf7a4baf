"""Direct-judgment throughput: raw vLLM engine vs vLLM's OpenAI server vs this service.

Workload: the first 64 questions x 4 solutions of gsm8k/example_model_solutions.jsonl = 256
direct judgments, 32 concurrent clients. Each run starts every mode on a fresh engine (so the
workload's prefix cache is cold), with identical engine settings and identical prompt token
ids, and warms each with 8 judgments on other questions. Then the modes take turns: the work is
cut into ``--rounds`` slices of whole questions (default 4), and each slice goes through every
mode, one at a time, before the next slice, the order rotated from slice to slice
(``bench.rotated``). A machine whose speed drifts over minutes then slows every mode alike,
where one mode after the other put a minute of drift between them.

The whole measurement is repeated `--runs` times (default 3); each run's ratios ours / raw
(target >= 0.95) and ours / vLLM server (target >= 1.0) are printed with the CPU ms a judgment
of each server's front process (``FrontCPU``) and what each mode's engine did over its turns,
read from vLLM's own counters (engine steps a judgment, prompt tokens a step, the share of
prompt tokens read from the prefix cache), then their median over the runs, and all of it is
written to
out/bench/judge_throughput.json (judge_throughput_compiled.json with --compiled).

    verifier bench judge-throughput                # eager (the service default), 3 runs
    verifier bench judge-throughput --runs 1
    verifier bench judge-throughput --compiled     # torch.compile (slow start)
    verifier bench judge-throughput --modes ours   # one mode only
    verifier bench judge-throughput --smoke [--url URL]   # raw and ours, 8 judgments, 1 run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final

import psutil

from loadtests import bench, harness, metrics_text, phases
from loadtests.workload import Pair, drive, load_pairs, pretokenize
from service.config import Settings
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env

NAME: Final = "judge_throughput"
NAMES: Final = {
    "raw": "raw in-process engine",
    "vllm": "vLLM OpenAI server",
    "ours": "verifier-service",
}
# ours / baseline: the ratio's name, its baseline and its target
RATIOS: Final = (("ours_over_raw", "raw", 0.95), ("ours_over_vllm", "vllm", 1.0))
# CPU ms a judgment of the server's front process (HTTP, and for the service its queue, prompts
# and tokenization; not the engine's processes): these two share the machine's cores with the
# forward pass, and the figure does not move with the machine's speed as the rates do.
FRONT: Final = {
    "vllm_front_cpu_ms": "vLLM server's front process",
    "ours_front_cpu_ms": "service's process",
}
# What each mode's engine did over its turns (vLLM's counters; the raw engine's are in this
# process's registry): the same work in more steps, or with fewer prefix-cache hits, is slower.
ENGINE: Final = {
    "steps_a_judgment": "engine steps a judgment",
    "tokens_a_step": "prompt tokens a step",
    "cached_share": "share of prompt tokens cached",
}
# The mechanics only: no vLLM server (remote-engine's smoke covers that phase), a few judgments.
SMOKE: Final = {"runs": 1, "questions": 2, "concurrency": 4, "modes": "raw,ours"}
# vLLM's engine processes busy-poll their queues for 1 s after their last message (its
# shm_broadcast ``busy_loop_s``): a mode's turn starts once the one before is quiet.
QUIET_S: Final = 2.0


def parse_args() -> argparse.Namespace:
    ap = bench.parser(NAME, __doc__, runs=3, smoke=SMOKE)
    ap.add_argument("--questions", type=int, default=64, help="questions (x4 solutions)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument(
        "--rounds", type=int, default=4, help="slices of the work the modes take turns on"
    )
    ap.add_argument("--modes", default="raw,vllm,ours", help="a comma list of raw, vllm, ours")
    ap.add_argument("--compiled", action="store_true", help="torch.compile instead of eager")
    ap.add_argument(
        "--url",
        help="a running service for the ours mode (its cache is not cold); none: start one "
        "per run here",
    )
    args = ap.parse()
    if args.runs < 1 or args.rounds < 1:
        ap.error("--runs and --rounds: at least 1")
    args.modes = [m for m in NAMES if m in args.modes.split(",")]
    if not args.modes:
        ap.error(f"--modes: a comma list of {', '.join(NAMES)}")
    return args


async def one_run(
    args: argparse.Namespace,
    settings: Settings,
    model: str,
    order: tuple[str, ...],
    work: list[Pair],
    warm: list[Pair],
) -> dict[str, float]:
    """Every mode on its own fresh engine, all up at once and taking turns: ``work`` in
    ``args.rounds`` slices of whole questions, each slice through every mode (the order rotated
    from slice to slice) before the next; a mode's rate is its judgments over its time."""
    conc = args.concurrency
    async with contextlib.AsyncExitStack() as stack:
        ones: dict[str, Judge] = {}
        pids: dict[str, int | None] = {}
        scrapes: dict[str, metrics_text.Scrape] = {}
        for mode in order:  # one start at a time: a start's imports would slow another's
            ones[mode], pids[mode], scrapes[mode] = await _open(
                stack, args, settings, model, mode, work + warm
            )
        for mode in order:
            await drive(warm, conc, ones[mode])  # the untimed warm-up
        seconds = dict.fromkeys(order, 0.0)
        cpu_ms = dict.fromkeys(order, 0.0)
        counts: dict[str, Counter[str]] = {mode: Counter() for mode in order}
        slices = _slices(work, args.rounds)
        for part, turn in zip(slices, bench.rotated(order, len(slices)), strict=True):
            for mode in turn:
                await asyncio.sleep(QUIET_S)  # the mode before is quiet (see QUIET_S)
                engine = metrics_text.EngineWindow(scrapes[mode])
                await engine.open()
                with FrontCPU(pids[mode], len(part)) as cpu:
                    seconds[mode] += len(part) / await drive(part, conc, ones[mode])
                cpu_ms[mode] += cpu.ms * len(part)
                counts[mode].update(await engine.delta())
    rates = {mode: len(work) / seconds[mode] for mode in order}
    for mode, key in (("vllm", "vllm_front_cpu_ms"), ("ours", "ours_front_cpu_ms")):
        if mode in order and pids[mode] is not None:
            rates[key] = cpu_ms[mode] / len(work)
    for mode in order:
        rates.update(_engine_figures(mode, counts[mode], len(work)))
    engine_keys = [f"{mode}_{key}" for mode in NAMES for key in ENGINE]
    rates = {k: rates[k] for k in (*NAMES, *FRONT, *engine_keys) if k in rates}  # table order
    for name, base, _ in RATIOS:
        if "ours" in rates and base in rates:
            rates[name] = rates["ours"] / rates[base]
    return rates


Judge = Callable[[Pair], Awaitable[Any]]


def _engine_figures(mode: str, c: Counter[str], judgments: int) -> dict[str, float]:
    """``ENGINE``'s figures of one mode from its engine's counters over its turns."""
    steps, prompt = max(c["steps"], 1.0), max(c["prompt_tokens"], 1.0)
    return {
        f"{mode}_steps_a_judgment": c["steps"] / judgments,
        f"{mode}_tokens_a_step": (c["prompt_tokens"] - c["cached_prompt_tokens"]) / steps,
        f"{mode}_cached_share": c["cached_prompt_tokens"] / prompt,
    }


async def _open(
    stack: contextlib.AsyncExitStack,
    args: argparse.Namespace,
    settings: Settings,
    model: str,
    mode: str,
    pairs: list[Pair],
) -> tuple[Judge, int | None, metrics_text.Scrape]:
    """``mode``'s server, up until ``stack`` closes: one judgment, the pid of the front
    process whose CPU is measured (None: none, or a service this run did not start), and its
    engine's /metrics page."""
    if mode == "raw":
        judge = stack.enter_context(phases.raw_judge(settings, model, pairs))
        return judge, None, metrics_text.scrape_here()
    if mode == "vllm":
        tok = phases.tokenizer(model)
        ids, labels = pretokenize(tok, pairs), phases.label_ids(tok)
        url, pid = stack.enter_context(
            phases.vllm_server(settings, model, args.out / "vllm_server.log")
        )
        c = await stack.enter_async_context(phases.client(url, args.concurrency))
        return (lambda p: phases.verdict(c, ids[p], labels)), pid, metrics_text.scrape_with(c)
    env = {"VERIFIER_ENGINE__ENFORCE_EAGER": "false"} if args.compiled else {}
    url, spid = stack.enter_context(harness.service(args.url, args.out / "service.log", env))
    sc = await stack.enter_async_context(phases.client(url, args.concurrency))
    return (lambda p: phases.judge(sc, p)), spid, metrics_text.scrape_with(sc)


def _slices(work: list[Pair], rounds: int) -> list[list[Pair]]:
    """``work`` in at most ``rounds`` consecutive slices of whole questions (a question's
    solutions share its prompt's prefix, so they stay in one slice as in one long run)."""
    questions: dict[str, list[Pair]] = {}
    for pair in work:
        questions.setdefault(pair[0], []).append(pair)
    groups = list(questions.values())
    k = min(rounds, len(groups))
    return [
        [p for g in groups[i * len(groups) // k : (i + 1) * len(groups) // k] for p in g]
        for i in range(k)
    ]


class FrontCPU:
    """CPU time (user + system) of one process, its children not counted, over a block: ``ms``
    a judgment of ``judgments``; no pid (a service this run did not start): nan."""

    def __init__(self, pid: int | None, judgments: int) -> None:
        self._proc = psutil.Process(pid) if pid is not None else None
        self._judgments = judgments
        self._start = 0.0
        self.ms = math.nan

    def _cpu_s(self) -> float:
        assert self._proc is not None
        times = self._proc.cpu_times()
        return float(times.user + times.system)

    def __enter__(self) -> FrontCPU:
        if self._proc is not None:
            self._start = self._cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and exc[0] is None:
            self.ms = 1000 * (self._cpu_s() - self._start) / self._judgments


def print_run(k: int, runs: int, rates: dict[str, float]) -> None:
    print(f"  run {k}/{runs}:")
    for key, name in NAMES.items():
        if key in rates:
            print(f"    {name:<24} {rates[key]:7.2f} judgments/s")
    for key, name in FRONT.items():
        if key in rates:
            print(f"    {name:<28} {rates[key]:5.2f} CPU ms a judgment")
    for mode, name in NAMES.items():
        figures = [f"{rates[f'{mode}_{k}']:.3g} {what}" for k, what in ENGINE.items()
                   if f"{mode}_{k}" in rates]  # fmt: skip
        if figures:
            print(f"    {name:<24} engine: {', '.join(figures)}")
    print_ratios(rates)


def print_ratios(rates: dict[str, float]) -> None:
    for name, _, target in RATIOS:
        if name in rates:
            print(f"    {name:<24} {rates[name]:7.3f}   (target >= {target})")


async def main() -> None:
    args = parse_args()
    settings = Settings()
    settings.engine.enforce_eager = not args.compiled
    model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    work = load_pairs(settings, args.questions)
    warm = load_pairs(settings, 2, offset=1000)
    mode = "compiled" if args.compiled else "eager"
    orders = bench.rotated(args.modes, args.runs)
    rec = bench.record(
        f"{NAME}_compiled" if args.compiled else NAME,  # both kept side by side
        args,
        config={
            "judgments": len(work),
            "concurrency": args.concurrency,
            "mode": mode,
            "modes": args.modes,
            "runs": args.runs,
            "rounds": args.rounds,
            "orders": orders,
            "warm_judgments": len(warm),
            "service_url_given": bool(args.url),
        },
    )
    print(
        f"{len(work)} direct judgments, {args.concurrency} concurrent clients, {mode}, "
        f"cold prefix cache, {args.runs} run(s)"
    )
    runs: list[dict[str, float]] = []
    for k, order in enumerate(orders, 1):
        runs.append(await one_run(args, settings, model, order, work, warm))
        print_run(k, args.runs, runs[-1])
    median = bench.medians(runs)
    if len(runs) > 1:
        print("\n  ratios per run:")
        for k, rates in enumerate(runs, 1):
            print(f"  run {k}:")
            print_ratios(rates)
    print(f"  median over {len(runs)} run(s):")
    print_ratios(median)
    for key, name in FRONT.items():
        if key in median:
            print(f"    {name:<28} {median[key]:5.2f} CPU ms a judgment")
    rec.results = {
        "targets": {name: f">= {target}" for name, _, target in RATIOS},
        "runs": runs,
        "median": median,
    }
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
