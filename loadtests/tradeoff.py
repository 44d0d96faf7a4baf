"""The evaluation-time compute tradeoff: Best-of-N selection accuracy vs evaluation tokens.

On GSM8K example solutions (4 candidates per question), for N in {1, 2, 4} candidates per
question and each evaluator (direct outcome, reasoning outcome at two rationale budgets,
process, fused), the verifier picks the best of the first N candidates; its accuracy is set
against the evaluation tokens it spent (prompt + generated, summed over the N candidates).
Baselines without a verifier: a random pick (expected accuracy), a majority vote on the final
answers, and the oracle (any of the N is correct).

Each candidate is scored once per evaluator by its own ``POST /v1/score`` request (with
``cache: false``), so a candidate's tokens are known exactly and the first N of a question
cost the sum of theirs; the candidates of a question are shuffled once with ``seed`` so the
first N are not always the same solvers. The solutions write one step per line; the
service's heuristic splitter cuts on blank lines, so every evaluator gets the solution with a
blank line between its lines (`as_paragraphs`), which makes each line a step of the process
evaluator (without it, a whole solution would be one step and "process" a second outcome
judgment).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any, Final

import httpx

from loadtests.stats import argmax_first, final_answer, majority_pick
from service.evals.data import load_gsm8k_solutions
from service.scoring.bestofn import BestOfNItem

if TYPE_CHECKING:
    from service.evals.common import AsyncClient

DEFAULT_N: Final = (1, 2, 4)
DEFAULT_BUDGETS: Final = (64, 256)


@dataclass(frozen=True)
class Evaluator:
    """One way of scoring a candidate: a /v1/score method and mode (and rationale budget)."""

    name: str
    method: str
    mode: str
    reasoning_tokens: int | None = None

    def body(self, question: str, response: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "question": question,
            "responses": [response],
            "method": self.method,
            "mode": self.mode,
            "cache": False,  # the same candidate is scored by several evaluators
        }
        if self.reasoning_tokens is not None:
            body["reasoning_tokens"] = self.reasoning_tokens
        return body


def evaluators(budgets: Sequence[int]) -> list[Evaluator]:
    low, high = budgets
    return [
        Evaluator("direct outcome", "outcome", "direct"),
        Evaluator(f"reasoning outcome ({low} tokens)", "outcome", "reasoning", low),
        Evaluator(f"reasoning outcome ({high} tokens)", "outcome", "reasoning", high),
        Evaluator("process", "process", "direct"),
        Evaluator("fused", "fused", "direct"),
    ]


@dataclass(frozen=True)
class Question:
    """A question with its candidates in the order the run uses (shuffled once by seed)."""

    index: int
    item: BestOfNItem
    order: tuple[int, ...]

    @property
    def candidates(self) -> list[tuple[str, bool]]:
        return [
            (as_paragraphs(self.item.candidates[j].solution), self.item.candidates[j].is_correct)
            for j in self.order
        ]


def as_paragraphs(solution: str) -> str:
    """One paragraph per non-empty line, so the heuristic splitter sees one step per line."""
    return "\n\n".join(line.strip() for line in solution.splitlines() if line.strip())


def questions(items: Sequence[BestOfNItem], seed: int) -> list[Question]:
    rng = random.Random(seed)
    out = []
    for i, item in enumerate(items):
        order = list(range(len(item.candidates)))
        rng.shuffle(order)
        out.append(Question(i, item, tuple(order)))
    return out


def baselines(qs: Sequence[Question], n: int) -> dict[str, float]:
    """Random (expected), majority vote and oracle accuracy over the first n candidates."""
    random_acc, majority_acc, oracle_acc = [], [], []
    for q in qs:
        cands = q.candidates[:n]
        correct = [ok for _, ok in cands]
        random_acc.append(fmean(correct))
        picked = majority_pick([final_answer(text) for text, _ in cands])
        majority_acc.append(float(correct[picked]))
        oracle_acc.append(float(any(correct)))
    return {
        "random": fmean(random_acc),
        "majority": fmean(majority_acc),
        "oracle": fmean(oracle_acc),
    }


def selection(
    qs: Sequence[Question], scores: dict[tuple[int, int], dict[str, Any]], n: int
) -> dict[str, float]:
    """Accuracy of the verifier's pick among the first n, and its tokens per question."""
    picks, tokens, calls = [], [], []
    for q in qs:
        rows = [scores[(q.index, j)] for j in range(n)]
        picked = argmax_first([r["score"] for r in rows])
        picks.append(float(q.candidates[picked][1]))
        tokens.append(sum(r["total_tokens"] for r in rows))
        calls.append(sum(r["engine_calls"] for r in rows))
    return {
        "accuracy": fmean(picks),
        "tokens_per_question": fmean(tokens),
        "engine_calls_per_question": fmean(calls),
    }


