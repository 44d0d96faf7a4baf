"""Calibration of multi-class reads (decisions, MCQ): option logits, per-question-type
temperatures fitted with folds grouped by item, and their metrics (docs/methods.md J.6, J.7).

The binary maps, the fits and the metrics they share are in ``service.scoring.calibration``.
Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from service.scoring.calibration import (
    DEFAULT_BINS,
    DEFAULT_FOLDS,
    MIN_EXAMPLES,
    PAIR_CLIP,
    BinaryMetrics,
    CalibrationInputError,
    Floats,
    Ints,
    Temperature,
    auroc,
    check_multiclass,
    ece_from_bins,
    fit_temperature_multiclass,
    reliability_bins,
)


def option_logits(probs: Sequence[float]) -> Floats:
    """A row of option probabilities as the logits a temperature divides: ``log p``, a
    probability that underflowed to 0 held at ``log(PAIR_CLIP**25)`` (about -690) so every
    logit is finite. ``softmax(option_logits(p)) == p`` up to that floor."""
    p = np.asarray(probs, dtype=np.float64)
    return np.asarray(np.log(np.clip(p, PAIR_CLIP**25, 1.0)), dtype=np.float64)


def multiclass_metrics(
    option_logits_rows: Sequence[Floats] | Sequence[Sequence[float]],
    answers: Sequence[int] | Ints,
    n_bins: int = DEFAULT_BINS,
) -> BinaryMetrics:
    """Calibration of multi-class reads (each row's ``softmax``), top-label: ECE and the
    reliability bins compare each read's confidence (its largest probability) with whether
    that option is the answer; AUROC is the confidence's at telling right from wrong;
    ``base_rate`` is the accuracy and ``mean_probability`` the mean confidence. NLL is the
    mean ``-log p(answer)`` and Brier the multi-class one, ``sum_j (p_j - [j = answer])^2``
    (0 to 2)."""
    rows, y = check_multiclass(option_logits_rows, answers, min_examples=1)
    logp = [special.log_softmax(z) for z in rows]
    p = [np.exp(lp) for lp in logp]
    top = np.asarray([int(np.argmax(row)) for row in p], dtype=np.int64)
    confidence = np.asarray([row[t] for row, t in zip(p, top, strict=True)], dtype=np.float64)
    right = (top == y).astype(np.int64)
    bins = reliability_bins(confidence, right, n_bins)
    onehot_sq = [
        float(np.sum((row - (np.arange(len(row)) == a)) ** 2)) for row, a in zip(p, y, strict=True)
    ]
    return BinaryMetrics(
        n=len(y),
        base_rate=float(right.mean()),
        mean_probability=float(confidence.mean()),
        nll=float(-np.mean([lp[a] for lp, a in zip(logp, y, strict=True)])),
        brier=float(np.mean(onehot_sq)),
        ece=ece_from_bins(bins),
        auroc=auroc(confidence, right),
        bins=bins,
    )


def group_folds(groups: Sequence[int], k: int, seed: int = 0) -> Ints:
    """A fold index in ``[0, k)`` per row, the same for every row of one group (the questions
    of one decision input share its text, so they are held out together): the distinct groups
    shuffled with ``seed`` and dealt round-robin. Deterministic."""
    if k < 2:
        raise CalibrationInputError(f"k-fold needs k >= 2 folds, got {k}")
    distinct = sorted(set(groups))
    if len(distinct) < k:
        raise CalibrationInputError(f"{k} folds need at least {k} examples, got {len(distinct)}")
    order = np.random.default_rng(seed).permutation(len(distinct))
    fold_of_group = {distinct[g]: i % k for i, g in enumerate(order)}
    return np.asarray([fold_of_group[g] for g in groups], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class MulticlassFit:
    """One temperature fitted on a set of multi-class reads, and the reads it gives: on the
    whole set (``fitted``) and held out by k-fold (``held_out``, each fold through the
    temperature fitted on the others, listed in ``fold_temperatures``)."""

    temperature: Temperature
    fitted: list[Floats]
    held_out: list[Floats]
    fold_temperatures: list[float]


def fit_multiclass(
    option_logits_rows: Sequence[Floats], answers: Sequence[int] | Ints, folds: Ints
) -> MulticlassFit:
    """`fit_temperature_multiclass` on all rows, and on each fold's complement (a complement
    under `MIN_EXAMPLES` rows is refused)."""
    rows, y = check_multiclass(option_logits_rows, answers)
    t = fit_temperature_multiclass(rows, y)
    held: list[Floats | None] = [None] * len(rows)
    fold_ts = []
    for f in sorted({int(v) for v in folds}):
        test = [i for i in range(len(rows)) if folds[i] == f]
        train = [i for i in range(len(rows)) if folds[i] != f]
        if len(train) < MIN_EXAMPLES:
            raise CalibrationInputError(
                f"fold {f} leaves {len(train)} examples to fit on; need {MIN_EXAMPLES}"
            )
        tf = fit_temperature_multiclass([rows[i] for i in train], y[train])
        fold_ts.append(tf.t)
        for i in test:
            held[i] = tf.apply(rows[i])
    held_out = [h for h in held if h is not None]
    assert len(held_out) == len(rows)  # every row is in one fold, scored once
    return MulticlassFit(
        temperature=t,
        fitted=[t.apply(z) for z in rows],
        held_out=held_out,
        fold_temperatures=fold_ts,
    )


@dataclass(frozen=True, slots=True)
class TypedFit:
    """A temperature per kind of multi-class read (a decision's question type), fitted and
    cross-validated with folds held out by group, and the metrics of every kind pooled."""

    by_kind: dict[str, MulticlassFit]
    kind_metrics: dict[str, dict[str, BinaryMetrics]]
    metrics: dict[str, BinaryMetrics]  # raw, fitted, held_out: every kind pooled


def calibrate_by_kind(
    option_logits_rows: Sequence[Floats],
    answers: Sequence[int],
    kinds: Sequence[str],
    groups: Sequence[int],
    *,
    folds: int = DEFAULT_FOLDS,
    n_bins: int = DEFAULT_BINS,
    seed: int = 0,
) -> TypedFit:
    """One temperature per kind (`fit_multiclass`), k-fold by ``group_folds(groups)``; metrics
    (`multiclass_metrics`) of the raw, fitted and held-out reads, per kind and pooled."""
    if not len(option_logits_rows) == len(answers) == len(kinds) == len(groups):
        raise CalibrationInputError("one answer, kind and group per row of option logits")
    fold_of = group_folds(groups, folds, seed)
    fitted: list[Floats | None] = [None] * len(answers)
    held: list[Floats | None] = [None] * len(answers)
    by_kind: dict[str, MulticlassFit] = {}
    kind_metrics: dict[str, dict[str, BinaryMetrics]] = {}
    for kind in sorted(set(kinds)):
        mine = [i for i, k in enumerate(kinds) if k == kind]
        rows = [np.asarray(option_logits_rows[i], dtype=np.float64) for i in mine]
        y = [answers[i] for i in mine]
        fit = fit_multiclass(rows, y, fold_of[mine])
        by_kind[kind] = fit
        for i, f, h in zip(mine, fit.fitted, fit.held_out, strict=True):
            fitted[i], held[i] = f, h
        kind_metrics[kind] = {
            "raw": multiclass_metrics(rows, y, n_bins),
            "fitted": multiclass_metrics(fit.fitted, y, n_bins),
            "held_out": multiclass_metrics(fit.held_out, y, n_bins),
        }
    every = [f for f in fitted if f is not None]
    every_held = [h for h in held if h is not None]
    return TypedFit(
        by_kind=by_kind,
        kind_metrics=kind_metrics,
        metrics={
            "raw": multiclass_metrics(option_logits_rows, answers, n_bins),
            "fitted": multiclass_metrics(every, answers, n_bins),
            "held_out": multiclass_metrics(every_held, answers, n_bins),
        },
    )


def tempered(probs: Sequence[float], t: float) -> list[float]:
    """A row of option probabilities through a temperature: ``softmax(log p / T)``.

    Example:
        >>> [round(p, 4) for p in tempered([0.8, 0.2], 2.0)]
        [0.6667, 0.3333]
    """
    return [float(p) for p in special.softmax(option_logits(probs) / t)]
