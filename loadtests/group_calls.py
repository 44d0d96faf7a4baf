"""Group calls: one GRPO step's rewards as one job, as one job per prompt, or one per completion.

P prompts x G completions (default 8 x 16 = 128 direct judgments, all by the model: no
reference, ``"verifier": "model"``, ``"cache": false`` in every call) sent four ways:

- ``get_reward``: ONE ``POST /get_reward`` with the P x G queries in OpenRLHF's shape (query =
  the prompt rendered with the model's chat template + the completion + the end-of-turn token,
  ``prompts`` = the rendered prompts);
- ``score``: P ``POST /v1/score`` calls, one per prompt with its G responses, sent at once
  (what the TRL hook sends);
- ``single``: P x G ``POST /v1/judge/outcome`` calls, all sent at once;
- ``single_bounded``: the same single calls, at most ``--concurrency`` in flight.

The completions are GSM8K's labelled solutions (gsm8k/example_model_solutions.jsonl, 4 per
question) cycled to G, a repeat made distinct with an ``Attempt k:`` line. Each round gives
every mode the same texts, each mode's questions behind a line of its own (``Problem set
r.k``), so that no mode finds another's question in vLLM's prefix cache: what a mode reuses
is its own. One warm-up round first (not timed), then ``--runs`` timed rounds, the modes'
order rotated from round to round (a drifting machine favours none of them).

Per mode: rewards/s (P x G over the wall time from the first send to the last answer; the
median over the runs), HTTP requests, and per reward from the answers' usage: tokens, prompt
tokens served from vLLM's prefix cache, engine calls. Then get_reward and score over single.

    verifier bench group-calls                                # starts one `verifier serve`
    verifier bench group-calls --url http://127.0.0.1:8000    # a running service
    verifier bench group-calls --smoke                        # 2 x 2, one run: seconds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from loadtests import bench
from loadtests.harness import service
from loadtests.workload import chat_renderer, distinct
from service.config import Settings
from service.scoring.bestofn import BestOfNItem

NAME: Final = "group_calls"
Mode = Literal["get_reward", "score", "single", "single_bounded"]
MODES: Final[tuple[Mode, ...]] = ("get_reward", "score", "single", "single_bounded")
PATHS: Final[dict[Mode, str]] = {
    "get_reward": "/get_reward",
    "score": "/v1/score",
    "single": "/v1/judge/outcome",
    "single_bounded": "/v1/judge/outcome",
}
# Every call: a direct judgment by the model, scored afresh.
JUDGE: Final = {"mode": "direct", "verifier": "model", "cache": False}
USAGE_KEYS: Final = ("prompt_tokens", "cached_tokens", "total_tokens", "engine_calls")


# --- the work (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt of a step and its G completions."""

    question: str
    completions: tuple[str, ...]


def make_prompts(items: Sequence[BestOfNItem], completions: int) -> list[Prompt]:
    """``completions`` completions per item: its candidates cycled, a repeat made distinct."""
    out = []
    for item in items:
        seen: set[str] = set()
        texts = [
            distinct(item.candidates[j % len(item.candidates)].solution, seen)[0]
            for j in range(completions)
        ]
        out.append(Prompt(item.question, tuple(texts)))
    return out


def tagged(prompts: Sequence[Prompt], round_: int, mode: Mode) -> list[Prompt]:
    """The prompts behind a first line of this round and mode's own, so that no other mode or
    round shares their questions' prefix (the line changes no answer)."""
    tag = f"Problem set {round_}.{MODES.index(mode)}"
    return [Prompt(f"{tag}\n{p.question}", p.completions) for p in prompts]


def bodies(
    mode: Mode, prompts: Sequence[Prompt], render: Callable[[str], str], end: str
) -> list[dict[str, Any]]:
    """The request bodies one mode sends for ``prompts``."""
    if mode == "get_reward":
        query, rendered = [], []
        for p in prompts:
            prompt = render(p.question)
            query += [prompt + c + end for c in p.completions]
            rendered += [prompt] * len(p.completions)
        return [{"query": query, "prompts": rendered, **JUDGE}]
    if mode == "score":
        return [
            {"question": p.question, "responses": list(p.completions), "method": "outcome", **JUDGE}
            for p in prompts
        ]
    return [
        {"question": p.question, "response": c, **JUDGE} for p in prompts for c in p.completions
    ]


