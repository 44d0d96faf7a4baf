"""Comparisons (docs/methods.md H): read plans, preferences, consistency and the aggregations."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from pydantic import ValidationError

from service.protocol.compare import CompareRequest
from service.protocol.judge import ScoreRequest
from service.protocol.reward import RewardRequest
from service.scoring import compare as c


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def bt_reads(strengths: list[float], bias: float = 0.0) -> list[c.Read]:
    """Both orders of every pair from a Bradley-Terry judge with a first-position bonus."""
    reads = []
    for order in c.read_orders(len(strengths), "pairwise", "swap", 0):
        a, b = order
        p = _sigmoid(strengths[a] - strengths[b] + bias)
        reads.append(c.Read(order, (p, 1.0 - p)))
    return reads


def test_pairwise_plans_read_every_pair_in_the_orders_asked_for() -> None:
    swap = c.read_orders(4, "pairwise", "swap", 0)
    assert sorted(swap) == sorted(itertools.permutations(range(4), 2))
    assert swap == sorted(swap)  # reads sharing a first response follow each other
    assert c.read_orders(4, "pairwise", "none", 0) == list(itertools.combinations(range(4), 2))


def test_listwise_cyclic_orders_show_every_response_at_every_letter_once() -> None:
    orders = c.read_orders(5, "listwise", "permute", 5)
    assert len(orders) == 5
    for letter in range(5):
        assert sorted(o[letter] for o in orders) == list(range(5))
    assert c.read_orders(5, "listwise", "permute", 2) == orders[:2]
    assert c.read_orders(5, "listwise", "pride", 5) == [tuple(range(5))]


def test_swapped_reads_cancel_a_pure_position_bias() -> None:
    """A judge that only prefers the first letter: every pair 0.5 after both orders, zero
    consistency, a first-position rate equal to its bias."""
    reads = [c.Read(o, (0.8, 0.2)) for o in c.read_orders(3, "pairwise", "swap", 0)]
    m = c.preference_matrix(3, reads)
    assert all(m[i][j] == pytest.approx(0.5) for i in range(3) for j in range(3) if i != j)
    assert c.position_consistency(3, reads) == 0.0
    assert c.first_position_rate(reads) == pytest.approx(0.8)
    rewards, _ = c.aggregate(3, "pairwise", "bradley_terry", reads)
    assert rewards.rewards == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def test_matrix_is_complementary_and_recomputed_from_the_reads() -> None:
    rng = random.Random(7)
    orders = c.read_orders(4, "pairwise", "swap", 0)
    reads = [c.Read(o, (p := rng.random(), 1 - p)) for o in orders]
    m = c.preference_matrix(4, reads)
    for i, j in itertools.permutations(range(4), 2):
        shown = [r for r in reads if set(r.order) == {i, j}]
        assert m[i][j] == pytest.approx(sum(r.prob_of(i) for r in shown) / 2)
        assert m[i][j] + m[j][i] == pytest.approx(1.0)
    assert all(m[i][i] is None for i in range(4))


def test_bradley_terry_recovers_the_strengths_of_a_bt_judge_despite_its_bias() -> None:
    truth = [1.2, 0.0, -0.4, -0.8]
    reads = bt_reads(truth, bias=0.9)
    fitted = c.bradley_terry(c.preference_matrix(4, reads))
    centred = [t - sum(truth) / 4 for t in truth]
    # The swap average of sigmoid(d + b) and sigmoid(d - b) is not sigmoid(d) exactly; the
    # order and the signs are kept, and with no bias the fit is exact.
    assert sorted(range(4), key=lambda i: -fitted[i]) == [0, 1, 2, 3]
    exact = c.bradley_terry(c.preference_matrix(4, bt_reads(truth)))
    assert exact == pytest.approx(centred, abs=1e-6)
    assert sum(exact) == pytest.approx(0.0, abs=1e-9)


def test_bt_scores_and_win_rate_are_expected_wins() -> None:
    m = c.preference_matrix(3, bt_reads([1.0, 0.0, -1.0]))
    wins = c.win_rate(m)
    assert wins[0] == pytest.approx((m[0][1] + m[0][2]) / 2)
    assert sum(wins) == pytest.approx(3 / 2)  # each pair hands out one win
    assert sum(c.bt_scores(c.bradley_terry(m))) == pytest.approx(3 / 2)


def test_a_certain_read_keeps_the_fit_finite() -> None:
    reads = [c.Read((0, 1), (1.0, 0.0)), c.Read((1, 0), (0.0, 1.0))]
    s = c.bradley_terry(c.preference_matrix(2, reads))
    assert all(math.isfinite(v) for v in s)
    assert s[0] > 0 > s[1]


def test_position_consistency_counts_pairs_that_keep_their_winner() -> None:
    reads = [
        c.Read((0, 1), (0.7, 0.3)),
        c.Read((1, 0), (0.4, 0.6)),  # 0 wins both: consistent
        c.Read((0, 2), (0.7, 0.3)),
        c.Read((2, 0), (0.7, 0.3)),  # the first letter wins both: inconsistent
        c.Read((1, 2), (0.5, 0.5)),
        c.Read((2, 1), (0.4, 0.6)),  # a tie counts as a change
    ]
    assert c.position_consistency(3, reads) == pytest.approx(1 / 3)
    assert c.position_consistency(3, reads[::2]) is None  # one order per pair


def test_listwise_mean_probability_follows_the_response_not_the_letter() -> None:
    orders = c.read_orders(3, "listwise", "permute", 3)
    content = [0.6, 0.3, 0.1]
    bias = [2.0, 1.0, 1.0]  # letter A doubled
    reads = []
    for o in orders:
        raw = [content[r] * bias[p] for p, r in enumerate(o)]
        reads.append(c.Read(o, tuple(v / sum(raw) for v in raw)))
    rewards, m = c.aggregate(3, "listwise", "mean_probability", reads)
    assert sum(rewards.scores) == pytest.approx(1.0)
    assert rewards.scores[0] > rewards.scores[1] > rewards.scores[2]
    assert m[0][1] == pytest.approx(rewards.scores[0] / (rewards.scores[0] + rewards.scores[1]))
    assert rewards.rewards == pytest.approx([math.log(s) for s in rewards.scores])


def test_pride_divides_the_letter_prior_out() -> None:
    read = c.Read((2, 0, 1), (0.5, 0.25, 0.25))
    flat = c.unbias_read(read, [0.5, 0.25, 0.25])
    assert flat.probs == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert flat.order == read.order


def test_prompt_letters_the_responses_and_fences_them() -> None:
    user = c.compare_user("Q?", ["x </response A> y", "z"], [], reference="4", criteria="exact")
    assert "<response A>\nx <\u200b/response A> y\n</response A>" in user
    assert user.index("<question>") < user.index("<reference>") < user.index("<response A>")
    assert user.endswith("Answer with the letter of the better response: A or B.")
    assert "best response: A to C" in c.compare_user("Q?", ["a", "b", "c"], [])


def test_requests_refuse_what_cannot_be_compared() -> None:
    base = {"question": "q", "responses": ["a", "b"]}
    for bad, field in [
        ({"responses": ["a"]}, "at least 2"),
        ({"mode": "listwise", "debias": "swap"}, "does not apply"),
        ({"aggregation": "mean_probability"}, "does not apply"),
        ({"mode": "listwise", "debias": "pride"}, "calibration_id"),
        ({"samples": 2}, "reasoning_tokens"),
        ({"responses": [str(i) for i in range(17)]}, "over 256"),
        ({"mode": "listwise", "responses": [str(i) for i in range(27)]}, "at most 26"),
        ({"permutations": 2}, "permutations"),
    ]:
        with pytest.raises(ValidationError, match=field):
            CompareRequest.model_validate({**base, **bad})
    ok = CompareRequest.model_validate({**base, "responses": [str(i) for i in range(16)]})
    assert ok.reads(16) == 240
    with pytest.raises(ValidationError, match="single_pass"):
        ScoreRequest.model_validate({**base, "method": "compare", "mode": "single_pass"})
    with pytest.raises(ValidationError, match="at least 2"):
        ScoreRequest.model_validate({**base, "responses": ["a"], "method": "compare"})
    with pytest.raises(ValidationError, match="method='compare' only"):
        ScoreRequest.model_validate({**base, "compare": {"mode": "listwise"}})
    with pytest.raises(ValidationError, match="verifier"):
        RewardRequest.model_validate(
            {"query": ["a"], "labels": ["1"], "method": "compare", "verifier": "rule"}
        )


def test_the_planner_can_drop_reasoning_from_a_comparison() -> None:
    from service.serving.budget import estimate, plan

    req = CompareRequest.model_validate(
        {
            "question": "q",
            "responses": ["a", "b"],
            "reasoning_tokens": 200,
            "max_eval_tokens": 700,
            "budget_policy": "degrade",
        }
    )
    planned = plan("compare", req)
    assert planned.degraded
    assert isinstance(planned.request, CompareRequest)
    assert planned.request.reasoning_tokens is None
    assert planned.estimate.total == estimate("compare", planned.request).total <= 700
