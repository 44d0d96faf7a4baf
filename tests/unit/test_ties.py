"""Tie groups of a ranking (service/scoring/ties.py)."""

from __future__ import annotations

import pytest

from service.scoring.fusion import rank
from service.scoring.ties import default_tolerance, tie_groups

TOL = 2.0**-8


def groups(scores: list[float | None], tol: float = TOL) -> list[list[int]]:
    ranking = rank([-1.0 if s is None else s for s in scores])
    return tie_groups(scores, ranking, tol)


def test_the_readme_rerank_example_is_one_tie() -> None:
    assert groups([0.6466175, 0.6466175]) == [[0, 1]]


def test_a_single_item_has_no_ties() -> None:
    assert groups([0.5]) == []


def test_distinct_scores_have_no_ties() -> None:
    assert groups([0.9, 0.5, 0.1]) == []


def test_exactly_the_tolerance_is_not_a_tie() -> None:
    assert groups([0.5, 0.5 + TOL]) == []
    assert groups([0.5, 0.5 + TOL / 2]) == [[1, 0]]  # best first


def test_ties_chain_through_neighbours() -> None:
    step = TOL * 0.75  # a-b and b-c tied, a-c (1.5 tol) not: still one group
    assert groups([0.5, 0.5 + step, 0.5 + 2 * step]) == [[2, 1, 0]]


def test_separate_groups_stay_apart_and_keep_index_order_within() -> None:
    assert groups([0.2, 0.9, 0.2, 0.9, 0.5]) == [[1, 3], [0, 2]]


def test_undecided_ties_only_with_undecided() -> None:
    assert groups([None, 0.0, None]) == [[0, 2]]


def test_zero_tolerance_reports_no_ties() -> None:
    assert groups([0.5, 0.5], tol=0.0) == []


@pytest.mark.parametrize(
    ("dtype", "tol"),
    [("bfloat16", 2.0**-8), ("float16", 2.0**-11), ("float32", 2.0**-14), ("auto", 2.0**-8)],
)
def test_default_tolerance_by_dtype(dtype: str, tol: float) -> None:
    assert default_tolerance(dtype) == tol


def test_the_setting_wins_then_the_engine_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    from service.app import tie_tolerance
    from service.config import Settings

    monkeypatch.setenv("VERIFIER_RANKING__TIE_TOLERANCE", "0.05")
    assert tie_tolerance(Settings()) == 0.05
    monkeypatch.delenv("VERIFIER_RANKING__TIE_TOLERANCE")
    assert tie_tolerance(Settings(engine={"dtype": "float32"})) == 2.0**-14
    remote = Settings(engine={"backend": "openai", "dtype": "float32"})
    assert tie_tolerance(remote) == 2.0**-8  # a remote engine's dtype is unknown
