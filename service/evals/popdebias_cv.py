"""PopDebias variants scored by k-fold cross-validation over questions (docs/evaluations.md).

``verifier eval popmcq --variants`` asks the service for the scored items with their raw letter
probabilities (``return_items``), then fits each variant here, offline, on the items of the
other folds and applies it to the held-out fold, so no item is ever scored by a fit that saw
it. Folds split by question: the S1-S6 items of one question share its gold answer and must not
sit on both sides. The variants (each lambda on ``popprior.LAMBDA_GRID``, the smallest on ties,
by the training folds' accuracy, so they use labels):

- ``grid``: ``softmax(log p - lambda * pop)``, the service's ``lambda_fit="grid"``;
- ``entropy``: ``softmax(log p - lambda * u(p) * pop)`` with ``u(p) = H(p) / log K`` in [0, 1]:
  the prior is removed in proportion to the model's own uncertainty, so a confident read (a
  known answer, as in the reverse control S5) is left nearly as it is;
- ``margin``: the grid lambda applied only where the top two probabilities are within
  ``MARGIN`` of each other, a hard form of the same idea.

The bar a variant must meet (issue 34): S2 and S6 accuracy up, S1 and S5 down by no more than
one binomial standard error of ``none``. Pure, no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from service.scoring import debias
from service.scoring.open_recall import binomial_se
from service.scoring.popprior import LAMBDA_GRID

FOLDS: Final = 5
MARGIN: Final = 0.2
VARIANTS: Final = ("none", "grid", "entropy", "margin")
IMPROVE: Final = ("S2", "S6")
GUARD: Final = ("S1", "S5")


@dataclass(frozen=True, slots=True)
class Row:
    question: str
    strategy: str
    probs: tuple[float, ...]
    pops: tuple[float, ...]
    answer: int


def uncertainty(probs: Sequence[float]) -> float:
    """Normalised entropy H(p) / log K: 0 for a one-hot read, 1 for a uniform one."""
    k = len(probs)
    h = -sum(p * math.log(p) for p in probs if p > 0)
    return h / math.log(k) if k > 1 else 0.0


def _margin(probs: Sequence[float]) -> float:
    top = sorted(probs, reverse=True)
    return top[0] - top[1] if len(top) > 1 else 1.0


def apply(variant: str, lam: float, row: Row) -> int:
    """The option a variant chooses for one item at strength ``lam``."""
    if variant == "none" or lam == 0:
        return debias.argmax(row.probs)
    if variant == "entropy":
        scale = lam * uncertainty(row.probs)
    elif variant == "margin":
        scale = lam if _margin(row.probs) < MARGIN else 0.0
    else:
        scale = lam
    return debias.argmax(debias.loglinear(row.probs, row.pops, scale))


def fit(variant: str, train: Sequence[Row]) -> float:
    """The grid lambda with the most right answers on ``train`` (the smallest on ties)."""
    if variant == "none":
        return 0.0
    best, best_hits = 0.0, -1
    for lam in LAMBDA_GRID:
        hits = sum(apply(variant, lam, r) == r.answer for r in train)
        if hits > best_hits:
            best, best_hits = lam, hits
    return best


def folds_of(questions: Sequence[str], k: int, seed: int) -> dict[str, int]:
    """A seeded assignment of each question to one of ``k`` folds, sizes within one."""
    order = sorted(set(questions))
    random.Random(seed).shuffle(order)
    return {q: i % k for i, q in enumerate(order)}


def cross_validate(
    rows: Sequence[Row], k: int = FOLDS, seed: int = 0, variants: Sequence[str] = VARIANTS
) -> dict[str, Any]:
    """Per variant the held-out choice of every row, then accuracy and HPSR per strategy with
    the binomial standard error of accuracy, the lambdas fitted per fold, and the bar."""
    fold = folds_of([r.question for r in rows], k, seed)
    chosen: dict[str, list[int]] = {v: [0] * len(rows) for v in variants}
    lambdas: dict[str, list[float]] = {v: [] for v in variants}
    for f in range(k):
        test = [i for i, r in enumerate(rows) if fold[r.question] == f]
        train = [r for r in rows if fold[r.question] != f]
        for v in variants:
            lam = fit(v, train)
            lambdas[v].append(lam)
            for i in test:
                chosen[v][i] = apply(v, lam, rows[i])
    strategies = sorted({r.strategy for r in rows})
    table = {v: {s: _cell(rows, chosen[v], s) for s in strategies} for v in variants}
    return {
        "folds": k,
        "seed": seed,
        "lambdas": lambdas,
        "table": table,
        "meets_bar": {v: meets_bar(table["none"], table[v]) for v in variants if v != "none"},
    }


def _cell(rows: Sequence[Row], chosen: Sequence[int], strategy: str) -> dict[str, Any]:
    picked = [(r, c) for r, c in zip(rows, chosen, strict=True) if r.strategy == strategy]
    hits = sum(c == r.answer for r, c in picked)
    n = len(picked)
    return {
        "n": n,
        "accuracy": hits / n if n else None,
        "accuracy_se": binomial_se(hits, n) if n else None,
        "hpsr": sum(r.pops[c] > 0.5 for r, c in picked) / n if n else None,
    }


def meets_bar(none: dict[str, dict[str, Any]], variant: dict[str, dict[str, Any]]) -> bool:
    """S2 and S6 up; S1 and S5 no lower than one standard error below ``none``."""
    for s in IMPROVE:
        if s in none and not variant[s]["accuracy"] > none[s]["accuracy"]:
            return False
    for s in GUARD:
        if s in none and variant[s]["accuracy"] < none[s]["accuracy"] - none[s]["accuracy_se"]:
            return False
    return True


def rows_of(result: dict[str, Any]) -> list[Row]:
    """The scored items of a PopMCQ response (``return_items``) as rows."""
    return [
        Row(
            question=it["item_id"],
            strategy=it["strategy"],
            probs=tuple(it["probs"]),
            pops=tuple(it["popularity"]),
            answer=it["answer_index"],
        )
        for it in result["items"]
    ]
