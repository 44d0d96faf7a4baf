"""Best-of-N selection quality on GSM8K example solutions (METHODS A.5, Part D).

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
from typing import Final, NamedTuple, TypedDict, TypeVar

from service.scoring.fusion import rank

SOLVER_ORDER: Final = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")

_T = TypeVar("_T")


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


def parse_gsm8k_row(row: Mapping[str, object]) -> BestOfNItem:
    """Build a `BestOfNItem` from one decoded line of ``example_model_solutions.jsonl``."""
    candidates = tuple(_parse_candidate(row, name) for name in SOLVER_ORDER)
    return BestOfNItem(
        question=_require(row, "question", str),
        ground_truth=_require(row, "ground_truth", str),
        candidates=candidates,
    )


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


def _parse_candidate(row: Mapping[str, object], name: str) -> Candidate:
    """Read one solver entry ``{is_correct, solution}`` from a row."""
    entry = row.get(name)
    if not isinstance(entry, Mapping):
        raise ValueError(f"missing or malformed solver entry {name!r}")
    try:
        return Candidate(
            solver_name=name,
            solution=_require(entry, "solution", str),
            is_correct=_require(entry, "is_correct", bool),
        )
    except ValueError as exc:
        raise ValueError(f"solver entry {name!r}: {exc}") from exc


def _require(mapping: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    """Return `mapping[key]` if it is a `kind`, else raise a ValueError naming the field."""
    value = mapping.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value
