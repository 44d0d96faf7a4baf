"""The PopDebias variants' cross-validation (service/evals/popdebias_cv.py): held-out fits only."""

from __future__ import annotations

import pytest

from service.evals import popdebias_cv as cv
from service.evals.popdebias_cv import Row

# An uncertain read that prefers the popular wrong option (index 1); a lambda fixes it.
TRAP = Row("q", "S2", (0.32, 0.36, 0.17, 0.15), (0.1, 0.9, 0.3, 0.2), 0)
# A confident right read of the most popular option: any strong popularity prior breaks it
# only when applied at full strength, not scaled by the read's (low) uncertainty.
KNOWN_POPULAR = Row("q", "S5", (0.7, 0.1, 0.1, 0.1), (0.9, 0.1, 0.05, 0.0), 0)


def _as(row: Row, question: str) -> Row:
    return Row(question, row.strategy, row.probs, row.pops, row.answer)


def test_uncertainty_is_normalised_entropy() -> None:
    assert cv.uncertainty([1.0, 0.0, 0.0, 0.0]) == 0.0
    assert cv.uncertainty([0.25] * 4) == pytest.approx(1.0)
    assert 0 < cv.uncertainty([0.7, 0.1, 0.1, 0.1]) < 1


def test_folds_split_by_question_evenly_and_by_seed() -> None:
    qs = [f"q{i}" for i in range(11)] * 3
    folds = cv.folds_of(qs, 5, seed=0)
    assert set(folds) == set(qs)
    sizes = [sum(f == k for f in folds.values()) for k in range(5)]
    assert max(sizes) - min(sizes) <= 1
    assert folds == cv.folds_of(qs, 5, seed=0)
    assert folds != cv.folds_of(qs, 5, seed=1)


def test_a_lambda_fixes_the_trap_and_the_entropy_scale_spares_a_confident_read() -> None:
    rows = [_as(TRAP, f"t{i}") for i in range(10)] + [
        _as(KNOWN_POPULAR, f"k{i}") for i in range(10)
    ]
    out = cv.cross_validate(rows, k=5, seed=0)
    t = out["table"]
    assert t["none"]["S2"]["accuracy"] == 0.0
    assert t["grid"]["S2"]["accuracy"] == 1.0
    assert t["entropy"]["S2"]["accuracy"] == 1.0
    assert t["entropy"]["S5"]["accuracy"] == 1.0
    assert all(len(v) == 5 for v in out["lambdas"].values())
    assert out["lambdas"]["none"] == [0.0] * 5
    # the smallest lambda that fixes every trap on the training folds
    assert all(0 < lam <= 1 for lam in out["lambdas"]["grid"])


def test_no_item_is_scored_by_a_fit_that_saw_it() -> None:
    """Two questions, two folds: one needs a lambda, the other is broken by any. Fitted on the
    other question only, each is scored wrong; an in-sample fit would get one right."""
    broken_by_lambda = Row("b", "S1", (0.4, 0.38, 0.12, 0.1), (0.9, 0.1, 0.2, 0.3), 0)
    rows = [_as(TRAP, "a"), broken_by_lambda]
    out = cv.cross_validate(rows, k=2, seed=0, variants=("none", "grid"))
    lams = out["lambdas"]["grid"]
    assert 0.0 in lams
    assert max(lams) > 0  # each fold's fit saw only the other question
    assert out["table"]["grid"]["S2"]["accuracy"] == 0.0
    assert out["table"]["grid"]["S1"]["accuracy"] == 0.0
    assert cv.fit("grid", rows) == 0.0  # in sample, no lambda beats none's one right answer
    assert cv.fit("grid", [rows[0]]) > 0


def test_the_bar() -> None:
    def table(**acc: float) -> dict[str, dict[str, float]]:
        return {s: {"accuracy": a, "accuracy_se": 0.05} for s, a in acc.items()}

    none = table(S1=0.8, S2=0.5, S5=0.9, S6=0.2)
    assert cv.meets_bar(none, table(S1=0.76, S2=0.6, S5=0.86, S6=0.3))
    assert not cv.meets_bar(none, table(S1=0.8, S2=0.6, S5=0.84, S6=0.3))  # S5 beyond one SE
    assert not cv.meets_bar(none, table(S1=0.8, S2=0.5, S5=0.9, S6=0.3))  # S2 not up


def test_rows_of_a_response() -> None:
    item = {
        "item_id": "q1",
        "strategy": "S2",
        "options": ["a", "b", "c", "d"],
        "popularity": [0.1, 0.9, 0.8, 0.7],
        "answer_index": 0,
        "probs": [0.4, 0.3, 0.2, 0.1],
        "chosen": {"none": 0},
    }
    [row] = cv.rows_of({"items": [item]})
    assert row == Row("q1", "S2", (0.4, 0.3, 0.2, 0.1), (0.1, 0.9, 0.8, 0.7), 0)
