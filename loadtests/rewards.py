"""Rewards for RL trainers: GRPO-shaped bursts through POST /get_reward, rule vs hybrid vs model.

A burst is what one GRPO step sends: P prompts x G completions (default 8 x 16 = 128 queries)
in ONE /get_reward call, in OpenRLHF's shape: ``query`` = the prompt rendered with the model's
chat template + the completion (+ the end-of-turn token), ``prompts`` = the rendered prompts (so
the service cuts exactly there), ``labels`` = each item's reference (its GSM8K reference
solution, or with ``--labels answer`` its final answer). The completions are the GSM8K labelled
solutions (gsm8k/example_model_solutions.jsonl, 4 per question) cycled to G; a repeat gets an
``Attempt k:`` line in front, so no two queries are the same text, and every call sends
``"cache": false`` so the judgment cache cannot answer.

The same bursts run for ``verifier`` rule, hybrid and model, one call at a time: first a
warm-up call per verifier (each on a burst of its own, other items, not timed), then each
timed burst through the three in an order rotated from burst to burst (rule-hybrid-model,
hybrid-model-rule, model-rule-hybrid), so a drifting machine, warm caches or prompts the
previous call left in vLLM's prefix cache favour none of them. Per verifier: rewards/s (queries / wall time of the
call, median over bursts), p50/p99 latency of the calls, the share decided by rule
(``extra_logs.decided_by_rule``), tokens and engine calls per reward, and accuracy against the
solutions' ``is_correct`` labels (reward >= 0.5 = "correct"; a query the rule leaves undecided
counts as a miss). Where the time goes: the server's own time per call (its request-duration
metric) against the client's wall time, the server's CPU seconds by process (the `verifier
serve` process, the rule-check pool, the engine; when this run started the server), and what
a rule check costs outside the service: called here one by one, and through the service's
rule-check pool (wall time and CPU per check, in the pool's workers and in the process that
schedules them).

    verifier bench rewards                                   # starts one `verifier serve`
    verifier bench rewards --url http://127.0.0.1:8000       # a running service
    verifier bench rewards --smoke                           # 2 x 2, one burst: seconds
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import psutil

from loadtests import bench
from loadtests.harness import service
from loadtests.metrics_text import has_sample, sample_sum
from loadtests.stats import final_answer, percentile
from loadtests.workload import chat_renderer, distinct
from service.config import Settings
from service.scoring.bestofn import BestOfNItem

NAME: Final = "rewards"
VERIFIERS: Final = ("rule", "hybrid", "model")
RULE_TARGET_PER_S: Final = 1000.0  # rule-only rewards/s per API process
HYBRID_TARGET_RATIO: Final = 10.0  # hybrid rewards/s over model-only, accuracy no lower
THRESHOLD: Final = 0.5  # a reward at or above it says "correct"
DURATION_SUM: Final = "verifier_request_duration_seconds"
QUEUE_WAIT: Final = "verifier_queue_wait_seconds"


# --- bursts (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """Where one query came from: item, solver (candidate index), the ``Attempt k:`` line in
    front (0: none), its label."""

    item: int
    candidate: int
    attempt: int
    is_correct: bool


@dataclass(frozen=True, slots=True)
class Burst:
    """One /get_reward call's lists, aligned; ``items`` are the data indices it covers."""

    items: tuple[int, ...]
    query: tuple[str, ...]
    prompts: tuple[str, ...]
    labels: tuple[str, ...]
    completions: tuple[str, ...]
    samples: tuple[Sample, ...]

    def body(self, verifier_kind: str) -> dict[str, Any]:
        return {
            "query": list(self.query),
            "prompts": list(self.prompts),
            "labels": list(self.labels),
            "verifier": verifier_kind,
            "cache": False,
        }

    def pairs(self) -> list[tuple[str, str]]:
        """(completion, label) of each query: what a rule check compares."""
        return list(zip(self.completions, self.labels, strict=True))


