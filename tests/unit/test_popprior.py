"""PopDebias' lambda estimators (docs/methods.md B.5): no negative lambda that flips answers."""

from __future__ import annotations

import random

import pytest

from service.scoring import debias, popprior


def _items(seed: int, n: int = 60) -> tuple[list[list[float]], list[list[float]], list[int]]:
    """A judge that knows the answer, on items whose gold is the least popular option (S2-like).

    log p = 4 * correct + noise: the judge has no popularity prior at all, yet popularity is
    correlated with being wrong by construction.
    """
    rng = random.Random(seed)
    probs, pops, golds = [], [], []
    for _ in range(n):
        gold = rng.randrange(4)
        pop = [rng.uniform(0.0, 0.2) if i == gold else rng.uniform(0.5, 1.0) for i in range(4)]
        probs.append(debias.softmax([4.0 * (i == gold) + rng.gauss(0, 1.5) for i in range(4)]))
        pops.append(pop)
        golds.append(gold)
    return probs, pops, golds


def _accuracy(
    probs: list[list[float]], pops: list[list[float]], golds: list[int], lam: float
) -> int:
    return sum(
        debias.argmax(debias.loglinear(p, pop, lam)) == g
        for p, pop, g in zip(probs, pops, golds, strict=True)
    )


def test_the_old_fit_goes_negative_and_flips_right_answers() -> None:
    """The failure this module exists for: the raw slope is negative, and applied it hurts."""
    probs, pops, golds = _items(1)
    raw = debias.fit_lambda(probs, pops)
    assert raw < -0.5
    assert _accuracy(probs, pops, golds, raw) < _accuracy(probs, pops, golds, 0.0)


def test_a_negative_regression_slope_is_clipped_and_reported() -> None:
    probs, pops, golds = _items(1)
    fit = popprior.fit_regression(probs, pops, "pop", "items")
    assert fit.raw == pytest.approx(debias.fit_lambda(probs, pops))
    assert fit.raw < 0
    assert fit.value == 0.0
    assert fit.clipped
    assert fit.params() == {
        "lambda": 0.0,
        "lambda_raw": fit.raw,
        "clipped": True,
        "lambda_fit": "items",
    }
    # Applied, the fit leaves every answer as the judge gave it.
    assert _accuracy(probs, pops, golds, fit.value) == _accuracy(probs, pops, golds, 0.0)


def test_question_free_reads_see_the_prior_and_not_the_answer() -> None:
    """Without the question the judge's only preference is its popularity prior (slope 1.2)."""
    _, pops, golds = _items(2)
    rng = random.Random(5)
    blind = [debias.softmax([1.2 * v + rng.gauss(0, 0.2) for v in pop]) for pop in pops]
    fit = popprior.fit_regression(blind, pops, "pop", "question_free")
    assert fit.value == pytest.approx(1.2, abs=0.2)
    assert not fit.clipped


def test_the_grid_fit_never_goes_below_zero_and_keeps_a_right_judge() -> None:
    probs, pops, golds = _items(3)
    fit = popprior.fit_grid(probs, pops, golds, "pop")
    assert fit.value >= 0.0
    assert fit.estimator == "grid"
    assert _accuracy(probs, pops, golds, fit.value) >= _accuracy(probs, pops, golds, 0.0)


def test_the_grid_fit_prefers_the_smallest_lambda_on_ties() -> None:
    """A judge that is right on every item whatever lambda: the fit is 0, not anything larger."""
    probs = [[0.97, 0.01, 0.01, 0.01]] * 5
    pops = [[0.5, 0.5, 0.5, 0.5]] * 5  # equal popularity: lambda changes nothing
    assert popprior.fit_grid(probs, pops, [0] * 5, "pop").value == 0.0


def test_the_grid_fit_finds_a_helpful_lambda() -> None:
    """A popular distractor beats the unpopular gold by 0.55 nats: lambda 0.6 undoes it."""
    probs = [debias.softmax([0.0, 0.55, 0.0, 0.0])] * 4
    pops = [[0.0, 1.0, 0.5, 0.5]] * 4
    fit = popprior.fit_grid(probs, pops, [0] * 4, "pop")
    assert fit.value == pytest.approx(0.6)  # the smallest grid value that is enough
    assert _accuracy(probs, pops, [0] * 4, fit.value) == 4


def test_the_grid_fit_refuses_misaligned_labels() -> None:
    with pytest.raises(ValueError, match="answers"):
        popprior.fit_grid([[0.5, 0.5]], [[0.1, 0.9]], [0, 1], "pop")


def test_no_calibration_items_give_lambda_zero() -> None:
    fit = popprior.fit_regression([], [], "pop", "question_free")
    assert (fit.value, fit.raw, fit.clipped) == (0.0, 0.0, False)
