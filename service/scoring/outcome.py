"""Outcome score math (docs/methods.md A.2, A.6): s = sigmoid(l1 - l0); samples average as
scores."""

from __future__ import annotations

import math
from collections.abc import Sequence

LOGIT_CLIP = 1e-6


def sigmoid(x: float) -> float:
    """Numerically stable logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def logit(p: float) -> float:
    """Inverse of sigmoid, clipped so 0 and 1 stay finite."""
    p = min(max(p, LOGIT_CLIP), 1.0 - LOGIT_CLIP)
    return math.log(p / (1.0 - p))


def combine_samples(logits: Sequence[float]) -> tuple[float, float]:
    """(score, logit) of M sampled judgments: the mean of per-sample scores (docs/methods.md A.6).

    One sample returns its own logit unchanged, so ``score == sigmoid(logit)`` always holds.
    """
    if not logits:
        raise ValueError("no judgments to combine")
    if len(logits) == 1:
        return sigmoid(logits[0]), logits[0]
    score = sum(sigmoid(x) for x in logits) / len(logits)
    return score, logit(score)


def verdict(score: float, threshold: float = 0.5) -> int:
    return 1 if score >= threshold else 0


def rationale_finish(finish_reason: str | None, stop_reason: str | None) -> str:
    """How a rationale ended: "verdict" (the model wrote the marker), "eos" or "length".

    "length" means the budget ran out; the verdict is then forced right after the cut.
    """
    if finish_reason == "length":
        return "length"
    if stop_reason:
        return "verdict"
    return "eos"