def label_of(item: BestOfNItem, kind: str) -> str:
    """The reference sent as the label: the reference solution, or its final answer."""
    if kind == "solution":
        return item.ground_truth
    answer = final_answer(item.ground_truth)
    if answer is None:
        raise ValueError(f"no final answer in the reference solution {item.ground_truth!r}")
    return answer


def make_burst(
    items: Sequence[BestOfNItem],
    first: int,
    completions: int,
    render: Callable[[str], str],
    end: str = "",
    labels: str = "solution",
) -> Burst:
    """``completions`` completions for each of ``items`` (data indices from ``first``): the
    candidates cycled, a repeated text made distinct (`distinct`); query = rendered prompt +
    completion + ``end``."""
    query, prompts, refs, texts, samples = [], [], [], [], []
    for offset, item in enumerate(items):
        prompt = render(item.question)
        label = label_of(item, labels)
        seen: set[str] = set()
        for j in range(completions):
            k = j % len(item.candidates)
            cand = item.candidates[k]
            text, attempt = distinct(cand.solution, seen)
            query.append(prompt + text + end)
            prompts.append(prompt)
            refs.append(label)
            texts.append(text)
            samples.append(Sample(first + offset, k, attempt, cand.is_correct))
    span = tuple(range(first, first + len(items)))
    return Burst(span, tuple(query), tuple(prompts), tuple(refs), tuple(texts), tuple(samples))


def make_bursts(
    items: Sequence[BestOfNItem],
    prompts: int,
    completions: int,
    bursts: int,
    render: Callable[[str], str],
    end: str = "",
    labels: str = "solution",
) -> list[Burst]:
    """``bursts`` bursts of ``prompts`` items each, in data order: no item is in two bursts."""
    need = prompts * bursts
    if len(items) < need:
        raise ValueError(f"{need} items needed for {bursts} bursts, {len(items)} read")
    return [
        make_burst(
            items[b * prompts : (b + 1) * prompts], b * prompts, completions, render, end, labels
        )
        for b in range(bursts)
    ]


# --- results (pure) ----------------------------------------------------------------------------


def burst_record(burst: Burst, call: dict[str, Any]) -> dict[str, Any]:
    """What one call returned and cost, per query and in total (JSON-ready)."""
    body = call["body"]
    n = len(burst.query)
    logs = body.get("extra_logs") or {}
    return {
        "items": list(burst.items),
        "queries": n,
        "wall_s": call["wall_s"],
        "rewards_per_s": n / call["wall_s"],
        "client_json_s": call["client_json_s"],
        "server_s": call.get("server_s"),
        "queue_wait_s": call.get("queue_wait_s"),
        "server_cpu_s": call.get("server_cpu_s"),
        "usage": body["usage"],
        "rewards": body["rewards"],
        "decided_by_rule": logs.get("decided_by_rule", [0.0] * n),
        "is_correct": [s.is_correct for s in burst.samples],
        "candidate": [s.candidate for s in burst.samples],
    }


def hits(verifier_kind: str, record: dict[str, Any]) -> tuple[int, int]:
    """(decided, right) of one burst: a reward >= 0.5 says correct; rule-only undecided
    queries are decided by nobody and never right."""
    decided = right = 0
    for reward, by_rule, truth in zip(
        record["rewards"], record["decided_by_rule"], record["is_correct"], strict=True
    ):
        if verifier_kind == "rule" and not by_rule:
            continue
        decided += 1
        right += (reward >= THRESHOLD) == truth
    return decided, right


