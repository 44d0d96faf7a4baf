"""Temperature and Platt scaling, calibration metrics and k-fold (service/scoring/calibration)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from service.scoring import calibration as cal
from service.scoring.calibration import CalibrationInputError


def synthetic(
    n: int, seed: int, *, t: float = 1.0, a: float = 1.0, b: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose labels are drawn from ``sigmoid(a * z / t + b)``: the true map is known."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, n)
    y = (rng.random(n) < special.expit(a * z / t + b)).astype(np.int64)
    return z, y


# --- fits recover known maps -----------------------------------------------------------------


@pytest.mark.parametrize("true_t", [0.5, 2.5, 6.0])
def test_temperature_is_recovered(true_t: float) -> None:
    z, y = synthetic(20_000, seed=1, t=true_t)
    fitted = cal.fit_temperature(z, y)
    assert fitted.t == pytest.approx(true_t, rel=0.08)
    assert not fitted.at_bound


def test_temperature_of_calibrated_reads_is_one_and_beats_a_wrong_one() -> None:
    z, y = synthetic(20_000, seed=2)
    fitted = cal.fit_temperature(z, y)
    assert fitted.t == pytest.approx(1.0, rel=0.08)
    # the fit is a minimum of the NLL: both neighbours are worse
    best = cal.binary_nll(fitted.apply(z), y)
    for other in (fitted.t * 1.2, fitted.t / 1.2):
        assert cal.binary_nll(z / other, y) > best


@pytest.mark.parametrize(("true_a", "true_b"), [(0.4, -1.0), (2.0, 0.8)])
def test_platt_is_recovered(true_a: float, true_b: float) -> None:
    z, y = synthetic(30_000, seed=3, a=true_a, b=true_b)
    fitted = cal.fit_platt(z, y)
    assert fitted.a == pytest.approx(true_a, rel=0.08)
    assert fitted.b == pytest.approx(true_b, abs=0.08)
    assert not fitted.at_bound


def test_multiclass_temperature_is_recovered() -> None:
    rng = np.random.default_rng(4)
    true_t = 3.0
    rows = rng.normal(0.0, 4.0, (8_000, 4))
    probs = cal.softmax_rows(rows, true_t)
    answers = [int(rng.choice(4, p=p)) for p in probs]
    fitted = cal.fit_temperature_multiclass(rows.tolist(), answers)
    assert fitted.t == pytest.approx(true_t, rel=0.08)


def test_multiclass_takes_rows_of_different_widths() -> None:
    rng = np.random.default_rng(5)
    rows: list[list[float]] = []
    answers: list[int] = []
    for i in range(4_000):
        z = rng.normal(0.0, 4.0, 2 + i % 3)
        rows.append(z.tolist())
        answers.append(int(rng.choice(len(z), p=special.softmax(z / 0.5))))
    assert cal.fit_temperature_multiclass(rows, answers).t == pytest.approx(0.5, rel=0.1)


def test_chance_level_reads_stop_at_a_bound_and_collapse_to_the_base_rate() -> None:
    """Logits carrying no information: temperature runs to its upper bound (p -> 0.5), Platt
    to the base rate with a at its lower bound (still > 0, so the order is kept)."""
    rng = np.random.default_rng(6)
    z = rng.normal(0.0, 2.0, 400)
    y = (np.arange(400) % 4 == 0).astype(np.int64)  # base rate 0.25, independent of z
    t = cal.fit_temperature(z, y)
    assert t.t > 20
    platt = cal.fit_platt(z, y)
    assert platt.a < 0.1
    assert cal.probabilities(platt.apply(z)).mean() == pytest.approx(0.25, abs=0.02)


def test_platt_never_inverts_a_judge_worse_than_chance() -> None:
    """Reads that rank backwards: an unbounded fit would flip the order (a < 0); the fit stops
    at a > 0, so the ranking, and the AUROC below 0.5, are the judge's own."""
    z, y = synthetic(2_000, seed=10, a=-1.0)
    fitted = cal.fit_platt(z, y)
    assert fitted.a > 0
    assert fitted.at_bound
    assert cal.auroc(fitted.apply(z), y) == cal.auroc(z, y) < 0.5


