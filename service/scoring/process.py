"""Aggregating per-step judgments into one process score (docs/methods.md A.3, A.9).

Each step judgment is given as its logit difference ``ℓ_k("1") − ℓ_k("0")``, so the step
score is ``s_k = σ(logit_k)``.

Example:
    >>> round(aggregate([2.0, -1.0, 0.5], "mean_logit"), 4)
    0.6225
    >>> first_error_step([0.9, 0.4, 0.2], threshold=0.5)
    1
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean
from typing import Literal, get_args

from service.scoring.outcome import LOGIT_CLIP, logit, sigmoid

__all__ = ["LOGIT_CLIP", "Aggregation", "aggregate", "first_error_step", "logit", "sigmoid"]

Aggregation = Literal["min", "mean", "mean_logit", "last", "prod"]


def aggregate(step_logits: Sequence[float], how: Aggregation) -> float:
    """Reduce step logits to a process score in [0, 1].

    "mean_logit" is ``σ(mean(logit_k))`` on the logits themselves (docs/methods.md A.3,
    reconstructed);
    "min", "mean", "last" and "prod" act on the step scores ``σ(logit_k)``.
    Raises ValueError on an empty or non-finite input (A.3: K = 0 has no process score) and
    on an unknown `how`.
    """
    _check_logits(step_logits)
    if how == "mean_logit":
        # Clamp to the range: fmean's rounding may land one ulp outside [min, max].
        mean = min(max(fmean(step_logits), min(step_logits)), max(step_logits))
        return sigmoid(mean)
    scores = [sigmoid(x) for x in step_logits]
    if how == "min":
        return min(scores)
    if how == "mean":
        return fmean(scores)
    if how == "last":
        return scores[-1]
    if how == "prod":
        return math.prod(scores)
    raise ValueError(f"unknown aggregation {how!r}; expected one of {get_args(Aggregation)}")


def first_error_step(step_scores: Sequence[float], threshold: float = 0.5) -> int:
    """0-based index of the first step scoring below `threshold`, or -1 if none (A.9)."""
    for index, score in enumerate(step_scores):
        if score < threshold:
            return index
    return -1


def _check_logits(step_logits: Sequence[float]) -> None:
    """Reject empty and non-finite step logits."""
    if not step_logits:
        raise ValueError(
            "no step logits: a response with zero steps has no process score; "
            "flag it and use the outcome score alone (docs/methods.md A.3)"
        )
    if not all(math.isfinite(x) for x in step_logits):
        raise ValueError(
            "step logits must be finite; replace a missing digit's logprob with the "
            "min(top-k) - 1 surrogate (docs/methods.md A.2)"
        )
