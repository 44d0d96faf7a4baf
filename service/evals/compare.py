"""Pairwise comparison through the service: labelled GSM8K pairs via POST /v1/judge/compare.

Each question of the example-solutions file has 4 solver solutions labelled ``is_correct``;
every (correct, wrong) pair of one question is a labelled pair (`build_pairs`), in file order,
the correct solution shown first in every other pair (even pair index: first), so a judge
that always prefers the first letter is right on exactly half of an even number of pairs.

Each pair is ONE request with ``debias: "swap"`` and ``return_reads: true``: the service reads
both orders. From that one answer the report takes both

- the debiased pick: the response with the higher ``results[i].score`` (``ranking[0]``); equal
  scores are no pick (wrong);
- the first-order pick: only the read in request order (``order == [0, 1]``), the response
  whose letter has the higher probability; equal probabilities are no pick (wrong). That read's
  prompt is the one ``debias: "none"`` sends, so this is what a request without debiasing
  answers, at half the cost.

A pair the service refuses with a 4xx counts as wrong for both picks and is listed with its
error; any other failure aborts the run.

Result shape::

    {"n_pairs", "n_questions", "accuracy_debiased", "accuracy_first_order",
     "position_consistency", "first_position_rate",
     "tokens_per_pair": {"swap": {total_tokens, prompt_tokens, generated_tokens},
                         "one_order": {...}},
     "eval_tokens": {prompt_tokens, generated_tokens, cached_tokens, total_tokens, engine_calls,
                     cached_judgments},
     "wall_s": float, "n_failed": int, "config": {...},
     "items": [{"index", "question_index", "solvers", "correct", "scores", "ranking",
                "preferences", "reads", "pick_debiased", "pick_first_order",
                "correct_debiased", "correct_first_order", "consistent", "error"}]}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Final

import httpx
from verifier_client import AsyncClient, VerifierError
from verifier_client.models import CompareRequest, Usage

from service.evals.common import (
    ProgressFn,
    gather_with_progress,
    is_request_error,
    open_client,
    sum_usage,
)
from service.evals.data import load_gsm8k_solutions
from service.scoring.bestofn import BestOfNItem

logger = logging.getLogger(__name__)

DEFAULT_FILE: Final = Path("gsm8k") / "example_model_solutions.jsonl"
ENDPOINT: Final = "/v1/judge/compare"
REQUEST_ORDER: Final = (0, 1)  # the read debias='none' makes: response 0 shown as letter A
_TOKEN_FIELDS: Final = ("total_tokens", "prompt_tokens", "generated_tokens")


@dataclass(frozen=True)
class LabelledPair:
    """Two solutions of one question, exactly one of them correct (``responses[correct]``)."""

    question_index: int
    question: str
    responses: tuple[str, str]
    solvers: tuple[str, str]
    correct: int


@dataclass(frozen=True)
class PairRead:
    """One read of a pair: the responses shown (``order[p]`` at letter p), letter probabilities."""

    order: tuple[int, ...]
    probabilities: tuple[float, ...]


@dataclass(frozen=True)
class JudgedPair:
    """The service's answer for one pair, or the error that replaced it."""

    index: int
    pair: LabelledPair
    scores: list[float] | None = None
    ranking: list[int] | None = None
    preferences: list[list[float | None]] | None = None
    reads: list[PairRead] = field(default_factory=list)
    usage: Usage | None = None
    model: str | None = None
    error: str | None = None

    @property
    def pick_debiased(self) -> int | None:
        return None if self.scores is None else debiased_pick(self.scores)

    @property
    def pick_first_order(self) -> int | None:
        return first_order_pick(self.reads) if self.reads else None

    @property
    def correct_debiased(self) -> bool:
        return self.pick_debiased == self.pair.correct

    @property
    def correct_first_order(self) -> bool:
        return self.pick_first_order == self.pair.correct

    @property
    def consistent(self) -> bool | None:
        return pair_consistent(self.reads) if self.reads else None


# --- pairs -----------------------------------------------------------------------------------


def build_pairs(items: Sequence[BestOfNItem], limit: int | None = None) -> list[LabelledPair]:
    """Every (correct, wrong) pair of each question, in file and solver order, up to `limit`.

    Pair k shows the correct solution first when k is even and second when k is odd, so the
    position of the correct one is balanced (exactly, for an even number of pairs).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    pairs: list[LabelledPair] = []
    for q, item in enumerate(items):
        right = [c for c in item.candidates if c.is_correct]
        wrong = [c for c in item.candidates if not c.is_correct]
        for r in right:
            for w in wrong:
                if limit is not None and len(pairs) >= limit:
                    return pairs
                first, second = (r, w) if len(pairs) % 2 == 0 else (w, r)
                pairs.append(
                    LabelledPair(
                        question_index=q,
                        question=item.question,
                        responses=(first.solution, second.solution),
                        solvers=(first.solver_name, second.solver_name),
                        correct=0 if first is r else 1,
                    )
                )
    return pairs


# --- metrics (pure) --------------------------------------------------------------------------


def debiased_pick(scores: Sequence[float]) -> int | None:
    """The response with the higher score over both orders; None on a tie."""
    a, b = scores
    return None if a == b else (0 if a > b else 1)


def read_pick(read: PairRead) -> int | None:
    """The response whose letter is more probable in one read; None on a tie."""
    pa, pb = read.probabilities
    return None if pa == pb else read.order[0 if pa > pb else 1]


def first_order_pick(reads: Sequence[PairRead]) -> int | None:
    """The pick of the read in request order (what ``debias: "none"`` reads)."""
    for read in reads:
        if tuple(read.order) == REQUEST_ORDER:
            return read_pick(read)
    raise ValueError(f"no read in request order {list(REQUEST_ORDER)} among {len(reads)} reads")


def pair_consistent(reads: Sequence[PairRead]) -> bool:
    """Whether every read prefers the same response (a tie in any read is not consistent)."""
    picks = {read_pick(r) for r in reads}
    return len(picks) == 1 and None not in picks


def first_position_rate(reads: Sequence[PairRead]) -> float | None:
    """The mean probability of letter A over `reads` (1/2 for a judge without position bias)."""
    return fmean(r.probabilities[0] for r in reads) if reads else None


def per_pair_tokens(usages: Sequence[Usage]) -> dict[str, dict[str, float | None]]:
    """Mean tokens of one swap request (both orders), and half of it: one order's cost."""
    total = sum_usage(usages)
    n = len(usages)
    swap = {k: (total[k] / n if n else None) for k in _TOKEN_FIELDS}
    one = {k: (None if v is None else v / 2) for k, v in swap.items()}
    return {"swap": swap, "one_order": one}


