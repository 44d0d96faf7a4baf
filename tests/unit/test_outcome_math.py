"""Score math: sigmoid/logit, sample combination, finish classification."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.scoring.outcome import combine_samples, logit, rationale_finish, sigmoid, verdict


@given(st.floats(min_value=-13, max_value=13))  # logit clips p to [1e-6, 1-1e-6]
def test_sigmoid_logit_round_trip(x: float) -> None:
    assert logit(sigmoid(x)) == pytest.approx(x, abs=1e-6)


def test_sigmoid_is_stable_at_extremes() -> None:
    assert sigmoid(-1000.0) == 0.0
    assert sigmoid(1000.0) == 1.0
    assert sigmoid(0.0) == 0.5
    assert math.isfinite(logit(0.0))
    assert math.isfinite(logit(1.0))


def test_single_sample_keeps_its_logit() -> None:
    score, lg = combine_samples([1.75])
    assert lg == 1.75
    assert score == pytest.approx(1 / (1 + math.exp(-1.75)))


def test_samples_average_scores_not_logits() -> None:
    score, lg = combine_samples([10.0, -10.0, 0.0])
    assert score == pytest.approx(0.5, abs=1e-9)
    assert lg == pytest.approx(0.0, abs=1e-6)
    score, lg = combine_samples([2.0, 0.0])
    assert score == pytest.approx((sigmoid(2.0) + 0.5) / 2)
    assert sigmoid(lg) == pytest.approx(score, abs=1e-9)


def test_combine_rejects_empty() -> None:
    with pytest.raises(ValueError, match="no judgments"):
        combine_samples([])


def test_verdict_threshold() -> None:
    assert verdict(0.5) == 1
    assert verdict(0.4999) == 0


@pytest.mark.parametrize(
    ("finish", "stop", "expected"),
    [("length", None, "length"), ("stop", "Verdict:", "verdict"), ("stop", None, "eos")],
)
def test_rationale_finish(finish: str, stop: str | None, expected: str) -> None:
    assert rationale_finish(finish, stop) == expected
