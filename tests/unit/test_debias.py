"""Debiasing math (docs/methods.md B.5-B.7 and the suggested tests 5-6)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.scoring import debias

probs_k = st.integers(min_value=2, max_value=10).flatmap(
    lambda k: st.lists(st.floats(0.001, 1.0), min_size=k, max_size=k)
)


def norm(values: list[float]) -> list[float]:
    total = sum(values)
    return [v / total for v in values]


@given(raw=probs_k, data=st.data())
def test_lambda_zero_gives_the_raw_answer_exactly(raw: list[float], data: st.DataObject) -> None:
    p = norm(raw)
    pops = data.draw(st.lists(st.floats(0, 1), min_size=len(p), max_size=len(p)))
    assert debias.loglinear(p, pops, 0.0) == p
    assert debias.argmax(debias.loglinear(p, pops, 0.0)) == debias.argmax(p)


def test_positive_lambda_moves_probability_toward_less_popular_options() -> None:
    p = [0.4, 0.35, 0.25]
    pops = [1.0, 0.0, 0.5]
    out = debias.loglinear(p, pops, 2.0)
    assert debias.argmax(p) == 0
    assert debias.argmax(out) == 1  # the unpopular option wins once the prior is removed
    assert out[0] < p[0]
    assert out[1] > p[1]
    assert sum(out) == pytest.approx(1.0)


def test_label_free_lambda_recovers_the_planted_slope_on_independent_data() -> None:
    """log p = theta*correct + lambda_true*pop + noise, correctness independent of pop."""
    rng = random.Random(7)
    lam_true, theta = 1.7, 2.0
    probs, pops = [], []
    for _ in range(400):
        pop = [rng.random() for _ in range(4)]
        gold = rng.randrange(4)
        logits = [theta * (i == gold) + lam_true * pop[i] + rng.gauss(0, 0.3) for i in range(4)]
        probs.append(debias.softmax(logits))
        pops.append(pop)
    assert debias.fit_lambda(probs, pops) == pytest.approx(lam_true, abs=0.15)


def test_label_free_lambda_is_biased_when_popularity_tracks_correctness() -> None:
    """Documented limit: if the gold option is also the popular one, lambda absorbs signal."""
    rng = random.Random(3)
    probs, pops = [], []
    for _ in range(300):
        gold = rng.randrange(4)
        pop = [0.9 if i == gold else 0.1 for i in range(4)]
        logits = [2.0 * (i == gold) + rng.gauss(0, 0.3) for i in range(4)]
        probs.append(debias.softmax(logits))
        pops.append(pop)
    assert debias.fit_lambda(probs, pops) > 1.0  # lambda_true is 0


def test_binned_prior_and_an_empty_bin() -> None:
    probs = [[0.7, 0.2, 0.1], [0.6, 0.3, 0.1]]
    pops = [[0.9, 0.5, 0.5], [0.95, 0.4, 0.6]]  # no option <= 0.3: bin 0 is empty
    log_pi = debias.fit_bins(probs, pops)
    assert log_pi[0] == 0.0
    assert log_pi[2] > 0 > log_pi[1]  # popular options carry more probability here
    centred = [lp - sum(map(math.log, p)) / 3 for p in probs for lp in map(math.log, p)]
    assert log_pi[2] == pytest.approx((centred[0] + centred[3]) / 2)
    out = debias.binned(probs[0], pops[0], log_pi)
    assert out[0] < probs[0][0]
    assert debias.bin_of(0.3) == 0
    assert debias.bin_of(0.30001) == 1
    assert debias.bin_of(0.7) == 1
    assert debias.bin_of(0.71) == 2


@pytest.mark.parametrize("k", [2, 4, 5, 10])
def test_pride_recovers_a_planted_letter_prior(k: int) -> None:
    """A model whose letter probabilities are uniform content x prior_ID (suggested test 5)."""
    rng = random.Random(k)
    prior = norm([rng.uniform(0.2, 1.0) for _ in range(k)])
    item_priors = []
    for _ in range(5):
        content = norm([rng.uniform(0.1, 1.0) for _ in range(k)])
        runs = []
        for shift in range(k):
            shown = [content[(d + shift) % k] for d in range(k)]  # cyclic permutation
            runs.append(norm([shown[d] * prior[d] for d in range(k)]))
        item_priors.append(debias.pride_item_prior(runs))
        # The item's own answer averages content over the runs: not the letter.
        own = debias.pride_content_probs(runs)
        assert debias.argmax(own) == debias.argmax(content)
    recovered = debias.pride_global_prior(item_priors)
    assert recovered == pytest.approx(prior, abs=1e-6)
    observed = norm([c * p for c, p in zip(content, prior, strict=True)])
    assert debias.pride(observed, recovered) == pytest.approx(content, abs=1e-6)


def test_cyclic_permutations_cover_every_position() -> None:
    options = ["a", "b", "c", "d"]
    runs = [debias.cyclic(options, s) for s in range(4)]
    assert runs[1] == ["b", "c", "d", "a"]
    for d in range(4):
        assert sorted(r[d] for r in runs) == options


@given(raw=probs_k, cf=st.data())
def test_contextual_calibration_is_p_over_p_cf_renormalised(
    raw: list[float], cf: st.DataObject
) -> None:
    p = norm(raw)
    p_cf = norm(cf.draw(st.lists(st.floats(0.01, 1), min_size=len(p), max_size=len(p))))
    expected = norm([a / b for a, b in zip(p, p_cf, strict=True)])
    assert debias.contextual(p, p_cf) == pytest.approx(expected, rel=1e-9)


def test_contextual_clips_a_vanishing_p_cf() -> None:
    out = debias.contextual([0.5, 0.5], [1.0, 0.0])
    assert out[1] > out[0]
    assert all(math.isfinite(v) for v in out)


def test_mean_probs_and_min_max() -> None:
    assert debias.mean_probs([[0.5, 0.5], [1.0, 0.0]]) == pytest.approx([0.75, 0.25])
    assert debias.min_max([-3.0, -1.0, -2.0]) == [0.0, 1.0, 0.5]
    assert debias.min_max([-2.0, -2.0]) == [0.5, 0.5]


def test_rstd() -> None:
    gold = [0, 0, 1, 1]
    assert debias.rstd(gold, [0, 0, 1, 1], 2) == 0.0
    # recall 100 for class 0, 0 for class 1: std 50
    assert debias.rstd(gold, [0, 0, 0, 0], 2) == pytest.approx(50.0)


def test_argmax_ties_go_to_the_lowest_index() -> None:
    assert debias.argmax([0.2, 0.4, 0.4]) == 1
