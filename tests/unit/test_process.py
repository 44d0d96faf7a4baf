"""Tests for service.scoring.process (docs/methods.md A.3, A.9)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.scoring.process import aggregate, first_error_step, logit, sigmoid

_logits = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False)


def test_sigmoid_known_values_and_extremes() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(math.log(3.0)) == pytest.approx(0.75)
    assert sigmoid(-math.log(3.0)) == pytest.approx(0.25)
    assert sigmoid(1000.0) == 1.0
    assert sigmoid(-1000.0) == 0.0


def test_logit_inverts_sigmoid_and_clips() -> None:
    assert logit(0.75) == pytest.approx(math.log(3.0))
    assert logit(0.0) == pytest.approx(math.log(1e-6 / (1 - 1e-6)))
    assert logit(1.0) == pytest.approx(-logit(0.0))
    assert math.isfinite(logit(1.0))


@pytest.mark.parametrize("score", [0.01, 0.3, 0.5, 0.8, 0.999])
def test_mean_logit_of_equal_scores_is_that_score(score: float) -> None:
    assert aggregate([logit(score)] * 3, "mean_logit") == pytest.approx(score, abs=1e-12)


def test_mean_logit_is_sigmoid_of_mean_logit_difference() -> None:
    logits = [2.0, -1.0, 0.5, 3.5]
    assert aggregate(logits, "mean_logit") == pytest.approx(1.0 / (1.0 + math.exp(-1.25)))


def test_mean_logit_uses_raw_logits_not_clipped_scores() -> None:
    # sigmoid(40) rounds to 1.0; clipping it would give logit 13.8 and a far lower mean.
    assert aggregate([40.0, -30.0], "mean_logit") == pytest.approx(sigmoid(5.0))


@given(st.lists(_logits, min_size=1, max_size=30))
def test_mean_logit_lies_between_min_and_max(logits: list[float]) -> None:
    value = aggregate(logits, "mean_logit")
    assert aggregate(logits, "min") <= value <= max(sigmoid(x) for x in logits)
    assert 0.0 <= value <= 1.0


@given(st.lists(_logits, min_size=1, max_size=30))
def test_prod_never_exceeds_min(logits: list[float]) -> None:
    assert aggregate(logits, "prod") <= aggregate(logits, "min")


KNOWN = [math.log(4.0), 0.0, -math.log(4.0)]  # scores 0.8, 0.5, 0.2


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("min", 0.2),
        ("mean", 0.5),
        ("last", 0.2),
        ("prod", 0.08),
        ("mean_logit", 0.5),
    ],
)
def test_aggregations_on_known_vector(how: str, expected: float) -> None:
    assert aggregate(KNOWN, how) == pytest.approx(expected)  # type: ignore[arg-type]


def test_last_and_mean_on_another_vector() -> None:
    logits = [math.log(9.0), math.log(3.0)]  # scores 0.9, 0.75
    assert aggregate(logits, "last") == pytest.approx(0.75)
    assert aggregate(logits, "mean") == pytest.approx(0.825)
    assert aggregate(logits, "prod") == pytest.approx(0.675)


def test_empty_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="zero steps"):
        aggregate([], "mean_logit")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_logits_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        aggregate([0.0, bad], "mean")


def test_unknown_aggregation_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate([0.0], "median")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scores", "threshold", "expected"),
    [
        ([0.9, 0.8, 0.7], 0.5, -1),
        ([0.9, 0.4, 0.2], 0.5, 1),
        ([0.1, 0.9], 0.5, 0),
        ([0.9, 0.5, 0.6], 0.5, -1),  # exactly at the threshold is not an error
        ([0.9, 0.5, 0.6], 0.55, 1),
        ([], 0.5, -1),
    ],
)
def test_first_error_step(scores: list[float], threshold: float, expected: int) -> None:
    assert first_error_step(scores, threshold) == expected


def test_first_error_step_default_threshold_is_half() -> None:
    assert first_error_step([0.6, 0.49, 0.1]) == 1
