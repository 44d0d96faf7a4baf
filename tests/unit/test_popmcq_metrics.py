"""PopMCQ metrics and McNemar on hand-computed fixtures (docs/methods.md B.3, C.3)."""

from __future__ import annotations

import math

import pytest

from service.scoring.popmcq import (
    Choice,
    accuracy,
    bucket_of,
    confidence,
    hpsr,
    mcnemar_exact,
    overconfidence,
    pop_gap,
    popularity_bias,
    relative_popularity_bias,
)

ROWS = [
    Choice(correct=True, pop_chosen=0.2, pop_gold=0.2, confidence=0.9),
    Choice(correct=False, pop_chosen=0.9, pop_gold=0.1, confidence=0.6),
    Choice(correct=True, pop_chosen=0.4, pop_gold=0.4, confidence=0.7),
    Choice(correct=False, pop_chosen=0.8, pop_gold=0.5, confidence=0.8),
]


def test_accuracy_hpsr_popgap_confidence() -> None:
    assert accuracy(ROWS) == 0.5
    assert hpsr(ROWS) == 0.5  # 0.9 and 0.8
    assert pop_gap(ROWS) == pytest.approx((0 + 0.8 + 0 + 0.3) / 4)
    assert confidence(ROWS) == pytest.approx(0.75)


def test_hpsr_is_strict() -> None:
    assert hpsr([Choice(True, 0.5, 0.5, 1.0)]) == 0.0


def test_spearman_with_average_ranks() -> None:
    # ranks of correctness [3.5, 1.5, 3.5, 1.5], of popularity [1, 4, 2, 3]: rho = -4/sqrt(20)
    assert popularity_bias(ROWS) == pytest.approx(-4 / math.sqrt(20))
    # surplus pop(chosen) - pop(gold) = [0, 0.8, 0, 0.3]: ranks [1.5, 4, 1.5, 3]
    # dx = [1, -1, 1, -1], dy = [-1, 1.5, -1, 0.5]: cov = -4, var y = 4.5
    assert relative_popularity_bias(ROWS) == pytest.approx(-4 / math.sqrt(4 * 4.5))


def test_spearman_is_nan_where_undefined() -> None:
    all_right = [Choice(True, p, p, 0.9) for p in (0.1, 0.5, 0.9)]
    assert math.isnan(popularity_bias(all_right))
    same_pop = [Choice(c, 0.4, 0.4, 0.5) for c in (True, False, True)]
    assert math.isnan(popularity_bias(same_pop))
    assert math.isnan(popularity_bias(ROWS[:1]))
    assert math.isnan(accuracy([]))


def test_overconfidence_by_bucket() -> None:
    assert [bucket_of(p) for p in (0.0, 0.3, 0.31, 0.7, 0.71, 1.0)] == [
        "low", "low", "mid", "mid", "high", "high",
    ]  # fmt: skip
    out = overconfidence(ROWS)
    assert out["low"] == pytest.approx(0.9 - 1.0)
    assert out["mid"] == pytest.approx(0.7 - 1.0)
    assert out["high"] == pytest.approx((0.6 + 0.8) / 2 - 0.0)
    assert math.isnan(overconfidence(ROWS[:1])["high"])


def test_mcnemar_exact_on_a_textbook_table() -> None:
    # 10 items only A gets right, 2 only B: p = 2 * P(X <= 2 | n=12, 1/2) = 2 * 79 / 4096
    a = [True] * 10 + [False] * 2 + [True] * 5 + [False] * 3
    b = [False] * 10 + [True] * 2 + [True] * 5 + [False] * 3
    assert mcnemar_exact(a, b) == (10, 2, pytest.approx(158 / 4096))
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)
