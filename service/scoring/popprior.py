"""PopDebias' lambda, fitted so that knowing the answer cannot pass for a popularity prior.

docs/methods.md B.5. The within-item regression of log p on popularity (:func:`debias.fit_lambda`)
measures "the model prefers popular options" only where popularity is independent of being
right. On items whose distractors are chosen *above* the gold's popularity (PopMCQ S2-S4) a
model that knows the answer puts its mass on the unpopular option, and the slope comes out
negative: applied, it would add a popularity prior instead of removing one. Three estimators:

- ``question_free`` (the default, label-free): the same regression on letter reads whose
  question is hidden (:data:`HIDDEN_QUESTION`), so no read can know the answer and whatever
  preference for popular options remains is the prior itself;
- ``items`` (label-free): the regression on the ordinary reads, valid only for calibration
  items whose distractors are drawn independently of popularity (S1-style);
- ``grid`` (uses labels, on the calibration split only): the lambda in ``[0, 10]`` that
  maximises calibration accuracy, the smallest one on ties.

A regression slope below 0 is clipped to 0 and reported (``lambda_raw``, ``clipped``): lambda
is a prior's strength, and a negative one would reward popularity. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from service.scoring import debias

LambdaFit = Literal["question_free", "items", "grid"]
LAMBDA_FITS: Final[tuple[LambdaFit, ...]] = ("question_free", "items", "grid")
# The grid fit's candidates: [0, 10] in steps of 0.1 (the paper's search range).
LAMBDA_GRID: Final[tuple[float, ...]] = tuple(i / 10 for i in range(101))
# Stands in for the question in a question-free read: the MCQ prompt stays as it is (same
# system turn, same letters, same answer slot), so only the question's content is missing.
HIDDEN_QUESTION: Final = "(hidden) Pick the option most likely to be the correct answer."


@dataclass(frozen=True, slots=True)
class FittedLambda:
    """A fitted lambda: ``value`` is what is applied, ``raw`` what the estimator returned."""

    value: float
    raw: float
    clipped: bool
    estimator: LambdaFit

    def params(self) -> dict[str, Any]:
        return {
            "lambda": self.value,
            "lambda_raw": self.raw,
            "clipped": self.clipped,
            "lambda_fit": self.estimator,
        }


def clip(raw: float, estimator: LambdaFit) -> FittedLambda:
    """``max(raw, 0)``, with the raw value kept for the report."""
    return FittedLambda(value=max(raw, 0.0), raw=raw, clipped=raw < 0, estimator=estimator)


def fit_regression(
    probs: Sequence[Sequence[float]],
    pops: Sequence[Sequence[float]],
    kind: debias.Phi,
    estimator: LambdaFit,
) -> FittedLambda:
    """The within-item centred regression slope, clipped at 0.

    ``probs`` are question-free reads for ``question_free`` and ordinary reads of S1-style
    items for ``items``; the maths is the same, the reads are what make it sound.
    """
    raw = debias.fit_lambda(probs, pops, kind) if probs else 0.0
    return clip(raw, estimator)


def fit_grid(
    probs: Sequence[Sequence[float]],
    pops: Sequence[Sequence[float]],
    answers: Sequence[int],
    kind: debias.Phi,
    grid: Sequence[float] = LAMBDA_GRID,
) -> FittedLambda:
    """The grid lambda with the best calibration accuracy; ties go to the smallest.

    Preferring the smallest lambda on ties keeps a judge that is already right untouched:
    when no lambda helps, the fit is 0.
    """
    if len(answers) != len(probs):
        raise ValueError(f"{len(answers)} answers for {len(probs)} calibration items")
    best, best_correct = 0.0, -1
    for lam in sorted(grid):
        correct = sum(
            debias.argmax(debias.loglinear(p, pop, lam, kind)) == gold
            for p, pop, gold in zip(probs, pops, answers, strict=True)
        )
        if correct > best_correct:
            best, best_correct = lam, correct
    return FittedLambda(value=best, raw=best, clipped=False, estimator="grid")