def summarize(judged: Sequence[JudgedPair]) -> dict[str, Any]:
    """The report of judged pairs (pure). A failed pair counts as wrong for both accuracies
    and is left out of position consistency, the first-position rate and tokens per pair."""
    ok = [j for j in judged if j.error is None]
    consistency = [j.consistent for j in ok if j.consistent is not None]
    usages = [j.usage for j in ok if j.usage is not None]
    return {
        "n_pairs": len(judged),
        "n_questions": len({j.pair.question_index for j in judged}),
        "accuracy_debiased": fmean(j.correct_debiased for j in judged) if judged else None,
        "accuracy_first_order": fmean(j.correct_first_order for j in judged) if judged else None,
        "position_consistency": fmean(consistency) if consistency else None,
        "first_position_rate": first_position_rate([r for j in ok for r in j.reads]),
        "tokens_per_pair": per_pair_tokens(usages),
        "eval_tokens": sum_usage(usages),
        "n_failed": len(judged) - len(ok),
        "items": [item_row(j) for j in judged],
    }


def item_row(judged: JudgedPair) -> dict[str, Any]:
    """The JSON row of one pair."""
    return {
        "index": judged.index,
        "question_index": judged.pair.question_index,
        "solvers": list(judged.pair.solvers),
        "correct": judged.pair.correct,
        "scores": judged.scores,
        "ranking": judged.ranking,
        "preferences": judged.preferences,
        "reads": [
            {"order": list(r.order), "probabilities": list(r.probabilities)} for r in judged.reads
        ],
        "pick_debiased": judged.pick_debiased,
        "pick_first_order": judged.pick_first_order,
        "correct_debiased": judged.correct_debiased,
        "correct_first_order": judged.correct_first_order,
        "consistent": judged.consistent,
        "error": judged.error,
    }


# --- running ---------------------------------------------------------------------------------


def compare_options(reasoning_tokens: int | None) -> dict[str, Any]:
    """The request options, validated once by the wire model (raises ValueError if invalid)."""
    options: dict[str, Any] = {"mode": "pairwise", "debias": "swap", "return_reads": True}
    if reasoning_tokens is not None:
        options["reasoning_tokens"] = reasoning_tokens
    CompareRequest.model_validate({"question": "check", "responses": ["a", "b"], **options})
    return options


async def judge_pair(
    client: AsyncClient, index: int, pair: LabelledPair, options: dict[str, Any]
) -> JudgedPair:
    """Compare one pair in both orders; a 4xx refusal leaves it unjudged (wrong)."""
    body = {**options, "question": pair.question, "responses": list(pair.responses)}
    try:
        res = await client.compare(**body)
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("pair %d: %s", index, exc)
        return JudgedPair(index=index, pair=pair, error=str(exc))
    by_index = {r.index: r.score for r in res.results}
    if sorted(by_index) != [0, 1]:
        raise ValueError(f"{ENDPOINT} returned indices {sorted(by_index)} for 2 responses")
    reads = [PairRead(tuple(r.order), tuple(r.probabilities)) for r in res.reads or []]
    if sorted(r.order for r in reads) != [(0, 1), (1, 0)]:
        raise ValueError(f"{ENDPOINT} returned reads of orders {[r.order for r in reads]}")
    return JudgedPair(
        index=index,
        pair=pair,
        scores=[by_index[0], by_index[1]],
        ranking=res.ranking,
        preferences=res.preferences,
        reads=reads,
        usage=res.usage,
        model=res.model,
    )


async def run_compare(
    url: str,
    data: Path,
    limit: int | None = None,
    reasoning_tokens: int | None = None,
    concurrency: int = 8,
    *,
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Judge the first `limit` labelled pairs of `data` against the service at `url`."""
    options = compare_options(reasoning_tokens)
    pairs = build_pairs(load_gsm8k_solutions(data), limit)
    if not pairs:
        raise ValueError(f"{data}: no labelled pairs to evaluate (limit={limit})")
    start = time.perf_counter()
    async with open_client(url, concurrency, transport, timeout_s) as client:
        jobs = [judge_pair(client, i, pair, options) for i, pair in enumerate(pairs)]
        judged = await gather_with_progress(jobs, progress)
    wall_s = time.perf_counter() - start
    report = summarize(judged)
    report["wall_s"] = wall_s
    report["config"] = {
        **options,
        "reasoning_tokens": reasoning_tokens,
        "data": str(data),
        "limit": limit,
        "concurrency": concurrency,
        "url": url,
        "model": next((j.model for j in judged if j.model is not None), None),
    }
    return report