async def score_all(
    client: AsyncClient,
    qs: Sequence[Question],
    evaluator: Evaluator,
    n_max: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[tuple[int, int], dict[str, Any]]:
    """One /v1/score request per (question, candidate) of the first n_max candidates."""
    keys = [(q.index, j) for q in qs for j in range(n_max)]
    by_index = {q.index: q for q in qs}

    from service.evals.common import gather_with_progress

    async def one(key: tuple[int, int]) -> dict[str, Any]:
        q = by_index[key[0]]
        answer = await client.score(**evaluator.body(q.item.question, q.candidates[key[1]][0]))
        body = answer.model_dump(mode="json")
        usage = body["usage"]
        return {
            "score": float(body["results"][0]["final"]),
            "total_tokens": int(usage["total_tokens"]),
            "generated_tokens": int(usage["generated_tokens"]),
            "engine_calls": int(usage["engine_calls"]),
        }

    rows = await gather_with_progress([one(k) for k in keys], progress)
    return dict(zip(keys, rows, strict=True))


@dataclass(frozen=True)
class TradeoffConfig:
    data: Path
    limit: int
    n: tuple[int, ...] = DEFAULT_N
    budgets: tuple[int, int] = DEFAULT_BUDGETS
    concurrency: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.n or min(self.n) < 1 or max(self.n) > 4 or list(self.n) != sorted(self.n):
            raise ValueError("n: increasing values between 1 and 4 (4 candidates per question)")
        if len(self.budgets) != 2 or min(self.budgets) < 1:
            raise ValueError("budgets: two rationale budgets (tokens), e.g. 64,256")
        if self.limit < 1:
            raise ValueError("limit must be >= 1")


async def run_tradeoff(
    url: str, cfg: TradeoffConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Score every candidate with every evaluator and tabulate accuracy vs tokens."""
    qs = questions(load_gsm8k_solutions(cfg.data, cfg.limit), cfg.seed)
    if not qs:
        raise ValueError(f"no questions in {cfg.data}")
    n_max = max(cfg.n)
    results: dict[str, dict[str, dict[str, float]]] = {}
    per_candidate: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    wall: dict[str, float] = {}
    model = await _model_name(url)
    # The client loads only when a benchmark runs: `verifier serve` shares this CLI.
    from service.evals.common import open_client

    async with open_client(url, cfg.concurrency) as client:
        for ev in evaluators(cfg.budgets):
            report: Callable[[int, int], None] | None = None
            if progress is not None:
                report = _named(progress, ev.name)
            start = time.perf_counter()
            scores = await score_all(client, qs, ev, n_max, report)
            wall[ev.name] = time.perf_counter() - start
            per_candidate[ev.name] = scores
            results[ev.name] = {str(n): selection(qs, scores, n) for n in cfg.n}
    return {
        "model": model,
        "url": url,
        "n_questions": len(qs),
        "config": {
            "data": str(cfg.data),
            "limit": cfg.limit,
            "n": list(cfg.n),
            "budgets": list(cfg.budgets),
            "concurrency": cfg.concurrency,
            "seed": cfg.seed,
        },
        "evaluators": results,
        "baselines": {str(n): baselines(qs, n) for n in cfg.n},
        "wall_s": wall,
        "items": [_item(q, per_candidate, n_max) for q in qs],
    }


def _named(progress: Callable[[str, int, int], None], name: str) -> Callable[[int, int], None]:
    return lambda done, total: progress(name, done, total)


async def _model_name(url: str) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.get("/v1/models")
    response.raise_for_status()
    return str(response.json()["data"][0]["id"])


def _item(
    q: Question, per_candidate: dict[str, dict[tuple[int, int], dict[str, Any]]], n_max: int
) -> dict[str, Any]:
    cands = q.candidates[:n_max]
    return {
        "index": q.index,
        "order": list(q.order[:n_max]),
        "correct": [ok for _, ok in cands],
        "answers": [final_answer(text) for text, _ in cands],
        "scores": {
            name: [rows[(q.index, j)]["score"] for j in range(n_max)]
            for name, rows in per_candidate.items()
        },
        "tokens": {
            name: [rows[(q.index, j)]["total_tokens"] for j in range(n_max)]
            for name, rows in per_candidate.items()
        },
    }


def table(result: dict[str, Any]) -> str:
    """Markdown table: evaluator, N, accuracy, tokens and engine calls per question."""
    lines = [
        "| evaluator | N | accuracy | eval tokens / question | engine calls / question |",
        "|---|---|---|---|---|",
    ]
    for name, rows in result["evaluators"].items():
        for n, row in rows.items():
            lines.append(
                f"| {name} | {n} | {row['accuracy']:.3f} | {row['tokens_per_question']:,.0f} "
                f"| {row['engine_calls_per_question']:.1f} |"
            )
    for n, base in result["baselines"].items():
        lines.append(
            f"| random / majority / oracle | {n} | {base['random']:.3f} / "
            f"{base['majority']:.3f} / {base['oracle']:.3f} | 0 | 0 |"
        )
    return "\n".join(lines)
