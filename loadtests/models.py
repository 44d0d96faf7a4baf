"""Two models behind one API: what routing by model costs, and how two models share a machine.

Two servers, each fresh, in the same run (their order rotates from run to run):
- ``single``: the service as it ships, one model (the embedded default judge);
- ``two``: ``VERIFIER_MODELS`` naming that judge and a sequence reward model of the same depth
  built here from random weights (``loadtests.checkpoints.build_reward``), both engines in the
  one server process.

On each: direct judgments one at a time (their p50 latency; ``two``'s name the judge), then the
judge's closed-loop throughput for a window. On ``two`` also the RM's alone, then both at once
(each with its own clients). Printed per run, with their median over the runs:
- ``routing_p50_ms``: the judge's p50 on ``two`` minus on ``single`` (what the model routing,
  and a second, idle engine in the process, add to a judgment);
- ``judge_two_over_single``: the judge's throughput on ``two`` over ``single``;
- ``judge_mixed_over_alone``, ``rm_mixed_over_alone``: each model's throughput beside the other
  over alone, and ``share_sum``, their sum (1.0: the machine is shared without loss);
- ``uss_gib``: each server's memory (unique set size of its process tree) after its phases.

Every phase judges pairs no other phase judges (vLLM's prefix cache would favour a repeat);
the judgment cache is off.

    verifier bench models                  # 3 runs, 20 s windows
    verifier bench models --runs 1 --window 10
    verifier bench models --bind split     # each model's engine on its own half of the cores
    verifier bench models --smoke          # one run of seconds, an RM of 2 layers
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Final

import httpx
import psutil

from loadtests import bench, harness, phases
from loadtests.workload import Pair, load_pairs
from service.config import Settings

NAME: Final = "models"
SERVERS: Final = ("single", "two")
# Question slices of the GSM8K file (4 pairs each), one per phase: no pair is judged twice.
SLICES: Final = {
    "latency": 0,
    "judge_alone": 20,
    "rm_alone": 340,
    "judge_mixed": 660,
    "rm_mixed": 980,
}
SLICE_QUESTIONS: Final = 300
SMOKE: Final = {"runs": 1, "window": 2.0, "latency_pairs": 4, "concurrency": 2, "rm_layers": 2}


def parse_args() -> argparse.Namespace:
    ap = bench.parser(NAME, __doc__, runs=3, smoke=SMOKE)
    ap.add_argument("--window", type=float, default=20.0, help="seconds of each throughput phase")
    ap.add_argument("--concurrency", type=int, default=8, help="clients per model")
    ap.add_argument("--latency-pairs", type=int, default=40, help="judgments one at a time")
    ap.add_argument("--rm-layers", type=int, default=30, help="the RM's depth (the judge's: 30)")
    ap.add_argument(
        "--bind",
        choices=["shared", "split"],
        default="shared",
        help="two's engines: shared, every core each (the default setting); split, each model "
        "its own half of the cores (engine.cpu_threads_bind; record models_split.json)",
    )
    args = ap.parse()
    if args.runs < 1 or args.window <= 0 or args.concurrency < 1 or args.latency_pairs < 1:
        ap.error("--runs, --window, --concurrency and --latency-pairs must be positive")
    return args


async def window(
    seconds: float, concurrency: int, pairs: Sequence[Pair], one: Callable[[Pair], Awaitable[Any]]
) -> dict[str, float]:
    """Closed-loop clients for ``seconds``: judgments finished within it per second, and how
    many pairs had to be taken a second time (0 unless the slice ran out)."""
    end = time.perf_counter() + seconds
    done = 0
    taken = 0

    async def client() -> None:
        nonlocal done, taken
        while time.perf_counter() < end:
            pair = pairs[taken % len(pairs)]
            taken += 1
            await one(pair)
            if time.perf_counter() <= end:
                done += 1

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return {
        "rate": done / seconds,
        "repeats": max(0, taken - len(pairs)),
        "s": time.perf_counter() - start,
    }


async def latencies(c: httpx.AsyncClient, pairs: Sequence[Pair], **extra: Any) -> list[float]:
    out = []
    for pair in pairs:
        start = time.perf_counter()
        await phases.judge(c, pair, **extra)
        out.append(time.perf_counter() - start)
    return out


def halves(cores: Sequence[int]) -> tuple[str, str]:
    """Two disjoint CPU lists (vLLM's bind syntax) splitting ``cores``."""
    if len(cores) < 2:
        raise SystemExit("--bind split needs two cores at least")
    mid = len(cores) // 2
    return ",".join(map(str, cores[:mid])), ",".join(map(str, cores[mid:]))


def uss_gib(pid: int | None) -> float | None:
    """The unique set size of a server's process tree (vLLM's engine processes included)."""
    if pid is None:
        return None
    total = 0
    with suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with suppress(psutil.Error):
                total += proc.memory_full_info().uss
    return total / 2**30


async def measure(
    server: str, url: str, pid: int | None, args: argparse.Namespace, work: dict[str, list[Pair]]
) -> dict[str, float]:
    """One server's phases: latency, the judge alone and, on ``two``, the RM alone and both."""
    conc, secs = args.concurrency, args.window
    judge = {"model": "judge"} if server == "two" else {}
    out: dict[str, float] = {}
    async with phases.client(url, 2 * conc) as c:
        await latencies(c, work["warm"], **judge)
        lat = await latencies(c, work["latency"], **judge)
        out["p50_ms"] = 1000 * statistics.median(lat)
        r = await window(secs, conc, work["judge_alone"], lambda p: phases.judge(c, p, **judge))
        out["judge_alone"], out["repeats"] = r["rate"], r["repeats"]
        if server == "two":
            await latencies(c, work["warm"], model="rm")
            r = await window(secs, conc, work["rm_alone"], lambda p: phases.judge(c, p, model="rm"))
            out["rm_alone"], out["repeats"] = r["rate"], out["repeats"] + r["repeats"]
            both = await asyncio.gather(
                window(secs, conc, work["judge_mixed"], lambda p: phases.judge(c, p, **judge)),
                window(secs, conc, work["rm_mixed"], lambda p: phases.judge(c, p, model="rm")),
            )
            out["judge_mixed"], out["rm_mixed"] = both[0]["rate"], both[1]["rate"]
            out["repeats"] += both[0]["repeats"] + both[1]["repeats"]
    uss = uss_gib(pid)
    if uss is not None:
        out["uss_gib"] = uss
    return out


def ratios(single: dict[str, float], two: dict[str, float]) -> dict[str, float]:
    out = {
        "routing_p50_ms": two["p50_ms"] - single["p50_ms"],
        "judge_two_over_single": two["judge_alone"] / single["judge_alone"],
        "judge_mixed_over_alone": two["judge_mixed"] / two["judge_alone"],
        "rm_mixed_over_alone": two["rm_mixed"] / two["rm_alone"],
    }
    out["share_sum"] = out["judge_mixed_over_alone"] + out["rm_mixed_over_alone"]
    return out


def print_run(
    k: int, runs: int, by_server: dict[str, dict[str, float]], r: dict[str, float]
) -> None:
    print(f"  run {k}/{runs}:")
    for server, m in by_server.items():
        parts = [f"p50 {m['p50_ms']:.1f} ms", f"judge alone {m['judge_alone']:.2f}/s"]
        if "rm_alone" in m:
            parts += [
                f"rm alone {m['rm_alone']:.2f}/s",
                f"mixed judge {m['judge_mixed']:.2f}/s + rm {m['rm_mixed']:.2f}/s",
            ]
        if "uss_gib" in m:
            parts.append(f"USS {m['uss_gib']:.2f} GiB")
        print(f"    {server:<7} " + ", ".join(parts))
    print_ratios(r)


def print_ratios(r: dict[str, float]) -> None:
    print(f"    routing_p50_ms          {r['routing_p50_ms']:+7.2f}")
    for key in (
        "judge_two_over_single",
        "judge_mixed_over_alone",
        "rm_mixed_over_alone",
        "share_sum",
    ):
        print(f"    {key:<23} {r[key]:7.3f}")


async def main() -> None:
    args = parse_args()
    settings = Settings()
    from loadtests.checkpoints import build_reward

    rm_dir = build_reward(Path(args.out) / "models_rm", layers=args.rm_layers)
    entries: list[dict[str, Any]] = [{"name": "judge"}, {"name": "rm", "model": str(rm_dir)}]
    if args.bind == "split":
        for entry, cores in zip(entries, halves(sorted(os.sched_getaffinity(0))), strict=True):
            entry["engine"] = {"cpu_threads_bind": cores}
    two_env = {"VERIFIER_MODELS": json.dumps(entries)}
    questions = 5 if args.smoke else SLICE_QUESTIONS
    work = {name: load_pairs(settings, questions, offset) for name, offset in SLICES.items()}
    work["latency"] = load_pairs(settings, (args.latency_pairs + 3) // 4, SLICES["latency"])[
        : args.latency_pairs
    ]
    work["warm"] = load_pairs(settings, 1, 1300)
    orders = bench.rotated(SERVERS, args.runs)
    rec = bench.record(
        NAME if args.bind == "shared" else f"{NAME}_split",
        args,
        config={
            "models": entries,
            "window_s": args.window,
            "concurrency_per_model": args.concurrency,
            "latency_pairs": len(work["latency"]),
            "rm_layers": args.rm_layers,
            "runs": args.runs,
            "orders": orders,
        },
    )
    print(
        f"judge alone, RM alone and both: {args.window:g} s windows, {args.concurrency} clients "
        f"a model; {len(work['latency'])} judgments one at a time; {args.runs} run(s)"
    )
    runs: list[dict[str, Any]] = []
    for k, order in enumerate(orders, 1):
        by_server: dict[str, dict[str, float]] = {}
        for server in order:
            env = two_env if server == "two" else {}
            log = Path(args.out) / f"models_{server}.log"
            with harness.service(None, log, env) as (url, pid):
                by_server[server] = await measure(server, url, pid, args, work)
        r = ratios(by_server["single"], by_server["two"])
        runs.append({"servers": by_server, "ratios": r})
        print_run(k, args.runs, by_server, r)
    median = bench.medians([run["ratios"] for run in runs])
    print(f"  median over {len(runs)} run(s):")
    print_ratios(median)
    rec.results = {"runs": runs, "median": median}
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
