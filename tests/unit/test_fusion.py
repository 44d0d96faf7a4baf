"""Tests for service.scoring.fusion (docs/methods.md A.5)."""

from __future__ import annotations

import math

import pytest

from service.scoring.fusion import fuse, rank


def test_alpha_half_on_one_and_zero_gives_half() -> None:
    assert fuse(1.0, 0.0, 0.5) == 0.5
    assert fuse(1.0, 0.0) == 0.5


def test_alpha_extremes_select_one_score() -> None:
    assert fuse(0.9, 0.3, alpha=1.0) == 0.9
    assert fuse(0.9, 0.3, alpha=0.0) == 0.3


def test_weighted_combination() -> None:
    assert fuse(0.8, 0.4, alpha=0.25) == pytest.approx(0.25 * 0.8 + 0.75 * 0.4)


@pytest.mark.parametrize("alpha", [-0.1, 1.1, math.nan])
def test_alpha_outside_unit_interval_is_rejected(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        fuse(0.5, 0.5, alpha)


@pytest.mark.parametrize(("outcome", "process"), [(1.5, 0.5), (0.5, -2.0), (math.nan, 0.5)])
def test_scores_outside_unit_interval_are_rejected(outcome: float, process: float) -> None:
    with pytest.raises(ValueError, match="score must be in"):
        fuse(outcome, process)


def test_rank_orders_best_first() -> None:
    assert rank([0.1, 0.7, 0.3]) == [1, 2, 0]


def test_rank_breaks_ties_by_lowest_index() -> None:
    assert rank([0.5, 0.9, 0.5, 0.9]) == [1, 3, 0, 2]
    assert rank([0.2, 0.2, 0.2]) == [0, 1, 2]


def test_rank_of_nothing_is_empty() -> None:
    assert rank([]) == []


def test_rank_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        rank([0.1, math.nan])