def summarize(verifier_kind: str, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One verifier's figures over its timed bursts."""
    n = sum(r["queries"] for r in records)
    by_rule = int(sum(sum(r["decided_by_rule"]) for r in records))
    decided = right = 0
    for r in records:
        d, ok = hits(verifier_kind, r)
        decided, right = decided + d, right + ok
    tokens = sum(int(r["usage"]["total_tokens"]) for r in records)
    calls = sum(int(r["usage"]["engine_calls"]) for r in records)
    walls_ms = [1000.0 * r["wall_s"] for r in records]
    servers = [r["server_s"] for r in records if r["server_s"] is not None]
    waits = [r["queue_wait_s"] for r in records if r["queue_wait_s"] is not None]
    return {
        "queries": n,
        "bursts": len(records),
        "rewards_per_s": bench.median(r["rewards_per_s"] for r in records),
        "rewards_per_s_each": [r["rewards_per_s"] for r in records],
        "latency_ms": {"p50": percentile(walls_ms, 50), "p99": percentile(walls_ms, 99)},
        "decided_by_rule": by_rule,
        "decided_by_rule_share": by_rule / n,
        "decided_by_model": 0 if verifier_kind == "rule" else n - by_rule,
        "undecided": n - decided,
        "correct": right,
        "accuracy": right / n,
        "accuracy_of_decided": right / decided if decided else None,
        "total_tokens": tokens,
        "engine_calls": calls,
        "tokens_per_reward": tokens / n,
        "engine_calls_per_reward": calls / n,
        "mean_wall_ms": statistics.fmean(walls_ms),
        "mean_server_ms": 1000.0 * statistics.fmean(servers) if servers else None,
        "mean_queue_wait_ms": 1000.0 * statistics.fmean(waits) if waits else None,
        "mean_client_json_ms": 1000.0 * statistics.fmean(r["client_json_s"] for r in records),
        "server_cpu_s": _cpu_totals(records),
    }


def _cpu_totals(records: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    cpus = [r["server_cpu_s"] for r in records if r.get("server_cpu_s")]
    if not cpus:
        return None
    roles = sorted({role for cpu in cpus for role in cpu})
    return {role: sum(cpu.get(role, 0.0) for cpu in cpus) for role in roles}


def compare(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """hybrid / model rewards/s, hybrid - model accuracy, and the two targets."""
    rule, hybrid, model = (summaries[v] for v in VERIFIERS)
    ratio = hybrid["rewards_per_s"] / model["rewards_per_s"]
    gain = hybrid["accuracy"] - model["accuracy"]
    return {
        "hybrid_over_model_rewards_per_s": ratio,
        "hybrid_minus_model_accuracy": gain,
        "targets": [
            {
                "target": f"hybrid >= {HYBRID_TARGET_RATIO:g}x the model-only rewards/s, "
                "accuracy no lower",
                "value": f"{ratio:.1f}x, accuracy {gain:+.3f}",
                "pass": ratio >= HYBRID_TARGET_RATIO and gain >= 0,
            },
            {
                "target": f"rule-only >= {RULE_TARGET_PER_S:,.0f} rewards/s per API process",
                "value": f"{rule['rewards_per_s']:,.1f} rewards/s",
                "pass": rule["rewards_per_s"] >= RULE_TARGET_PER_S,
            },
        ],
    }


def table(cfg: dict[str, Any], result: dict[str, Any]) -> str:
    lines = [
        f"{cfg['prompts']} prompts x {cfg['completions']} completions = "
        f"{cfg['prompts'] * cfg['completions']} queries per /get_reward call, "
        f"{cfg['bursts']} timed bursts per verifier (+1 warm-up each), labels: {cfg['labels']}",
        f"  {'verifier':<8} {'rewards/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'by rule':>8} "
        f"{'tokens/rw':>10} {'calls/rw':>9} {'accuracy':>9} {'undecided':>10}",
    ]
    for name, s in result["verifiers"].items():
        lat = s["latency_ms"]
        lines.append(
            f"  {name:<8} {s['rewards_per_s']:10.1f} {lat['p50']:9.1f} {lat['p99']:9.1f} "
            f"{s['decided_by_rule_share']:8.3f} {s['tokens_per_reward']:10.1f} "
            f"{s['engine_calls_per_reward']:9.3f} {s['accuracy']:9.3f} {s['undecided']:10d}"
        )
    lines.append("  where the time of a call goes (means per call):")
    for name, s in result["verifiers"].items():
        server = "n/a" if s["mean_server_ms"] is None else f"{s['mean_server_ms']:.1f}"
        wait = "n/a" if s["mean_queue_wait_ms"] is None else f"{s['mean_queue_wait_ms']:.1f}"
        cpu = s["server_cpu_s"]
        per_call = (
            ", ".join(f"{k} {1000 * v / s['bursts']:.0f}" for k, v in cpu.items()) if cpu else "n/a"
        )
        lines.append(
            f"    {name:<8} wall {s['mean_wall_ms']:.1f} ms = server {server} ms (queue wait "
            f"{wait} ms) + outside the server (HTTP, client JSON "
            f"{s['mean_client_json_ms']:.1f} ms); server CPU ms: {per_call}"
        )
    costs = result.get("rule_check_costs")
    if costs:
        lines.append(
            f"  one rule check outside the service ({costs['pairs']} pairs): in-process "
            f"{costs['inline_ms']['mean']:.2f} ms mean (p50 {costs['inline_ms']['p50']:.2f}, "
            f"p99 {costs['inline_ms']['p99']:.2f}); through the rule-check pool of "
            f"{costs['pool_workers']} {costs['pool_ms_per_check']:.2f} ms per check "
            f"({costs['pool_checks_per_s']:.0f} checks/s); CPU per check in the pool's "
            f"workers {costs['pool_cpu_ms_per_check']['workers']:.2f} ms, in the scheduling "
            f"process {costs['pool_cpu_ms_per_check']['scheduling_process']:.2f} ms; "
            f"distinct (answer, reference) pairs per burst of "
            f"{cfg['prompts'] * cfg['completions']}: "
            f"{costs['distinct_answer_reference_pairs_per_burst']}"
        )
    cmp_ = result["comparison"]
    lines.append(
        f"  hybrid / model rewards/s: {cmp_['hybrid_over_model_rewards_per_s']:.1f}x; "
        f"hybrid - model accuracy: {cmp_['hybrid_minus_model_accuracy']:+.3f}"
    )
    for t in cmp_["targets"]:
        lines.append(f"  {'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']}")
    return "\n".join(lines)


# --- the service --------------------------------------------------------------------------------


def server_sums(client: httpx.Client) -> dict[str, float] | None:
    """The server's cumulative /get_reward request seconds and queue-wait seconds (None where
    /metrics is not readable, e.g. behind auth)."""
    try:
        r = client.get("/metrics")
        r.raise_for_status()
    except httpx.HTTPError:
        return None
    sums: dict[str, float] = {}
    if has_sample(r.text, DURATION_SUM + "_sum", endpoint="/get_reward"):
        sums["server_s"] = sample_sum(r.text, DURATION_SUM + "_sum", endpoint="/get_reward")
    if has_sample(r.text, QUEUE_WAIT + "_sum"):
        sums["queue_wait_s"] = sample_sum(r.text, QUEUE_WAIT + "_sum")
    return sums


def _role(proc: psutil.Process, root: int) -> str:
    if proc.pid == root:
        return "api_process"
    text = " ".join([proc.name(), *proc.cmdline()])
    if "VLLM::" in text:  # vLLM's engine core and its CPU worker
        return "engine"
    # spawned: the rule-check pool's workers; other: the engine reaper, the resource tracker
    return "rule_pool" if "spawn_main" in text else "other"


Snapshot = dict[int, tuple[str, float]]


def cpu_snapshot(pid: int | None) -> Snapshot:
    """CPU seconds (user + system) of the server and each of its descendants, by pid."""
    snap: Snapshot = {}
    if pid is None:
        return snap
    with contextlib.suppress(psutil.Error):  # the server is gone
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):  # a child that exited meanwhile
                t = proc.cpu_times()
                snap[proc.pid] = (_role(proc, pid), t.user + t.system)
    return snap


def cpu_delta(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds spent between two snapshots, by role (a process that ended between them is
    not counted; one that started, fully)."""
    out: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        out[role] = out.get(role, 0.0) + max(0.0, cpu - before.get(pid, (role, 0.0))[1])
    return out


def call(client: httpx.Client, body: dict[str, Any], pid: int | None) -> dict[str, Any]:
    """One /get_reward call, timed from encoding the body to the decoded answer."""
    sums0, cpu0 = server_sums(client), cpu_snapshot(pid)
    start = time.perf_counter()
    content = json.dumps(body).encode()
    encoded = time.perf_counter()
    r = client.post("/get_reward", content=content, headers={"content-type": "application/json"})
    received = time.perf_counter()
    answer = r.json()
    end = time.perf_counter()
    cpu1, sums1 = cpu_snapshot(pid), server_sums(client)
    if r.status_code != 200:
        raise RuntimeError(f"/get_reward answered {r.status_code}: {r.text[:2000]}")
    out: dict[str, Any] = {
        "body": answer,
        "wall_s": end - start,
        "client_json_s": (encoded - start) + (end - received),
        "server_cpu_s": cpu_delta(cpu0, cpu1) if pid is not None else None,
    }
    if sums0 and sums1:
        for key in ("server_s", "queue_wait_s"):
            if key in sums0 and key in sums1:
                out[key] = sums1[key] - sums0[key]
    return out


def orders(bursts: int) -> list[tuple[str, ...]]:
    """The verifiers' order on each timed burst (`bench.rotated`)."""
    return bench.rotated(VERIFIERS, bursts)


def run_bursts(
    client: httpx.Client,
    warmups: Sequence[Burst],
    timed: Sequence[Burst],
    pid: int | None,
    pause_s: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """A warm-up call per verifier, each on its own burst (so the rule-check pool warms up on
    twice as many texts: its workers keep getting faster over their first few hundred
    checks), then every timed burst through each verifier in its rotated order, ``pause_s``
    after the previous call (the engine's CPU threads keep spinning for a moment after a model
    call, and would slow a rule call right after)."""
    runs: dict[str, dict[str, Any]] = {
        kind: {"warmup_wall_s": call(client, warm.body(kind), pid)["wall_s"], "bursts": []}
        for kind, warm in zip(VERIFIERS, warmups, strict=True)
    }
    for burst, order in zip(timed, orders(len(timed)), strict=True):
        for position, kind in enumerate(order):
            time.sleep(pause_s)
            record = burst_record(burst, call(client, burst.body(kind), pid))
            record["position"] = position
            runs[kind]["bursts"].append(record)
            print(f"  {kind}: {record['queries']} rewards in {record['wall_s']:.2f} s")
    return runs


# --- rule checks outside the service --------------------------------------------------------------


def rule_check_costs(bursts: Sequence[Burst], settings: Settings) -> dict[str, Any]:
    """What a rule check costs without HTTP, JSON and the queue: ``check`` called here, one by
    one (first call excluded: imports), and the same pairs through the service's rule-check
    pool (as many workers as the service's setting), after a warm-up; and how many of the
    checks of a burst compare an answer with a reference that an earlier check of the same
    burst already compared (the completions of one prompt often state the same answer)."""
    from service.scoring.answers import check, extract_answer, reference_answer
    from service.serving.rules import RuleVerifier

    pairs = [pair for b in bursts for pair in b.pairs()]
    check(*pairs[0])
    times = []
    for response, reference in pairs:
        t0 = time.perf_counter()
        check(response, reference)
        times.append(1000.0 * (time.perf_counter() - t0))

    async def pooled() -> tuple[float, dict[str, float]]:
        with RuleVerifier(settings.rules.workers, settings.rules.timeout_s) as rules:
            await rules.check_many(list(pairs[: 2 * settings.rules.workers]))
            cpu0, t0 = cpu_snapshot(os.getpid()), time.perf_counter()
            await rules.check_many(list(pairs))
            return time.perf_counter() - t0, cpu_delta(cpu0, cpu_snapshot(os.getpid()))

    pool_s, cpu = asyncio.run(pooled())
    n = len(pairs)
    distinct = [
        len({(extract_answer(r), reference_answer(ref)) for r, ref in b.pairs()}) for b in bursts
    ]
    return {
        "pairs": n,
        "distinct_answer_reference_pairs_per_burst": distinct,
        "inline_ms": {
            "mean": statistics.fmean(times),
            "p50": percentile(times, 50),
            "p99": percentile(times, 99),
        },
        "pool_workers": settings.rules.workers,
        "pool_ms_per_check": 1000.0 * pool_s / n,
        "pool_checks_per_s": n / pool_s,
        "pool_cpu_ms_per_check": {
            "workers": 1000.0 * cpu.get("rule_pool", 0.0) / n,
            "scheduling_process": 1000.0 * cpu.get("api_process", 0.0) / n,
        },
    }


# --- main ----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench.parser(
        NAME,
        __doc__,
        smoke={"prompts": 2, "completions": 2, "bursts": 1, "pause": 0.0},  # 2 x 2, one burst
    )
    ap.add_argument("--url", help="a running service; none: start one `verifier serve` here")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per burst (P)")
    ap.add_argument("--completions", type=int, default=16, help="completions per prompt (G)")
    ap.add_argument("--bursts", type=int, default=3, help="timed bursts per verifier")
    ap.add_argument(
        "--labels",
        choices=("solution", "answer"),
        default="solution",
        help="label = the reference solution, or its final answer",
    )
    ap.add_argument(
        "--tokenizer",
        help="model folder or id whose chat template renders the prompts; default: the "
        "service's model (VERIFIER_ENGINE__MODEL, else the embedded default)",
    )
    ap.add_argument("--data", type=Path, help="GSM8K example solutions (JSONL)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per call (s)")
    ap.add_argument(
        "--pause", type=float, default=2.0, help="seconds between timed calls (0 with --smoke)"
    )
    args = ap.parse(argv)
    if min(args.prompts, args.completions, args.bursts) < 1:
        ap.error("--prompts, --completions and --bursts must be >= 1")
    return args


def main() -> int:
    args = parse()
    settings = Settings()
    from service.engine.models import resolve_model
    from service.evals.data import load_gsm8k_solutions

    data = args.data or settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    n_bursts = len(VERIFIERS) + args.bursts  # a warm-up burst per verifier, then the timed
    items = load_gsm8k_solutions(data, args.prompts * n_bursts)
    rec = bench.record(
        NAME,
        args,
        config={
            "prompts": args.prompts,
            "completions": args.completions,
            "bursts": args.bursts,
            "labels": args.labels,
            "data": str(data),
            "url": args.url,
            "server": "given --url" if args.url else "one `verifier serve`, local queue, defaults",
            "orders": [list(o) for o in orders(args.bursts)],
            "cache": False,
            "pause_s": args.pause,
        },
    )
    with service(args.url, args.out / f"{NAME}_service.log") as (url, pid):
        model_path = args.tokenizer or resolve_model(settings)
        render, end = chat_renderer(model_path)
        rec.config["tokenizer"] = model_path
        bursts = make_bursts(
            items, args.prompts, args.completions, n_bursts, render, end, args.labels
        )
        warmups, timed = bursts[: len(VERIFIERS)], bursts[len(VERIFIERS) :]
        with httpx.Client(base_url=url, timeout=args.timeout) as client:
            rec.results["model"] = client.get("/v1/models").json()
            runs = run_bursts(client, warmups, timed, pid, args.pause)
        rec.results["rule_check_costs"] = rule_check_costs(timed, settings)
    rec.results["verifiers"] = {k: summarize(k, v["bursts"]) for k, v in runs.items()}
    rec.results["comparison"] = compare(rec.results["verifiers"])
    rec.results["runs"] = runs
    print(table(rec.config, rec.results))
    bench.write(rec, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
