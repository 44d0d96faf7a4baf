"""Best-of-N selection quality on GSM8K example solutions (docs/methods.md A.5, Part D).

Pure: the data file is read by `service.evals.data.load_gsm8k_solutions`.

Example:
    >>> item = BestOfNItem("q", "A: 1", (Candidate("a", "x", False), Candidate("b", "y", True)))
    >>> report = selection_report([item], [[0.1, 0.7]])
    >>> report["selection_accuracy"], report["random_accuracy"], report["first_accuracy"]
    (1.0, 0.5, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Final, NamedTuple, TypedDict

from service.scoring.fusion import rank

SOLVER_ORDER: Final = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


class Candidate(NamedTuple):
    """One solver's solution to a question and whether its final answer is correct."""

    solver_name: str
    solution: str
    is_correct: bool


@dataclass(frozen=True)
class BestOfNItem:
    """A question with its reference solution and candidates in `SOLVER_ORDER`."""

    question: str
    ground_truth: str
    candidates: tuple[Candidate, ...]


class SelectionReport(TypedDict):
    """Best-of-N accuracies as fractions in [0, 1]."""

    n_items: int
    selection_accuracy: float  # the verifier's argmax (lowest index on ties) is correct
    random_accuracy: float  # expected accuracy of a uniformly random pick
    first_accuracy: float  # candidate 0 is correct
    oracle_accuracy: float  # at least one candidate is correct (upper bound)


def selection_report(
    items: Sequence[BestOfNItem], scores: Sequence[Sequence[float]]
) -> SelectionReport:
    """Compare the verifier's Best-of-N pick with random, first-candidate and oracle picks.

    `scores[i][j]` is the verifier score of candidate j of item i; higher is better.
    """
    _check_scores_shape(items, scores)
    picks = [
        item.candidates[rank(row)[0]].is_correct for item, row in zip(items, scores, strict=True)
    ]
    return SelectionReport(
        n_items=len(items),
        selection_accuracy=fmean(picks),
        random_accuracy=fmean(_fraction_correct(item) for item in items),
        first_accuracy=fmean(item.candidates[0].is_correct for item in items),
        oracle_accuracy=fmean(any(c.is_correct for c in item.candidates) for item in items),
    )


def _fraction_correct(item: BestOfNItem) -> float:
    """Share of the item's candidates that are correct."""
    return fmean(c.is_correct for c in item.candidates)


def _check_scores_shape(items: Sequence[BestOfNItem], scores: Sequence[Sequence[float]]) -> None:
    """Require one score per candidate and at least one item."""
    if not items:
        raise ValueError("selection_report needs at least one item")
    if len(scores) != len(items):
        raise ValueError(f"got {len(scores)} score rows for {len(items)} items; pass one per item")
    for i, (item, row) in enumerate(zip(items, scores, strict=True)):
        if len(row) != len(item.candidates) or not row:
            raise ValueError(
                f"item {i}: got {len(row)} scores for {len(item.candidates)} candidates; "
                "pass one score per candidate"
            )
