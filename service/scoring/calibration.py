"""Calibration of judge probabilities: temperature and Platt scaling, and how to measure it.

docs/methods.md J. A judge's raw read is a logit ``z`` (outcome: ``logp('1') - logp('0')``;
decisions and MCQ: one logit per option). Two monotone maps are fitted by negative
log-likelihood (scipy.optimize) on labelled reads:

- **temperature**: ``p = sigmoid(z / T)`` (binary) or ``softmax(z / T)`` over the options
  (multi-class), one scalar ``T > 0``;
- **Platt**: ``p = sigmoid(a * z + b)`` with ``a > 0`` (binary only).

Both keep the order of the scores, so AUROC and argmax never change; ``a`` is held above 0 so
that a judge ranking worse than chance is never silently inverted. Fits are bounded
(`T_BOUNDS`, `PLATT_A_BOUNDS`, `PLATT_B_BOUNDS`): on separable or chance-level data the NLL
optimum runs off to a limit, and the fit reports ``at_bound`` when it stopped there.

Metrics: NLL, Brier, ECE over **equal-mass** bins (``DEFAULT_BINS`` = 10 bins of sizes that
differ by at most one, by predicted probability), the reliability bins themselves and AUROC
(Mann-Whitney, ties counted one half). `calibrate_binary` adds deterministic stratified k-fold
cross-validation: each fold is scored by maps fitted on the other folds only.

Bad input raises `CalibrationInputError` (a ValueError) naming the problem. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

from service.scoring.finite import finite_or_none

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Method = Literal["raw", "temperature", "platt"]
METHODS: Final[tuple[Method, ...]] = ("raw", "temperature", "platt")

MIN_EXAMPLES: Final = 8  # the smallest set (and training split) a map is fitted on
DEFAULT_BINS: Final = 10
DEFAULT_FOLDS: Final = 5
T_BOUNDS: Final = (1e-2, 1e3)
PLATT_A_BOUNDS: Final = (1e-3, 1e3)
PLATT_B_BOUNDS: Final = (-100.0, 100.0)
_AT_BOUND_RTOL: Final = 1e-3
PAIR_CLIP: Final = 1e-12  # a preference read as certain is fitted as this far from 0 or 1


class CalibrationInputError(ValueError):
    """Labelled reads a calibration cannot be fitted or scored on; the message says why."""


# --- the maps --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    """The raw read, unchanged: ``p = sigmoid(z)``."""

    method: Literal["raw"] = "raw"

    def apply(self, logits: Floats) -> Floats:
        return np.asarray(logits, dtype=np.float64)

    def parameters(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class Temperature:
    """``z / T``: ``sigmoid`` of it for a binary read, ``softmax`` over a row of option logits.

    Example:
        >>> Temperature(t=2.0).apply(np.array([4.0, -1.0])).tolist()
        [2.0, -0.5]
    """

    t: float
    at_bound: bool = False
    method: Literal["temperature"] = "temperature"

    def apply(self, logits: Floats) -> Floats:
        return np.asarray(logits, dtype=np.float64) / self.t

    def parameters(self) -> dict[str, Any]:
        return {"temperature": self.t, "at_bound": self.at_bound}


@dataclass(frozen=True, slots=True)
class Platt:
    """``a * z + b``, the calibrated logit of a binary read (``a > 0``).

    Example:
        >>> Platt(a=0.5, b=-1.0).apply(np.array([4.0, 0.0])).tolist()
        [1.0, -1.0]
    """

    a: float
    b: float
    at_bound: bool = False
    method: Literal["platt"] = "platt"

    def apply(self, logits: Floats) -> Floats:
        return self.a * np.asarray(logits, dtype=np.float64) + self.b

    def parameters(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "at_bound": self.at_bound}


Calibrator = Identity | Temperature | Platt


def calibrator_of(method: str, parameters: dict[str, Any]) -> Calibrator:
    """The map a stored calibration names (its ``parameters()``), to apply it again.

    Example:
        >>> calibrator_of("platt", {"a": 0.5, "b": -1.0}).apply(np.array([4.0])).tolist()
        [1.0]
    """
    if method == "temperature":
        return Temperature(t=float(parameters["temperature"]))
    if method == "platt":
        return Platt(a=float(parameters["a"]), b=float(parameters["b"]))
    if method == "raw":
        return Identity()
    raise CalibrationInputError(f"unknown calibration method {method!r}")


def calibrated_probability(method: str, parameters: dict[str, Any], logit: float) -> float:
    """One raw logit through a stored map: ``sigmoid(map(logit))``.

    Example:
        >>> calibrated_probability("temperature", {"temperature": 2.0}, 0.0)
        0.5
    """
    z = calibrator_of(method, parameters).apply(np.array([logit], dtype=np.float64))
    return float(special.expit(z[0]))


def pair_labels(n: int) -> list[int]:
    """The labels of ``n`` compare pairs as fitted: pair k is read as P(preferred over the
    other), label 1, when k is even, and as P(other over preferred), label 0, when k is odd.

    A temperature fits both orientations alike (``sigmoid(-z / T) = 1 - sigmoid(z / T)``);
    alternating them keeps both labels present whatever order the pairs came in, so ECE and
    AUROC are read on a balanced set (docs/methods.md J.5).

    Example:
        >>> pair_labels(5)
        [1, 0, 1, 0, 1]
    """
    return [1 - k % 2 for k in range(n)]


def pair_logits(preferred: Sequence[float]) -> list[float]:
    """Per pair, the logit of P(preferred over the other) oriented as ``pair_labels`` says
    (negated on odd pairs). A read that is certain in float64 (0 or 1) is clipped to
    ``PAIR_CLIP`` from it, so every logit is finite.

    Example:
        >>> [round(z, 4) for z in pair_logits([0.75, 0.75])]
        [1.0986, -1.0986]
    """
    p = np.clip(np.asarray(preferred, dtype=np.float64), PAIR_CLIP, 1.0 - PAIR_CLIP)
    z = special.logit(p)
    sign = np.where(np.arange(len(p)) % 2 == 0, 1.0, -1.0)
    return [float(v) for v in sign * z]


def probabilities(calibrated_logits: Floats) -> Floats:
    """``sigmoid`` of calibrated binary logits."""
    return np.asarray(special.expit(calibrated_logits), dtype=np.float64)


def softmax_rows(option_logits: Floats, t: float = 1.0) -> Floats:
    """``softmax(z / T)`` of each row of a (n, K) array of option logits."""
    return np.asarray(special.softmax(np.asarray(option_logits) / t, axis=1), dtype=np.float64)


# --- input checks ----------------------------------------------------------------------------


def check_binary(
    logits: Sequence[float] | Floats, labels: Sequence[int] | Ints, *, min_examples: int = 0
) -> tuple[Floats, Ints]:
    """Logits and 0/1 labels as arrays; refuses a length mismatch, a non-finite logit, a label
    other than 0 or 1 and, with ``min_examples``, a set that small or with one class only."""
    z = _finite_array(logits, "logit")
    if z.ndim != 1:
        raise CalibrationInputError(f"logits must be a flat list, got shape {z.shape}")
    y = _binary_labels(labels)
    if len(y) != len(z):
        raise CalibrationInputError(f"{len(z)} logits but {len(y)} labels: give one label each")
    if min_examples:
        _check_fittable(y, min_examples)
    return z, y


def _finite_array(values: Any, what: str) -> Floats:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalibrationInputError(f"every {what} must be a number: {exc}") from exc
    bad = np.flatnonzero(~np.isfinite(array.ravel()))
    if bad.size:
        raise CalibrationInputError(
            f"{what} {int(bad[0])} is {array.ravel()[bad[0]]}: every {what} must be finite"
        )
    return array


def _binary_labels(labels: Sequence[int] | Ints) -> Ints:
    for i, v in enumerate(labels):
        # bools are ints; 1.0 is refused like "1": a label is a class, not a measurement
        if not isinstance(v, int | np.integer) or v not in (0, 1):
            raise CalibrationInputError(f"label {i} is {v!r}: labels must be the integers 0 or 1")
    return np.asarray([int(v) for v in labels], dtype=np.int64)


def _check_fittable(y: Ints, min_examples: int) -> None:
    if len(y) < min_examples:
        raise CalibrationInputError(
            f"{len(y)} labelled examples: a calibration needs at least {min_examples}"
        )
    positives = int(y.sum())
    if positives in (0, len(y)):
        raise CalibrationInputError(
            f"all {len(y)} labels are {int(y[0])}: a calibration needs examples of both classes"
        )


def _at_bound(value: float, bounds: tuple[float, float]) -> bool:
    lo, hi = bounds
    return bool(
        np.isclose(value, lo, rtol=_AT_BOUND_RTOL) or np.isclose(value, hi, rtol=_AT_BOUND_RTOL)
    )


# --- fitting ---------------------------------------------------------------------------------


def binary_nll(calibrated_logits: Floats, labels: Ints) -> float:
    """Mean negative log-likelihood of 0/1 labels under ``sigmoid(z)``, exact in ``z``."""
    z = np.asarray(calibrated_logits, dtype=np.float64)
    y = np.asarray(labels)
    return float(-np.mean(np.where(y == 1, special.log_expit(z), special.log_expit(-z))))


def fit_temperature(logits: Sequence[float] | Floats, labels: Sequence[int] | Ints) -> Temperature:
    """The ``T`` in `T_BOUNDS` that minimises the NLL of ``sigmoid(z / T)``.

    Optimised over ``s = 1 / T``, in which the NLL is convex (bounded Brent).
    """
    z, y = check_binary(logits, labels, min_examples=MIN_EXAMPLES)
    return _fit_inverse_temperature(lambda s: binary_nll(s * z, y))


def fit_platt(logits: Sequence[float] | Floats, labels: Sequence[int] | Ints) -> Platt:
    """The ``(a, b)`` that minimise the NLL of ``sigmoid(a * z + b)``, ``a`` in
    `PLATT_A_BOUNDS` (L-BFGS-B with the exact gradient, from the raw map ``a = 1, b = 0``)."""
    z, y = check_binary(logits, labels, min_examples=MIN_EXAMPLES)

    def nll_and_grad(params: Floats) -> tuple[float, Floats]:
        a, b = params
        u = a * z + b
        residual = special.expit(u) - y  # d NLL / d u, per example
        grad = np.array([np.mean(residual * z), np.mean(residual)])
        return binary_nll(u, y), grad

    found = optimize.minimize(
        nll_and_grad,
        x0=np.array([1.0, 0.0]),
        jac=True,
        method="L-BFGS-B",
        bounds=[PLATT_A_BOUNDS, PLATT_B_BOUNDS],
        options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 1000},
    )
    a, b = (float(v) for v in found.x)
    at_bound = _at_bound(a, PLATT_A_BOUNDS) or _at_bound(b, PLATT_B_BOUNDS)
    return Platt(a=a, b=b, at_bound=at_bound)


def fit_temperature_multiclass(
    option_logits: Sequence[Sequence[float]] | Sequence[Floats], answers: Sequence[int] | Ints
) -> Temperature:
    """One ``T`` for ``softmax(z / T)`` over each row's option logits (rows may have different
    option counts), by the NLL of the correct option ``answers[i]``."""
    rows, y = check_multiclass(option_logits, answers)
    groups = _group_by_width(rows, y)

    def nll(s: float) -> float:
        total = sum(
            -float(np.sum(special.log_softmax(s * z, axis=1)[np.arange(len(a)), a]))
            for z, a in groups
        )
        return total / len(y)

    return _fit_inverse_temperature(nll)


def _fit_inverse_temperature(nll: Any) -> Temperature:
    lo, hi = T_BOUNDS
    found = optimize.minimize_scalar(
        nll, bounds=(1.0 / hi, 1.0 / lo), method="bounded", options={"xatol": 1e-10}
    )
    t = 1.0 / float(found.x)
    return Temperature(t=t, at_bound=_at_bound(t, T_BOUNDS))


def check_multiclass(
    option_logits: Sequence[Sequence[float]] | Sequence[Floats],
    answers: Sequence[int] | Ints,
    *,
    min_examples: int = MIN_EXAMPLES,
) -> tuple[list[Floats], Ints]:
    """Rows of at least two finite option logits and one answer index each, at least
    ``min_examples`` rows."""
    if len(option_logits) != len(answers):
        raise CalibrationInputError(
            f"{len(option_logits)} rows of option logits but {len(answers)} answers"
        )
    if len(answers) < min_examples:
        raise CalibrationInputError(
            f"{len(answers)} labelled examples: a calibration needs at least {min_examples}"
        )
    rows = []
    for i, (row, answer) in enumerate(zip(option_logits, answers, strict=True)):
        z = _finite_array(row, f"option logit of row {i}")
        if z.ndim != 1 or len(z) < 2:
            raise CalibrationInputError(f"row {i}: needs a flat list of at least 2 option logits")
        if not isinstance(answer, int | np.integer) or not 0 <= answer < len(z):
            raise CalibrationInputError(
                f"answer {i} is {answer!r}: must be an option index in [0, {len(z)})"
            )
        rows.append(z)
    return rows, np.asarray(answers, dtype=np.int64)


def _group_by_width(rows: list[Floats], y: Ints) -> list[tuple[Floats, Ints]]:
    widths = sorted({len(r) for r in rows})
    return [
        (
            np.stack([r for r in rows if len(r) == k]),
            np.asarray([a for r, a in zip(rows, y, strict=True) if len(r) == k], dtype=np.int64),
        )
        for k in widths
    ]


def fit(method: Method, logits: Floats, labels: Ints) -> Calibrator:
    """The map of ``method`` fitted on binary reads (`Identity` for raw)."""
    if method == "temperature":
        return fit_temperature(logits, labels)
    if method == "platt":
        return fit_platt(logits, labels)
    return Identity()


# --- metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    """One equal-mass bin: its size, mean predicted probability, observed frequency of label 1,
    and the smallest and largest prediction in it."""

    count: int
    mean_predicted: float
    observed: float
    lower: float
    upper: float


def reliability_bins(
    probs: Sequence[float] | Floats, labels: Sequence[int] | Ints, n_bins: int = DEFAULT_BINS
) -> list[ReliabilityBin]:
    """Equal-mass bins: the examples sorted by predicted probability (stable, so ties keep
    input order) and cut into ``min(n_bins, n)`` runs whose sizes differ by at most one."""
    if n_bins < 1:
        raise CalibrationInputError(f"n_bins must be >= 1, got {n_bins}")
    p = _finite_array(probs, "probability")
    y = np.asarray(labels, dtype=np.float64)
    if len(p) == 0 or len(p) != len(y):
        raise CalibrationInputError(f"{len(p)} probabilities and {len(y)} labels: need n > 0 each")
    order = np.argsort(p, kind="stable")
    return [
        ReliabilityBin(
            count=len(idx),
            mean_predicted=float(p[idx].mean()),
            observed=float(y[idx].mean()),
            lower=float(p[idx].min()),
            upper=float(p[idx].max()),
        )
        for idx in np.array_split(order, min(n_bins, len(p)))
    ]


def ece_from_bins(bins: Sequence[ReliabilityBin]) -> float:
    """``sum_b (n_b / n) * |mean predicted_b - observed_b|``."""
    n = sum(b.count for b in bins)
    return float(sum(b.count / n * abs(b.mean_predicted - b.observed) for b in bins))


def brier(probs: Floats, labels: Ints) -> float:
    """Mean squared error of the probability against the 0/1 label."""
    return float(np.mean((np.asarray(probs) - np.asarray(labels)) ** 2))


def auroc(scores: Sequence[float] | Floats, labels: Sequence[int] | Ints) -> float:
    """P(a random positive scores above a random negative), ties counting one half (the
    Mann-Whitney U over n1 * n0); NaN when a class is missing."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    n1 = int(np.sum(y == 1))
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = stats.rankdata(s)  # average ranks on ties
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


