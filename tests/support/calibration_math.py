"""Calibration figures written out by hand, to check the service's against (never its code)."""

from __future__ import annotations

from typing import Any

import numpy as np


def by_hand_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int) -> list[dict[str, Any]]:
    """Equal-mass bins written out: sorted by probability, the first n % B bins one larger."""
    order = np.argsort(probs, kind="stable")
    sizes = [len(probs) // n_bins + (1 if b < len(probs) % n_bins else 0) for b in range(n_bins)]
    bins, at = [], 0
    for size in sizes:
        idx = order[at : at + size]
        at += size
        bins.append(
            {"count": size, "mean_predicted": probs[idx].mean(), "observed": labels[idx].mean()}
        )
    return bins


def ece_of_bins(bins: list[dict[str, Any]]) -> float:
    n = sum(b["count"] for b in bins)
    return float(sum(b["count"] / n * abs(b["mean_predicted"] - b["observed"]) for b in bins))


def pairwise_auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = sum(float(p > n) + 0.5 * float(p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def binary_nll(p: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
