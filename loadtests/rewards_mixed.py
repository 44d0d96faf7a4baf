"""Mixed RL batches through POST /v1/rewards: one call vs one per verifier kind, a rubric in one
prefill vs one judgment per criterion, and a deadline met with a hung item.

1. **Mixed vs per kind.** A GRPO-shaped burst of GSM8K solutions (from
   gsm8k/example_model_solutions.jsonl) and ARC questions, each item with its own spec: math
   (the reference's final answer), choice (a letter answer), string (a `####` format check),
   rubric (three criteria) and model. The same items go as one `/v1/rewards` call and as one
   call per kind, one after the other, in rotated order; rewards/s of each (median over
   rounds) and their ratio.
2. **Rubric cost.** A 10-criterion rubric over each of N solutions as one rubric item (one
   decision: the shared prefix prefilled once, one short read per criterion), against the same
   10 criteria as 10 `model` items (10 outcome judgments, each reading the whole text with its
   criterion); the N solutions in one call per arm, as a trainer's batch. Prompt tokens (and
   the part vLLM's prefix cache served), engine calls and wall time per solution, and the
   ratios.
3. **Deadline.** A burst with one hung item (16 sampled rationales of 1024 tokens) and
   `deadline_s`: the call's wall time against the deadline, and which items were real.

Every call sends ``"cache": false``, so the judgment cache answers nothing.

    verifier bench rewards-mixed                               # starts one `verifier serve`
    verifier bench rewards-mixed --url http://127.0.0.1:8000   # a running service
    verifier bench rewards-mixed --smoke                       # a few items: seconds
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import httpx

from loadtests import bench
from loadtests.harness import service
from loadtests.stats import final_answer
from service.config import Settings

NAME: Final = "rewards_mixed"
KINDS: Final = ("math", "choice", "string", "rubric", "model")
RUBRIC_THREE: Final = [
    {"text": "The final answer equals the reference.", "weight": 2.0},
    {"text": "The response shows the computation.", "weight": 1.0},
    {"text": "The response contradicts the reference.", "weight": -2.0},
]
RUBRIC_TEN: Final = [
    "The final answer is stated clearly.",
    "The response shows the computation.",
    "Every arithmetic step is correct.",
    "The response uses the quantities given in the question.",
    "The response does not contradict itself.",
    "The units of the answer are right.",
    "The response answers the question that was asked.",
    "The response is concise.",
    "The final answer is a number.",
    "The reasoning follows from one step to the next.",
]
LETTERS: Final = "ABCDEFGHIJ"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(
        NAME,
        __doc__,
        runs=3,
        # The smoke deadline leaves a CPU without native bf16 time for the real items beside
        # 16 sampled rationales: at 3 s one model item missed it there; at 8 s none did.
        smoke={"per_kind": 2, "solutions": 2, "runs": 1, "deadline": 8.0},
    )
    p.add_argument("--url", default=None, help="A running service (default: start one).")
    p.add_argument("--per-kind", type=int, default=16, help="Items per kind in a burst.")
    p.add_argument("--solutions", type=int, default=8, help="Solutions for the rubric cost.")
    p.add_argument("--deadline", type=float, default=5.0, help="deadline_s of part 3.")
    p.add_argument("--timeout", type=float, default=900.0, help="HTTP timeout per call (s).")
    return p.parse(argv)


# --- the items (pure) ----------------------------------------------------------------------------


def _arc_items(settings: Settings, n: int) -> list[dict[str, Any]]:
    from service.evals.data import read_items

    gold, _ = read_items(settings.data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    out = []
    for i, g in enumerate(gold[:n]):
        options = "\n".join(f"{LETTERS[j]}) {o}" for j, o in enumerate(g.options))
        pick = g.answer_index if i % 2 == 0 else (g.answer_index + 1) % len(g.options)
        out.append(
            {
                "prompt": f"{g.question}\n{options}",
                "response": f"ANSWER: {LETTERS[pick]}",
                "verifier": {"type": "choice", "answer": LETTERS[g.answer_index]},
            }
        )
    return out


def mixed_items(settings: Settings, per_kind: int) -> dict[str, list[dict[str, Any]]]:
    """``per_kind`` items of each kind, by kind."""
    from service.evals.data import load_gsm8k_solutions

    path = settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    gsm = load_gsm8k_solutions(path, per_kind * 4)
    solutions = [(it.question, c.solution, it.ground_truth) for it in gsm for c in it.candidates]

    def take(offset: int, spec: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
        rows = solutions[offset * per_kind : (offset + 1) * per_kind]
        return [{"prompt": q, "response": s, "verifier": spec(ref)} for q, s, ref in rows]

    return {
        "math": take(0, lambda ref: {"type": "math", "reference": final_answer(ref) or ref}),
        "choice": _arc_items(settings, per_kind),
        "string": take(
            1, lambda ref: {"type": "string", "operation": "regex", "pattern": r"A:\s*\d"}
        ),
        "rubric": take(
            2,
            lambda ref: {"type": "rubric", "criteria": RUBRIC_THREE, "reference": ref},
        ),
        "model": take(3, lambda ref: {"type": "model", "reference": ref}),
    }


# --- the calls -----------------------------------------------------------------------------------


def _post(client: httpx.Client, items: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/rewards", json={"items": items, "cache": False, **extra})
    r.raise_for_status()
    out: dict[str, Any] = r.json()
    if out["failed"] or out["timed_out"]:
        raise RuntimeError(f"{out['failed']} failed, {out['timed_out']} timed out")
    return out


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def mixed_vs_per_kind(
    client: httpx.Client, by_kind: dict[str, list[dict[str, Any]]], runs: int
) -> dict[str, Any]:
    everything = [item for kind in KINDS for item in by_kind[kind]]
    n = len(everything)
    arms: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "one_call": lambda: [_post(client, everything)],
        "per_kind": lambda: [_post(client, by_kind[kind]) for kind in KINDS],
    }
    for arm in arms.values():  # warm-up, not timed
        arm()
    walls: dict[str, list[float]] = {name: [] for name in arms}
    for order in bench.rotated(list(arms), runs):
        for name in order:
            wall, _ = _timed(arms[name])
            walls[name].append(wall)
    rate = {name: n / bench.median(w) for name, w in walls.items()}
    return {
        "items": n,
        "wall_s": walls,
        "rewards_per_s": rate,
        "one_call_over_per_kind": rate["one_call"] / rate["per_kind"],
    }


def rubric_cost(client: httpx.Client, settings: Settings, n: int, runs: int) -> dict[str, Any]:
    from service.evals.data import load_gsm8k_solutions

    path = settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    gsm = load_gsm8k_solutions(path, n)
    # Each (round, arm) reads its texts under a prompt of its own ("[k] question"), so no arm
    # finds a text in vLLM's prefix cache from an arm or a round before it.
    criteria = [{"text": t} for t in RUBRIC_TEN]

    def solutions(k: int) -> list[tuple[str, str]]:
        return [
            (f"[{k}] {it.question}", it.candidates[k % len(it.candidates)].solution) for it in gsm
        ]

    def one_prefill(k: int) -> list[dict[str, Any]]:
        rubric = {"type": "rubric", "criteria": criteria}
        items = [{"prompt": q, "response": s, "verifier": rubric} for q, s in solutions(k)]
        return [_post(client, items)]

    def per_criterion(k: int) -> list[dict[str, Any]]:
        items = [
            {"prompt": q, "response": s, "verifier": {"type": "model", "criteria": t}}
            for q, s in solutions(k)
            for t in RUBRIC_TEN
        ]
        return [_post(client, items)]

    arms = {"one_prefill": one_prefill, "per_criterion": per_criterion}
    per: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    for r, order in enumerate(bench.rotated(list(arms), runs)):
        for name in order:
            k = 2 * r + list(arms).index(name)
            wall, outs = _timed(functools.partial(arms[name], k))
            usage = [o["usage"] for o in outs]
            per[name].append(
                {
                    "wall_s_per_solution": wall / n,
                    "prompt_tokens_per_solution": sum(u["prompt_tokens"] for u in usage) / n,
                    "cached_tokens_per_solution": sum(u["cached_tokens"] for u in usage) / n,
                    "engine_calls_per_solution": sum(u["engine_calls"] for u in usage) / n,
                }
            )
    med = {name: bench.medians(rows) for name, rows in per.items()}
    one, many = med["one_prefill"], med["per_criterion"]
    fresh = {
        name: m["prompt_tokens_per_solution"] - m["cached_tokens_per_solution"]
        for name, m in med.items()
    }
    return {
        "criteria": len(RUBRIC_TEN),
        "solutions": n,
        "median": med,
        "per_criterion_over_one_prefill": {
            "wall": many["wall_s_per_solution"] / one["wall_s_per_solution"],
            "prompt_tokens": many["prompt_tokens_per_solution"] / one["prompt_tokens_per_solution"],
            "uncached_prompt_tokens": fresh["per_criterion"] / max(fresh["one_prefill"], 1.0),
        },
    }


def deadline(client: httpx.Client, by_kind: dict[str, list[dict[str, Any]]], s: float) -> Any:
    hung = dict(by_kind["model"][0])
    hung["verifier"] = {
        "type": "model",
        "mode": "reasoning",
        "reasoning_tokens": 1024,
        "samples": 16,
        "temperature": 1.0,
    }
    items = [hung, *by_kind["math"][:2], *by_kind["choice"][:2], *by_kind["model"][1:2]]
    body = {"items": items, "cache": False, "deadline_s": s, "fallback_reward": 0}
    wall, r = _timed(lambda: client.post("/v1/rewards", json=body))
    r.raise_for_status()
    out = r.json()
    return {
        "deadline_s": s,
        "wall_s": wall,
        "wall_over_deadline": wall / s,
        "items": len(items),
        "timed_out": out["timed_out"],
        "hung_item_timed_out": out["results"][0]["timed_out"],
        "others_real": all(not x["timed_out"] for x in out["results"][1:]),
    }


def table(results: dict[str, Any]) -> str:
    mixed, rubric, late = results["mixed"], results["rubric"], results["deadline"]
    m, r = mixed["rewards_per_s"], rubric["median"]
    ratio = rubric["per_criterion_over_one_prefill"]
    return "\n".join(
        [
            f"mixed burst of {mixed['items']} items: one call {m['one_call']:.1f} rewards/s, "
            f"one call per kind {m['per_kind']:.1f} rewards/s; "
            f"ratio {mixed['one_call_over_per_kind']:.2f}",
            f"rubric of {rubric['criteria']} criteria, per solution: one prefill "
            f"{r['one_prefill']['prompt_tokens_per_solution']:.0f} prompt tokens, "
            f"{r['one_prefill']['engine_calls_per_solution']:.0f} reads, "
            f"{r['one_prefill']['wall_s_per_solution'] * 1000:.0f} ms; one judgment per criterion "
            f"{r['per_criterion']['prompt_tokens_per_solution']:.0f} prompt tokens, "
            f"{r['per_criterion']['engine_calls_per_solution']:.0f} calls, "
            f"{r['per_criterion']['wall_s_per_solution'] * 1000:.0f} ms",
            f"  per criterion / one prefill: time {ratio['wall']:.2f}x, prompt tokens "
            f"{ratio['prompt_tokens']:.2f}x, uncached prompt tokens "
            f"{ratio['uncached_prompt_tokens']:.2f}x",
            f"deadline {late['deadline_s']:.1f} s with a hung item: answered in "
            f"{late['wall_s']:.2f} s ({late['wall_over_deadline']:.2f}x), hung item timed out: "
            f"{late['hung_item_timed_out']}, the other {late['items'] - 1} real: "
            f"{late['others_real']}",
        ]
    )


def main() -> int:
    args = parse()
    settings = Settings()
    rec = bench.record(
        NAME,
        args,
        config={
            "per_kind": args.per_kind,
            "solutions": args.solutions,
            "runs": args.runs,
            "deadline_s": args.deadline,
            "url": args.url,
            "cache": False,
        },
    )
    by_kind = mixed_items(settings, args.per_kind)
    log = Path(args.out) / f"{NAME}_service.log"
    with service(args.url, log) as (url, _), httpx.Client(base_url=url, timeout=args.timeout) as c:
        rec.results["model"] = c.get("/v1/models").json()["data"][0]
        rec.results["mixed"] = mixed_vs_per_kind(c, by_kind, args.runs)
        rec.results["rubric"] = rubric_cost(c, settings, args.solutions, args.runs)
        rec.results["deadline"] = deadline(c, by_kind, args.deadline)
    print(table(rec.results))
    bench.write(rec, args)
    late = rec.results["deadline"]
    return 0 if late["hung_item_timed_out"] and late["others_real"] else 1
