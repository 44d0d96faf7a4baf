"""Fusing outcome and process scores and ranking candidates (docs/methods.md A.5).

Example:
    >>> fuse(1.0, 0.0)
    0.5
    >>> rank([0.2, 0.9, 0.9, 0.1])
    [1, 2, 0, 3]
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def fuse(outcome: float, process: float, alpha: float = 0.5) -> float:
    """``alpha * outcome + (1 - alpha) * process``; alpha 1 is pure outcome, 0 pure process."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}; the paper's setting is 0.5")
    _check_score("outcome", outcome)
    _check_score("process", process)
    return alpha * outcome + (1.0 - alpha) * process


def rank(scores: Sequence[float]) -> list[int]:
    """Candidate indices from best to worst score; ties go to the lowest index."""
    if any(math.isnan(score) for score in scores):
        raise ValueError("cannot rank NaN scores; score unparsable candidates explicitly")
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def _check_score(name: str, value: float) -> None:
    """Reject a score outside [0, 1] (e.g. a raw logit passed by mistake)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} score must be in [0, 1], got {value}; pass sigmoid(logit)")
