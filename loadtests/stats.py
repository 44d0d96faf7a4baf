"""Pure helpers of the benchmarks: percentiles, GSM8K answers, Best-of-N baselines."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from statistics import fmean
from typing import Final

_NUMBER: Final = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99, mean and max of `values` (None each when empty)."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": fmean(values) if values else None,
        "max": max(values) if values else None,
    }


def final_answer(solution: str) -> str | None:
    """The final answer of a GSM8K solution: the text after the last ``A:`` (the example
    solutions end with ``A: 26``), else the last number; commas dropped, so 1,000 = 1000."""
    tail = solution.rsplit("A:", 1)[1] if "A:" in solution else solution
    numbers = _NUMBER.findall(tail)
    if not numbers:
        return None
    value = str(numbers[-1]).replace(",", "")
    return value.rstrip("0").rstrip(".") if "." in value else value


def majority_pick(answers: Sequence[str | None]) -> int:
    """Index of the candidate a majority vote picks: the most frequent final answer, ties
    broken by the answer that appears first; candidates without an answer never win unless
    none has one (then the first)."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return 0
    best = max(counts.values())
    return next(i for i, a in enumerate(answers) if a is not None and counts[a] == best)


def argmax_first(scores: Sequence[float]) -> int:
    """Index of the highest score, the lowest index on ties."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))