def rewards_of(mode: Mode, answer: dict[str, Any]) -> list[float | None]:
    """The rewards one answer carries, in the order of its request."""
    if mode == "get_reward":
        return list(answer["rewards"])
    if mode == "score":
        return [r["outcome"] for r in sorted(answer["results"], key=lambda r: r["index"])]
    return [answer["score"]]


def record(mode: Mode, answers: Sequence[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """One mode's round: its rewards, what they cost, and how fast they came (JSON-ready)."""
    rewards = [r for a in answers for r in rewards_of(mode, a)]
    usage = {k: sum(int(a["usage"].get(k, 0)) for a in answers) for k in USAGE_KEYS}
    return {
        "requests": len(answers),
        "rewards": rewards,
        "wall_s": wall_s,
        "rewards_per_s": len(rewards) / wall_s,
        "usage": usage,
    }


def orders(runs: int) -> list[tuple[Mode, ...]]:
    """The modes' order in each timed round (`bench.rotated`)."""
    return bench.rotated(MODES, runs)


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One mode's figures over its timed rounds."""
    n = sum(len(r["rewards"]) for r in records)
    total = {k: sum(r["usage"][k] for r in records) for k in USAGE_KEYS}
    return {
        "runs": len(records),
        "rewards": n,
        "requests_per_round": records[0]["requests"],
        "rewards_per_s": bench.median(r["rewards_per_s"] for r in records),
        "rewards_per_s_each": [r["rewards_per_s"] for r in records],
        "mean_wall_s": statistics.fmean(r["wall_s"] for r in records),
        "tokens_per_reward": total["total_tokens"] / n,
        "prompt_tokens_per_reward": total["prompt_tokens"] / n,
        "cached_tokens_per_reward": total["cached_tokens"] / n,
        "cached_share_of_prompt": total["cached_tokens"] / total["prompt_tokens"]
        if total["prompt_tokens"]
        else None,
        "engine_calls_per_reward": total["engine_calls"] / n,
    }


def compare(summaries: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Rewards/s of each grouped mode over the single calls (all at once, and bounded)."""
    rate = {m: s["rewards_per_s"] for m, s in summaries.items()}
    return {
        f"{group}_over_{single}": rate[group] / rate[single]
        for group in ("get_reward", "score")
        for single in ("single", "single_bounded")
    }


def table(cfg: dict[str, Any], result: dict[str, Any]) -> str:
    n = cfg["prompts"] * cfg["completions"]
    lines = [
        f"{cfg['prompts']} prompts x {cfg['completions']} completions = {n} direct judgments "
        f"by the model per round, cache off; {cfg['runs']} timed round(s) (+1 warm-up), "
        f"median rewards/s; single_bounded: {cfg['concurrency']} in flight",
        f"  {'mode':<15} {'requests':>8} {'rewards/s':>10} {'tokens/rw':>10} "
        f"{'cached/rw':>10} {'cached %':>9} {'calls/rw':>9}",
    ]
    for mode, s in result["modes"].items():
        share = s["cached_share_of_prompt"]
        lines.append(
            f"  {mode:<15} {s['requests_per_round']:8d} {s['rewards_per_s']:10.2f} "
            f"{s['tokens_per_reward']:10.1f} {s['cached_tokens_per_reward']:10.1f} "
            f"{'n/a' if share is None else f'{100 * share:.1f}':>9} "
            f"{s['engine_calls_per_reward']:9.3f}"
        )
    for name, ratio in result["comparison"].items():
        lines.append(f"  {name.replace('_over_', ' / ')} rewards/s: {ratio:.2f}x")
    return "\n".join(lines)


# --- the calls -------------------------------------------------------------------------------------


async def send(
    client: httpx.AsyncClient, path: str, payloads: Sequence[dict[str, Any]], concurrency: int
) -> tuple[list[dict[str, Any]], float]:
    """Every body POSTed to ``path``, at most ``concurrency`` in flight; the answers in order
    and the wall time from the first send to the last answer."""
    slots = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> dict[str, Any]:
        async with slots:
            r = await client.post(path, json=body)
        if r.status_code != 200:
            raise RuntimeError(f"{path} answered {r.status_code}: {r.text[:2000]}")
        answer: dict[str, Any] = r.json()
        return answer

    start = time.perf_counter()
    answers = await asyncio.gather(*(one(b) for b in payloads))
    return list(answers), time.perf_counter() - start


async def run_round(
    client: httpx.AsyncClient,
    prompts: Sequence[Prompt],
    round_: int,
    order: Sequence[Mode],
    render: Callable[[str], str],
    end: str,
    concurrency: int,
) -> dict[Mode, dict[str, Any]]:
    out: dict[Mode, dict[str, Any]] = {}
    for position, mode in enumerate(order):
        payloads = bodies(mode, tagged(prompts, round_, mode), render, end)
        limit = concurrency if mode == "single_bounded" else len(payloads)
        answers, wall_s = await send(client, PATHS[mode], payloads, limit)
        out[mode] = {**record(mode, answers, wall_s), "position": position}
        rec = out[mode]
        print(f"  round {round_} {mode}: {len(rec['rewards'])} rewards in {wall_s:.2f} s")
    return out


async def run(
    url: str,
    prompts: Sequence[Prompt],
    runs: int,
    render: Callable[[str], str],
    end: str,
    concurrency: int,
    timeout_s: float,
) -> dict[str, Any]:
    n = sum(len(p.completions) for p in prompts)
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:
        model = (await client.get("/v1/models")).json()
        warmup = await run_round(client, prompts, 0, MODES, render, end, concurrency)
        rounds = [
            await run_round(client, prompts, r + 1, order, render, end, concurrency)
            for r, order in enumerate(orders(runs))
        ]
    return {"model": model, "warmup": warmup, "rounds": rounds}


# --- main ----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = bench.parser(
        NAME,
        __doc__,
        runs=3,
        smoke={"prompts": 2, "completions": 2, "runs": 1},  # 2 x 2: seconds
    )
    ap.add_argument("--url", help="a running service; none: start one `verifier serve` here")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step (P)")
    ap.add_argument("--completions", type=int, default=16, help="completions per prompt (G)")
    ap.add_argument(
        "--concurrency", type=int, default=8, help="single calls in flight in single_bounded"
    )
    ap.add_argument(
        "--tokenizer",
        help="model folder or id whose chat template renders /get_reward's prompts; default: "
        "the service's model (VERIFIER_ENGINE__MODEL, else the embedded default)",
    )
    ap.add_argument("--data", type=Path, help="GSM8K example solutions (JSONL)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per call (s)")
    args = ap.parse(argv)
    if min(args.prompts, args.completions, args.runs, args.concurrency) < 1:
        ap.error("--prompts, --completions, --runs and --concurrency must be >= 1")
    return args


def main() -> int:
    args = parse()
    settings = Settings()
    from service.engine.models import resolve_model
    from service.evals.data import load_gsm8k_solutions

    data = args.data or settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    prompts = make_prompts(load_gsm8k_solutions(data, args.prompts), args.completions)
    rec = bench.record(
        NAME,
        args,
        config={
            "prompts": args.prompts,
            "completions": args.completions,
            "runs": args.runs,
            "concurrency": args.concurrency,
            "modes": list(MODES),
            "orders": [list(o) for o in orders(args.runs)],
            "judge": JUDGE,
            "data": str(data),
            "url": args.url,
            "server": "given --url" if args.url else "one `verifier serve`, local queue, defaults",
        },
    )
    with service(args.url, args.out / f"{NAME}_service.log") as (url, _pid):
        model_path = args.tokenizer or resolve_model(settings)
        render, end = chat_renderer(model_path)
        rec.config["tokenizer"] = model_path
        ran = asyncio.run(run(url, prompts, args.runs, render, end, args.concurrency, args.timeout))
    modes: dict[str, Any] = {m: summarize([r[m] for r in ran["rounds"]]) for m in MODES}
    rec.results = {
        "model": ran["model"],
        "modes": modes,
        "comparison": compare(modes),
        "warmup": ran["warmup"],
        "rounds": ran["rounds"],
    }
    print(table(rec.config, rec.results))
    bench.write(rec, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