@dataclass(frozen=True, slots=True)
class EceNoise:
    """The ECE that the same predictions would show if they were perfectly calibrated: labels
    drawn as Bernoulli(p_i), ``draws`` times; its mean and 90th percentile. A measured ECE
    below ``q90`` cannot be told from sampling noise at this n and bin count."""

    mean: float
    q90: float
    draws: int


def ece_noise(
    probs: Sequence[float] | Floats, n_bins: int = DEFAULT_BINS, draws: int = 1000, seed: int = 0
) -> EceNoise:
    """`EceNoise` of ``probs`` (seeded, so deterministic)."""
    p = _finite_array(probs, "probability")
    rng = np.random.default_rng(seed)
    eces = [
        ece_from_bins(reliability_bins(p, (rng.random(len(p)) < p).astype(np.int64), n_bins))
        for _ in range(draws)
    ]
    return EceNoise(float(np.mean(eces)), float(np.quantile(eces, 0.9)), draws)


@dataclass(frozen=True, slots=True)
class BinaryMetrics:
    """How calibrated (NLL, Brier, ECE, bins) and how discriminating (AUROC) predictions are.

    ``auroc`` is read from the calibrated logits, which rank as the probabilities do without
    the float rounding of probabilities near 0 and 1.
    """

    n: int
    base_rate: float
    mean_probability: float
    nll: float
    brier: float
    ece: float
    auroc: float
    bins: list[ReliabilityBin]


