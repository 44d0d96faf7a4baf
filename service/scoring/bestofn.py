"""Best-of-N selection quality on GSM8K example solutions (docs/methods.md A.5, Part D).

`load_gsm8k_solutions` is the module's only I/O; everything else is pure.

Example:
    >>> item = BestOfNItem("q", "A: 1", (Candidate("a", "x", False), Candidate("b", "y", True)))
    >>> report = selection_report([item], [[0.1, 0.7]])
    >>> report["selection_accuracy"], report["random_accuracy"], report["first_accuracy"]
    (1.0, 0.5, 0.0)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Final, NamedTuple, TypedDict

from pydantic import Field, ValidationError

from service.scoring.fusion import rank
from service.scoring.rows import DataRow, row_error

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


class SolverEntry(DataRow):
    """One solver's entry in a row: ``{"is_correct": bool, "solution": str}``."""

    is_correct: bool
    solution: str


class SolutionsRow(DataRow):
    """One line of ``example_model_solutions.jsonl``; a solver entry per `SOLVER_ORDER` name."""

    question: str
    ground_truth: str
    finetuning_6b: SolverEntry = Field(alias="6b_finetuning")
    verification_6b: SolverEntry = Field(alias="6b_verification")
    finetuning_175b: SolverEntry = Field(alias="175b_finetuning")
    verification_175b: SolverEntry = Field(alias="175b_verification")

    def to_item(self) -> BestOfNItem:
        entries = (
            self.finetuning_6b,
            self.verification_6b,
            self.finetuning_175b,
            self.verification_175b,
        )
        candidates = tuple(
            Candidate(name, e.solution, e.is_correct)
            for name, e in zip(SOLVER_ORDER, entries, strict=True)
        )
        return BestOfNItem(self.question, self.ground_truth, candidates)


def parse_gsm8k_row(row: Mapping[str, object]) -> BestOfNItem:
    """Build a `BestOfNItem` from one decoded line of ``example_model_solutions.jsonl``.

    A bad row raises ValueError naming each bad field, e.g. ``field '6b_finetuning.solution':
    Field required``.
    """
    try:
        return SolutionsRow.model_validate(row).to_item()
    except ValidationError as exc:
        raise ValueError(row_error(exc)) from exc


def load_gsm8k_solutions(path: Path, limit: int | None = None) -> list[BestOfNItem]:
    """Read up to `limit` items (all when None) from a GSM8K example-solutions JSONL file."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    items: list[BestOfNItem] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if limit is not None and len(items) >= limit:
                break
            if not line.strip():
                continue
            try:
                items.append(parse_gsm8k_row(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from exc
    return items


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
