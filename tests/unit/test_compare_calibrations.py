"""Probability calibrations of target ``compare``: the request's refusals, the orientation of
the pairs as fitted, and the calibrated comparison built from the raw one (docs/methods.md J.5).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import special

from service.api import calibrated
from service.protocol import ScoreRequest, Usage
from service.protocol.base import BudgetInfo
from service.protocol.calibrate import ProbabilityCalibrationRequest
from service.protocol.compare import CompareRequest, CompareResponse
from service.scoring.calibration import fit_temperature, pair_labels, pair_logits
from service.serving.calibrate import CalibrationServing
from tests.support.calibration_records import record

PAIR = {"question": "q", "responses": ["a", "b"], "preferred": 0}


def pairs(n: int, **update: Any) -> list[dict[str, Any]]:
    return [{**PAIR, "responses": [f"a{i}", f"b{i}"], **update} for i in range(n)]


def fit_request(examples: list[dict[str, Any]], **options: Any) -> ProbabilityCalibrationRequest:
    body = {"target": "compare", "examples": examples, **options}
    return ProbabilityCalibrationRequest.model_validate(body)


def test_pairs_sent_preferred_first_are_fitted_on_both_labels() -> None:
    req = fit_request(pairs(10))
    assert req.labels() == [1, 0] * 5
    assert len(req.compare_examples()) == 10
    assert req.outcome_examples() == []


@pytest.mark.parametrize(
    ("examples", "options", "says"),
    [
        (pairs(10), {"method": "platt"}, "temperature only"),
        (pairs(10, preferred=2), {}, "preferred must be 0 or 1"),
        (pairs(10, responses=["a", "b", "c"]), {}, "at most 2 items"),
        (pairs(10, responses=["a", " "]), {}, "responses\\[1\\]"),
        (pairs(7), {}, "at least 8 items"),
        (pairs(9), {}, "5 folds need at least 5 examples of each label"),
        (
            [{"question": "q", "response": "r", "label": i % 2} for i in range(10)],
            {},
            "not a compare example",
        ),
    ],
)
def test_a_compare_fit_that_cannot_be_made_is_refused(
    examples: list[dict[str, Any]], options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        fit_request(examples, **options)


def test_pairs_under_target_outcome_are_refused() -> None:
    with pytest.raises(ValidationError, match="not a outcome example"):
        ProbabilityCalibrationRequest.model_validate({"target": "outcome", "examples": pairs(10)})


def test_either_orientation_of_a_pair_fits_the_same_temperature() -> None:
    rng = np.random.default_rng(0)
    p = special.expit(rng.normal(1.0, 2.0, 40))
    z = np.array(pair_logits(p.tolist()))
    y = np.array(pair_labels(40))
    assert (np.sign(z) == np.where(y == 1, 1, -1) * np.sign(special.logit(p))).all()
    # every pair read the other way round: the same temperature
    assert fit_temperature(z, y).t == pytest.approx(fit_temperature(-z, 1 - y).t, rel=1e-6)
    assert all(np.isfinite(pair_logits([0.0, 1.0])))


def test_a_probability_calibration_id_fits_pairwise_swap_reads_on_the_compare_route_only() -> None:
    base = {"question": "q", "responses": ["a", "b", "c"]}
    CompareRequest.model_validate({**base, "calibration_id": "pcal_x"})
    CompareRequest.model_validate({**base, "calibration_id": "none", "mode": "listwise"})
    for other in ({"mode": "listwise"}, {"debias": "none"}):
        with pytest.raises(ValidationError, match="debias='swap'"):
            CompareRequest.model_validate({**base, "calibration_id": "pcal_x", **other})
    with pytest.raises(ValidationError, match="needs debias='pride'"):
        CompareRequest.model_validate({**base, "calibration_id": "cal_x"})
    for cid in ("none", "pcal_x"):  # pride needs its prior whatever else is named
        with pytest.raises(ValidationError, match="needs calibration_id"):
            CompareRequest.model_validate(
                {**base, "mode": "listwise", "debias": "pride", "calibration_id": cid}
            )
    with pytest.raises(ValidationError, match="/v1/judge/compare only"):
        ScoreRequest.model_validate(
            {**base, "method": "compare", "compare": {"calibration_id": "pcal_x"}}
        )


def comparison(preferences: list[list[float | None]], **update: Any) -> CompareResponse:
    n = len(preferences)
    scores = [float(np.mean([p for p in row if p is not None])) for row in preferences]
    return CompareResponse.model_validate(
        {
            "mode": "pairwise",
            "aggregation": "win_rate",
            "debias": "swap",
            "model": "m",
            "results": [{"index": i, "reward": s, "score": s} for i, s in enumerate(scores)],
            "ranking": sorted(range(n), key=lambda i: -scores[i]),
            "preferences": preferences,
            "position_consistency": 1.0,
            "first_position_rate": 0.5,
            "passes": n * (n - 1),
            "usage": Usage().model_dump(),
            **update,
        }
    )


def test_a_calibrated_pair_maps_its_preferences_and_scores_and_keeps_the_rest() -> None:
    cal = record("temperature", target="compare")  # T = 2
    resp = comparison([[None, 0.8], [0.2, None]])
    out = calibrated.compare(resp, cal)
    p = float(special.expit(special.logit(0.8) / 2))
    assert out.preferences[0][1] == pytest.approx(p, abs=1e-12)
    assert out.preferences[0][1] + out.preferences[1][0] == pytest.approx(1.0, abs=1e-12)
    assert out.raw_preferences == resp.preferences
    assert [r.score for r in out.results] == [out.preferences[0][1], out.preferences[1][0]]
    assert [r.raw_score for r in out.results] == [0.8, 0.2]
    assert [r.reward for r in out.results] == [0.8, 0.2]
    assert out.ranking == resp.ranking
    assert out.calibration is not None
    assert out.calibration.id == cal.id
    assert calibrated.compare(resp, None) == resp


def test_three_responses_map_every_preference_and_leave_the_aggregate_scores_raw() -> None:
    cal = record("temperature", target="compare")
    resp = comparison([[None, 0.9, 0.6], [0.1, None, 0.3], [0.4, 0.7, None]])
    out = calibrated.compare(resp, cal)
    for i in range(3):
        for j in range(3):
            raw = resp.preferences[i][j]
            got = out.preferences[i][j]
            if raw is None:
                assert got is None
            else:
                want = special.expit(special.logit(raw) / 2)
                assert got == pytest.approx(want, abs=1e-12)
    assert out.results == resp.results
    assert all(r.raw_score is None for r in out.results)


def test_a_read_lowered_to_direct_is_not_mapped_by_a_reasoning_calibration() -> None:
    cal = record("temperature", target="compare", mode="reasoning")
    budget = BudgetInfo(max_eval_tokens=10, estimate=9, degraded=True)
    resp = comparison([[None, 0.8], [0.2, None]], budget=budget.model_dump())
    assert calibrated.compare(resp, cal) == resp


class _Comparisons:
    """What the fit reads each pair as: a fixed preference matrix per pair."""

    def __init__(self, preferred_first: list[float]) -> None:
        self.left = iter(preferred_first)
        self.seen: list[CompareRequest] = []

    async def compare(self, req: CompareRequest) -> CompareResponse:
        self.seen.append(req)
        p = next(self.left)
        return comparison([[None, p], [1 - p, None]])


async def test_a_compare_fit_reads_each_pair_in_both_orders_and_orients_it() -> None:
    p = [0.9, 0.7, 0.6, 0.4, 0.8, 0.3, 0.95, 0.5, 0.65, 0.2]
    examples = pairs(10)
    for k in (1, 4):  # the preferred response sent second: its preference is [1][0]
        examples[k] = {**examples[k], "preferred": 1}
    reads = [1 - x if k in (1, 4) else x for k, x in enumerate(p)]  # [0][1] as read
    fake = _Comparisons(reads)
    serving = CalibrationServing(None, fake, None, None, "m")  # type: ignore[arg-type]
    out = await serving.fit(fit_request(examples))
    assert [(r.mode, r.resolved_debias(), r.reasoning) for r in fake.seen] == [
        ("pairwise", "swap", False)
    ] * 10
    z = np.array(pair_logits(p))
    want = fit_temperature(z, np.array(pair_labels(10))).t
    assert out.parameters["temperature"] == pytest.approx(want, rel=1e-9)
    assert (out.target, out.examples, out.positives) == ("compare", 10, 5)
    assert out.fit_set.raw.mean_probability == pytest.approx(float(special.expit(z).mean()))