def binary_metrics(
    calibrated_logits: Floats, labels: Ints, n_bins: int = DEFAULT_BINS
) -> BinaryMetrics:
    z, y = check_binary(calibrated_logits, labels)
    p = probabilities(z)
    bins = reliability_bins(p, y, n_bins)
    return BinaryMetrics(
        n=len(y),
        base_rate=float(y.mean()),
        mean_probability=float(p.mean()),
        nll=binary_nll(z, y),
        brier=brier(p, y),
        ece=ece_from_bins(bins),
        auroc=auroc(z, y),
        bins=bins,
    )


# --- cross-validation ------------------------------------------------------------------------


def stratified_folds(labels: Sequence[int] | Ints, k: int, seed: int = 0) -> Ints:
    """A fold index in ``[0, k)`` per example: each class shuffled with ``seed`` and dealt
    round-robin, so every fold holds ``n_class / k`` (+- 1) of each class. Deterministic."""
    y = _binary_labels(labels)
    if k < 2:
        raise CalibrationInputError(f"k-fold needs k >= 2 folds, got {k}")
    fewest = min(int(np.sum(y == 0)), int(np.sum(y == 1)))
    if fewest < k:
        raise CalibrationInputError(
            f"{k} folds need at least {k} examples of each class; the smaller class has {fewest}"
        )
    rng = np.random.default_rng(seed)
    folds = np.empty(len(y), dtype=np.int64)
    start = 0
    for cls in (0, 1):
        members = rng.permutation(np.flatnonzero(y == cls))
        # the second class continues the deal where the first stopped, so fold sizes stay
        # within one of each other overall too
        folds[members] = (start + np.arange(len(members))) % k
        start = (start + len(members)) % k
    return folds


