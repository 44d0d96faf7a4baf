"""PopMCQ metrics (docs/methods.md B.3) and the paired McNemar test (C.3): pure, no I/O.

Each function takes per-item records of one (model, dataset, strategy) cell. A record holds the
chosen option's popularity and probability, the gold option's popularity, and whether the
choice was right. Undefined values are NaN, never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

# Popularity buckets of the chosen option: low <= 0.3, mid (0.3, 0.7], high > 0.7.
BUCKETS = ("low", "mid", "high")


@dataclass(frozen=True, slots=True)
class Choice:
    correct: bool
    pop_chosen: float
    pop_gold: float
    confidence: float  # the probability of the chosen option


def accuracy(rows: Sequence[Choice]) -> float:
    return sum(r.correct for r in rows) / len(rows) if rows else math.nan


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho with average ranks for ties; NaN where either side is constant."""
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def popularity_bias(rows: Sequence[Choice]) -> float:
    """rho between correctness (0/1) and the chosen option's popularity."""
    return spearman([float(r.correct) for r in rows], [r.pop_chosen for r in rows])


def relative_popularity_bias(rows: Sequence[Choice]) -> float:
    """The OpenReview variant: rho between correctness and pop(chosen) - pop(gold)."""
    return spearman([float(r.correct) for r in rows], [r.pop_chosen - r.pop_gold for r in rows])


def hpsr(rows: Sequence[Choice]) -> float:
    """High-popularity selection rate: share of choices with popularity strictly above 0.5."""
    return sum(r.pop_chosen > 0.5 for r in rows) / len(rows) if rows else math.nan


def pop_gap(rows: Sequence[Choice]) -> float:
    """Mean pop(chosen) - pop(gold): positive when the model prefers the more popular."""
    return sum(r.pop_chosen - r.pop_gold for r in rows) / len(rows) if rows else math.nan


def confidence(rows: Sequence[Choice]) -> float:
    return sum(r.confidence for r in rows) / len(rows) if rows else math.nan


def bucket_of(pop: float) -> str:
    return "low" if pop <= 0.3 else "mid" if pop <= 0.7 else "high"


def overconfidence(rows: Sequence[Choice]) -> dict[str, float]:
    """Confidence minus accuracy per popularity bucket of the chosen option (NaN if empty)."""
    out = {}
    for name in BUCKETS:
        inside = [r for r in rows if bucket_of(r.pop_chosen) == name]
        out[name] = confidence(inside) - accuracy(inside) if inside else math.nan
    return out


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> tuple[int, int, float]:
    """Paired exact McNemar test: (b, c, two-sided p) where b = only A right, c = only B right.

    The p-value is the two-sided binomial test of b successes in b + c trials at 0.5; 1.0 when
    the two never disagree.
    """
    b = sum(x and not y for x, y in zip(a_correct, b_correct, strict=True))
    c = sum(y and not x for x, y in zip(a_correct, b_correct, strict=True))
    if b + c == 0:
        return b, c, 1.0
    return b, c, float(stats.binomtest(b, b + c, 0.5).pvalue)