# --- the maps are monotone: ranking and argmax are unchanged ---------------------------------

# Logits on a 1e-3 grid: a strictly increasing map keeps distinct values distinct in float64
# only above the float resolution, which real reads are far above.
logit_lists = st.lists(
    st.integers(min_value=-20_000, max_value=20_000).map(lambda v: v / 1000),
    min_size=2,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    logits=logit_lists,
    t=st.floats(0.05, 50.0),
    a=st.floats(0.01, 50.0),
    b=st.floats(-20.0, 20.0),
)
def test_monotone_maps_keep_auroc_and_order(
    data: Any, logits: list[float], t: float, a: float, b: float
) -> None:
    labels = data.draw(st.lists(st.integers(0, 1), min_size=len(logits), max_size=len(logits)))
    z = np.asarray(logits)
    raw = cal.auroc(z, labels)
    for calibrator in (cal.Temperature(t=t), cal.Platt(a=a, b=b)):
        out = calibrator.apply(z)
        assert np.array_equal(np.argsort(out, kind="stable"), np.argsort(z, kind="stable"))
        assert cal.auroc(out, labels) == pytest.approx(raw, abs=0) or np.isnan(raw)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.integers(-20_000, 20_000).map(lambda v: v / 1000), min_size=2, max_size=6),
        min_size=1,
        max_size=10,
    ),
    t=st.floats(0.05, 50.0),
)
def test_temperature_keeps_the_argmax_of_option_logits(rows: list[list[float]], t: float) -> None:
    for row in rows:
        z = np.asarray([row])
        assert int(np.argmax(cal.softmax_rows(z, t))) == int(np.argmax(z))


def test_auroc_is_the_pairwise_rate_with_ties_as_half() -> None:
    # positives 0.9, 0.4; negatives 0.4, 0.1: pairs (0.9>0.4) (0.9>0.1) (0.4=0.4) (0.4>0.1)
    assert cal.auroc([0.9, 0.4, 0.4, 0.1], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert cal.auroc([0.1, 0.9], [1, 0]) == 0.0
    assert np.isnan(cal.auroc([0.1, 0.9], [1, 1]))


# --- metrics ---------------------------------------------------------------------------------


def test_ece_from_equal_mass_bins_by_hand() -> None:
    probs = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9, 0.95]
    labels = [0, 1, 0, 1, 1, 1, 1]
    bins = cal.reliability_bins(probs, labels, n_bins=3)
    assert [b.count for b in bins] == [3, 2, 2]  # 7 into 3: sizes differ by at most one
    # bin means: predicted 0.2 / 0.65 / 0.925, observed 1/3 / 1 / 1
    assert [b.mean_predicted for b in bins] == pytest.approx([0.2, 0.65, 0.925])
    assert [b.observed for b in bins] == pytest.approx([1 / 3, 1.0, 1.0])
    assert [(b.lower, b.upper) for b in bins] == [(0.1, 0.3), (0.6, 0.7), (0.9, 0.95)]
    by_hand = (3 / 7) * (1 / 3 - 0.2) + (2 / 7) * 0.35 + (2 / 7) * 0.075  # weighted by bin size
    assert cal.ece_from_bins(bins) == pytest.approx(by_hand)


def test_bins_sort_by_probability_not_input_order() -> None:
    bins = cal.reliability_bins([0.9, 0.1, 0.8, 0.2], [1, 0, 0, 0], n_bins=2)
    assert [b.mean_predicted for b in bins] == pytest.approx([0.15, 0.85])
    assert [b.observed for b in bins] == [0.0, 0.5]


@pytest.mark.parametrize(("n", "n_bins"), [(10, 3), (23, 10), (100, 7), (5, 10), (64, 8)])
def test_equal_mass_bins_have_equal_counts(n: int, n_bins: int) -> None:
    rng = np.random.default_rng(n)
    probs = rng.random(n)
    bins = cal.reliability_bins(probs, rng.integers(0, 2, n), n_bins)
    counts = [b.count for b in bins]
    assert len(bins) == min(n, n_bins)
    assert sum(counts) == n
    assert max(counts) - min(counts) <= 1
    # the bins follow each other: no prediction of a bin is above the next bin's lowest
    assert all(x.upper <= y.lower for x, y in zip(bins, bins[1:], strict=False))


