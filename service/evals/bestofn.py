"""Best-of-N through the service: score GSM8K example solutions via POST /v1/score.

For each question the 4 candidate solutions are sent in `SOLVER_ORDER`; the verifier's scores
are ``results[i].final`` and its pick is their argmax (lowest index on ties). The report is
`selection_report` (fractions in [0, 1]) plus token usage, wall time, the config and per-item
rows. A question the service refuses with a 4xx counts as a wrong pick and is listed with its
error (`picked` and `scores` null); any other failure aborts the run.

Result shape::

    {"n_items", "selection_accuracy", "random_accuracy", "first_accuracy", "oracle_accuracy",
     "eval_tokens": {prompt_tokens, generated_tokens, cached_tokens, total_tokens, engine_calls},
     "wall_s": float, "n_failed": int, "config": {...},
     "items": [{"index", "picked", "picked_correct", "scores", "correct": [bool], "error"}]}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Final

import httpx
from verifier_client import AsyncClient, VerifierError
from verifier_client.models import ScoreRequest, ScoreResponse, Usage

from service.evals.common import (
    ProgressFn,
    gather_with_progress,
    is_request_error,
    open_client,
    sum_usage,
)
from service.evals.data import load_gsm8k_solutions
from service.scoring.bestofn import BestOfNItem, selection_report
from service.scoring.fusion import rank

logger = logging.getLogger(__name__)

DEFAULT_FILE: Final = Path("gsm8k") / "example_model_solutions.jsonl"
ENDPOINT: Final = "/v1/score"
_OPTION_FIELDS: Final = frozenset({"method", "mode", "alpha", "aggregation", "reasoning_tokens"})


@dataclass(frozen=True)
class ScoredItem:
    """One question's verifier scores (one per candidate), or the error that replaced them."""

    index: int
    item: BestOfNItem
    scores: list[float] | None
    usage: Usage | None = None
    model: str | None = None
    error: str | None = None

    @property
    def picked(self) -> int | None:
        """Index of the best-scored candidate (lowest index on ties); None if unscored."""
        return None if self.scores is None else rank(self.scores)[0]

    @property
    def picked_correct(self) -> bool:
        picked = self.picked
        return picked is not None and self.item.candidates[picked].is_correct


def score_options(
    method: str, mode: str, alpha: float, aggregation: str, reasoning_tokens: int
) -> dict[str, Any]:
    """The scoring options, validated once by the wire model (raises ValueError if invalid)."""
    options = ScoreRequest.model_validate(
        {
            "question": "options check",
            "responses": ["options check", "options check"],
            "method": method,
            "mode": mode,
            "alpha": alpha,
            "aggregation": aggregation,
            "reasoning_tokens": reasoning_tokens,
        }
    )
    return options.model_dump(include=set(_OPTION_FIELDS))


async def score_item(
    client: AsyncClient, index: int, item: BestOfNItem, options: dict[str, Any]
) -> ScoredItem:
    """Score one question's candidates; a 4xx refusal leaves the item unscored (a wrong pick)."""
    body = {
        **options,
        "question": item.question,
        "responses": [c.solution for c in item.candidates],
    }
    try:
        res = await client.score(**body)
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("item %d: %s", index, exc)
        return ScoredItem(index=index, item=item, scores=None, error=str(exc))
    scores = final_scores(res, len(item.candidates))
    return ScoredItem(index=index, item=item, scores=scores, usage=res.usage, model=res.model)


def final_scores(res: ScoreResponse, n: int) -> list[float]:
    """`results[i].final` by candidate index (results may come in any order); an undecided
    rule-only result (final null) counts as 0."""
    by_index = {r.index: r.final or 0.0 for r in res.results}
    if sorted(by_index) != list(range(n)):
        raise ValueError(f"/v1/score returned indices {sorted(by_index)} for {n} responses")
    return [by_index[i] for i in range(n)]


def summarize(scored: Sequence[ScoredItem]) -> dict[str, Any]:
    """Selection report, summed usage and per-item rows (pure).

    `selection_report` needs a score row per item; an unscored item gets a placeholder row and
    `selection_accuracy` is then recomputed so that it counts as a wrong pick.
    """
    rows = [s.scores or [0.0] * len(s.item.candidates) for s in scored]
    report: dict[str, Any] = dict(selection_report([s.item for s in scored], rows))
    n_failed = sum(s.scores is None for s in scored)
    if n_failed:
        report["selection_accuracy"] = fmean(s.picked_correct for s in scored)
    report["eval_tokens"] = sum_usage(s.usage for s in scored if s.usage is not None)
    report["n_failed"] = n_failed
    report["items"] = [item_row(s) for s in scored]
    return report


def item_row(scored: ScoredItem) -> dict[str, Any]:
    """The JSON row of one question."""
    return {
        "index": scored.index,
        "picked": scored.picked,
        "picked_correct": scored.picked_correct,
        "scores": scored.scores,
        "correct": [c.is_correct for c in scored.item.candidates],
        "error": scored.error,
    }


async def run_bestofn(
    url: str,
    data: Path,
    limit: int | None = None,
    method: str = "fused",
    mode: str = "direct",
    alpha: float = 0.5,
    aggregation: str = "mean_logit",
    reasoning_tokens: int = 256,
    concurrency: int = 8,
    *,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Run Best-of-N on questions from `data` (up to `limit`) against the service at `url`."""
    options = score_options(method, mode, alpha, aggregation, reasoning_tokens)
    items = load_gsm8k_solutions(data, limit)
    if not items:
        raise ValueError(f"{data}: no items to evaluate (limit={limit})")
    start = time.perf_counter()
    async with open_client(url, concurrency, transport) as client:
        jobs = [score_item(client, i, item, options) for i, item in enumerate(items)]
        scored = await gather_with_progress(jobs, progress)
    wall_s = time.perf_counter() - start
    report = summarize(scored)
    report["wall_s"] = wall_s
    report["config"] = {
        **options,
        "data": str(data),
        "limit": limit,
        "concurrency": concurrency,
        "url": url,
        "model": next((s.model for s in scored if s.model is not None), None),
    }
    return report