@dataclass(frozen=True, slots=True)
class HeldOut:
    """One method's pooled held-out predictions and their metrics.

    ``auroc_folds``: the mean over folds of each held-out fold's AUROC. Each fold is scored by
    one monotone map, so this equals the raw figure exactly. The pooled AUROC
    (``metrics.auroc``) mixes k maps and may differ from raw slightly.
    """

    calibrated_logits: list[float]
    probabilities: list[float]
    metrics: BinaryMetrics
    auroc_folds: float
    fold_parameters: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """Fits on the whole set, metrics on it, and k-fold held-out metrics, per method."""

    n: int
    folds: int
    n_bins: int
    seed: int
    fold_of: list[int]
    parameters: dict[str, dict[str, Any]]
    fit_set: dict[str, BinaryMetrics]
    held_out: dict[str, HeldOut]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-ready (undefined figures as None)."""
        return dict(finite_or_none(asdict(self)))


def cross_validate(
    logits: Floats, labels: Ints, method: Method, folds: Ints, n_bins: int = DEFAULT_BINS
) -> HeldOut:
    """Score each fold with ``method`` fitted on the other folds only; pool the predictions."""
    z, y = check_binary(logits, labels)
    out = np.empty_like(z)
    params: list[dict[str, Any]] = []
    fold_aurocs: list[float] = []
    for f in range(int(folds.max()) + 1):
        test = folds == f
        if int(np.sum(~test)) < MIN_EXAMPLES:
            raise CalibrationInputError(
                f"fold {f} leaves {int(np.sum(~test))} examples to fit on; need {MIN_EXAMPLES}"
            )
        calibrator = fit(method, z[~test], y[~test])
        out[test] = calibrator.apply(z[test])
        params.append(calibrator.parameters())
        fold_aurocs.append(auroc(out[test], y[test]))
    return HeldOut(
        calibrated_logits=out.tolist(),
        probabilities=probabilities(out).tolist(),
        metrics=binary_metrics(out, y, n_bins),
        auroc_folds=float(np.mean(fold_aurocs)),
        fold_parameters=params,
    )


def calibrate_binary(
    logits: Sequence[float] | Floats,
    labels: Sequence[int] | Ints,
    *,
    folds: int = DEFAULT_FOLDS,
    n_bins: int = DEFAULT_BINS,
    seed: int = 0,
) -> CalibrationReport:
    """Raw vs temperature vs Platt on binary reads: each map fitted on the whole set (its
    parameters and in-sample metrics) and by stratified ``folds``-fold cross-validation."""
    z, y = check_binary(logits, labels, min_examples=MIN_EXAMPLES)
    fold_of = stratified_folds(y, folds, seed)
    fitted = {m: fit(m, z, y) for m in METHODS}
    return CalibrationReport(
        n=len(y),
        folds=folds,
        n_bins=n_bins,
        seed=seed,
        fold_of=fold_of.tolist(),
        parameters={m: c.parameters() for m, c in fitted.items() if m != "raw"},
        fit_set={m: binary_metrics(c.apply(z), y, n_bins) for m, c in fitted.items()},
        held_out={m: cross_validate(z, y, m, fold_of, n_bins) for m in METHODS},
    )