def test_ece_noise_is_the_ece_of_calibrated_draws() -> None:
    """Labels drawn from the predictions: the measured ECE sits around the noise mean, and a
    larger set has a lower floor."""
    rng = np.random.default_rng(11)
    p = rng.uniform(0.1, 0.9, 120)
    noise = cal.ece_noise(p, 10, draws=500, seed=0)
    assert noise == cal.ece_noise(p, 10, draws=500, seed=0)  # seeded
    assert 0 < noise.mean < noise.q90 < 0.25
    drawn = [
        cal.ece_from_bins(cal.reliability_bins(p, (rng.random(120) < p).astype(int), 10))
        for _ in range(300)
    ]
    assert np.mean(drawn) == pytest.approx(noise.mean, rel=0.1)
    assert cal.ece_noise(np.tile(p, 20), 10, draws=100).mean < noise.mean / 3


def test_metrics_of_a_small_example() -> None:
    z = special.logit(np.array([0.8, 0.3, 0.6, 0.1]))
    y = np.array([1, 0, 0, 0])
    m = cal.binary_metrics(z, y, n_bins=2)
    assert m.brier == pytest.approx((0.2**2 + 0.3**2 + 0.6**2 + 0.1**2) / 4)
    assert m.nll == pytest.approx(-(np.log(0.8) + np.log(0.7) + np.log(0.4) + np.log(0.9)) / 4)
    assert m.auroc == 1.0
    assert (m.n, m.base_rate, m.mean_probability) == (4, 0.25, pytest.approx(0.45))
    # bins {0.1, 0.3} and {0.6, 0.8}: |0.2 - 0| and |0.7 - 0.5|
    assert m.ece == pytest.approx(0.5 * 0.2 + 0.5 * 0.2)


def test_calibration_lowers_held_out_ece_of_an_overconfident_judge() -> None:
    """Reads at 4x the true logit: raw ECE is large, both fits cut it on held-out folds."""
    z, y = synthetic(2_000, seed=7, t=4.0)
    report = cal.calibrate_binary(z, y, folds=5)
    raw, temp, platt = (report.held_out[m].metrics for m in cal.METHODS)
    assert raw.ece > 0.1
    assert temp.ece < raw.ece / 2
    assert platt.ece < raw.ece / 2
    assert temp.nll < raw.nll
    assert report.parameters["temperature"]["temperature"] == pytest.approx(4.0, rel=0.15)
    # a single monotone map per fold: the per-fold AUROC is raw's exactly
    assert report.held_out["temperature"].auroc_folds == report.held_out["raw"].auroc_folds
    assert report.held_out["platt"].auroc_folds == report.held_out["raw"].auroc_folds
    # and on the whole set one map scores everything
    assert report.fit_set["platt"].auroc == report.fit_set["raw"].auroc


# --- k-fold ----------------------------------------------------------------------------------


def test_stratified_folds_are_balanced_and_deterministic() -> None:
    y = np.array([1] * 13 + [0] * 29)
    folds = cal.stratified_folds(y, 5, seed=3)
    assert np.array_equal(folds, cal.stratified_folds(y, 5, seed=3))
    assert not np.array_equal(folds, cal.stratified_folds(y, 5, seed=4))
    sizes = np.bincount(folds, minlength=5)
    assert sizes.max() - sizes.min() <= 1
    for cls in (0, 1):
        per_class = np.bincount(folds[y == cls], minlength=5)
        assert per_class.max() - per_class.min() <= 1


