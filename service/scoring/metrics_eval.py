"""ProcessBench data, answer parsing and metric (docs/methods.md A.7-A.9).

Pure: the data file is read by `service.evals.data.load_processbench`.

Example:
    >>> extract_boxed_int(r"first \\boxed{3}, finally \\boxed{ -1 }")
    -1
    >>> scores = processbench_metric([-1, 2, None], [-1, 2, 0])
    >>> scores["acc_err"], scores["acc_corr"], scores["f1"]
    (50.0, 100.0, 66.66666666666667)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Final, TypedDict

# Same regex as ProcessBench's extract_answer: nested braces are deliberately unsupported.
_BOXED_RE: Final = re.compile(r"\\boxed\{([^}]*)\}")


@dataclass(frozen=True)
class ProcessBenchItem:
    """One ProcessBench item; `label` is the 0-based first wrong step, or -1 if none."""

    id: str
    generator: str
    problem: str
    steps: tuple[str, ...]
    final_answer_correct: bool
    label: int


class ProcessBenchScores(TypedDict):
    """ProcessBench accuracies and F1 in percent (0-100); NaN when undefined."""

    acc_err: float  # accuracy on items with an error (label != -1)
    acc_corr: float  # accuracy on fully correct items (label == -1)
    f1: float  # harmonic mean of the two
    n_err: int
    n_corr: int


def extract_boxed_int(text: str) -> int | None:
    r"""Integer in the last ``\boxed{...}`` of `text`, or None if absent or not an int (A.8)."""
    matches = _BOXED_RE.findall(text)
    if not matches:
        return None
    try:
        return int(matches[-1].strip())
    except ValueError:
        return None


def processbench_metric(
    preds: Sequence[int | None],
    labels: Sequence[int],
    n_steps: Sequence[int] | None = None,
) -> ProcessBenchScores:
    """ProcessBench acc_err, acc_corr and F1 in percent (docs/methods.md A.9).

    A prediction matches when it equals the label; None, or (given `n_steps`) a value outside
    [-1, n_steps - 1], is always wrong. `n_steps`, when given, also validates the labels.
    F1 is 0 when both accuracies are 0; an empty class makes its accuracy NaN, and F1 NaN.
    """
    _check_metric_inputs(preds, labels, n_steps)
    # Labels are validated to lie in [-1, n_steps - 1], so an out-of-range pred never matches.
    matches = [p is not None and p == y for p, y in zip(preds, labels, strict=True)]
    err = [m for m, y in zip(matches, labels, strict=True) if y != -1]
    corr = [m for m, y in zip(matches, labels, strict=True) if y == -1]
    acc_err = 100.0 * fmean(err) if err else math.nan
    acc_corr = 100.0 * fmean(corr) if corr else math.nan
    return ProcessBenchScores(
        acc_err=acc_err,
        acc_corr=acc_corr,
        f1=_f1(acc_err, acc_corr),
        n_err=len(err),
        n_corr=len(corr),
    )


def _f1(acc_err: float, acc_corr: float) -> float:
    """Harmonic mean of the two accuracies, 0 when both are 0, NaN when either is NaN."""
    if math.isnan(acc_err) or math.isnan(acc_corr):
        return math.nan
    if acc_err + acc_corr == 0:
        return 0.0
    return 2.0 * acc_err * acc_corr / (acc_err + acc_corr)


def _check_metric_inputs(
    preds: Sequence[int | None], labels: Sequence[int], n_steps: Sequence[int] | None
) -> None:
    """Require aligned lengths and labels that are valid step indices."""
    if len(preds) != len(labels):
        raise ValueError(f"got {len(preds)} predictions for {len(labels)} labels")
    if n_steps is not None and len(n_steps) != len(labels):
        raise ValueError(f"got {len(n_steps)} step counts for {len(labels)} labels")
    if any(label < -1 for label in labels):
        raise ValueError("labels must be -1 (no error) or a 0-based step index")
    if n_steps is not None and any(y >= k for y, k in zip(labels, n_steps, strict=True)):
        raise ValueError("every label must be < its item's step count")