def test_k_fold_never_fits_on_the_held_out_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fit sees exactly the examples outside the fold it then scores."""
    z, y = synthetic(60, seed=8, t=2.0)
    folds = cal.stratified_folds(y, 4, seed=0)
    seen: list[set[float]] = []
    real_fit = cal.fit

    def spy(method: Any, logits: np.ndarray, labels: np.ndarray) -> Any:
        seen.append(set(logits.tolist()))
        return real_fit(method, logits, labels)

    monkeypatch.setattr(cal, "fit", spy)
    held = cal.cross_validate(z, y, "platt", folds)
    assert len(seen) == 4
    for f, trained_on in enumerate(seen):
        assert trained_on == set(z[folds != f].tolist())
        assert trained_on.isdisjoint(z[folds == f].tolist())
    # each held-out prediction comes from its own fold's parameters
    for f, params in enumerate(held.fold_parameters):
        expected = params["a"] * z[folds == f] + params["b"]
        assert np.asarray(held.calibrated_logits)[folds == f] == pytest.approx(expected)


def test_report_is_strict_json() -> None:
    import json

    z, y = synthetic(40, seed=9)
    report = cal.calibrate_binary(z, y, folds=2, n_bins=4).to_dict()
    text = json.dumps(report, allow_nan=False)
    assert set(json.loads(text)["held_out"]) == set(cal.METHODS)
    assert len(report["fold_of"]) == 40


# --- bad input -------------------------------------------------------------------------------

GOOD_Z = [0.5, -1.0, 2.0, 0.1, -0.3, 1.5, -2.0, 0.7, 0.2, -0.8]
GOOD_Y = [1, 0, 1, 0, 0, 1, 0, 1, 1, 0]


@pytest.mark.parametrize(
    ("logits", "labels", "match"),
    [
        (GOOD_Z[:5], GOOD_Y[:5], "at least 8"),
        (GOOD_Z, [1] * 10, "both classes"),
        (GOOD_Z, [*GOOD_Y[:9], 2], "label 9 is 2"),
        (GOOD_Z, [*GOOD_Y[:9], 1.0], "label 9 is 1.0"),
        (GOOD_Z, [*GOOD_Y[:9], "1"], "label 9 is '1'"),
        ([*GOOD_Z[:9], float("nan")], GOOD_Y, "logit 9 is nan"),
        ([*GOOD_Z[:9], float("inf")], GOOD_Y, "must be finite"),
        (GOOD_Z, GOOD_Y[:9], "10 logits but 9 labels"),
        ([*GOOD_Z[:9], "x"], GOOD_Y, "must be a number"),
    ],
)
def test_bad_input_is_refused(logits: Any, labels: Any, match: str) -> None:
    for fitter in (cal.fit_temperature, cal.fit_platt, cal.calibrate_binary):
        with pytest.raises(CalibrationInputError, match=match):
            fitter(logits, labels)


def test_too_few_of_a_class_for_the_folds_is_refused() -> None:
    with pytest.raises(CalibrationInputError, match="at least 5 examples of each class"):
        cal.calibrate_binary(GOOD_Z * 2, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0] * 2, folds=5)
    with pytest.raises(CalibrationInputError, match="k >= 2"):
        cal.stratified_folds(GOOD_Y, 1)


@pytest.mark.parametrize(
    ("rows", "answers", "match"),
    [
        ([[0.0, 1.0]] * 8, [0] * 7, "8 rows of option logits but 7 answers"),
        ([[0.0, 1.0]] * 4, [0] * 4, "at least 8"),
        ([[0.0, 1.0]] * 7 + [[1.0]], [0] * 8, "row 7: needs a flat list of at least 2"),
        ([[0.0, 1.0]] * 8, [0] * 7 + [2], r"answer 7 is 2: must be an option index in \[0, 2\)"),
        ([[0.0, 1.0]] * 7 + [[0.0, float("nan")]], [0] * 8, "must be finite"),
    ],
)
def test_bad_multiclass_input_is_refused(rows: Any, answers: Any, match: str) -> None:
    with pytest.raises(CalibrationInputError, match=match):
        cal.fit_temperature_multiclass(rows, answers)


def test_bins_refuse_nonsense() -> None:
    with pytest.raises(CalibrationInputError, match="n_bins must be >= 1"):
        cal.reliability_bins([0.5], [1], n_bins=0)
    with pytest.raises(CalibrationInputError, match="need n > 0"):
        cal.reliability_bins([], [], n_bins=3)
