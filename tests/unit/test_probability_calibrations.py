"""Probability calibrations, the pure parts: the fit request's refusals, which stored
calibration applies to a request, and the calibrated answers built from raw ones."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from service.api import calibrated
from service.errors import CalibrationMismatch, UnknownCalibration
from service.protocol import (
    OutcomeResponse,
    RerankRequest,
    ScoreRequest,
    ScoreResponse,
    Usage,
)
from service.protocol.base import BudgetInfo
from service.protocol.calibrate import (
    ProbabilityCalibrationRequest,
)
from service.protocol.judge import RerankMeta, RerankResponse, RerankResult, ScoreResult
from service.protocol.reward import RewardRequest, RewardResponse
from service.scoring.calibration import calibrated_probability, calibrator_of
from service.stores import probability_calibrations as pc
from tests.support.calibration_records import record


def examples(labels: list[Any]) -> list[dict[str, Any]]:
    return [{"question": "q", "response": f"r{i}", "label": y} for i, y in enumerate(labels)]


def fit_request(labels: list[Any], **options: Any) -> ProbabilityCalibrationRequest:
    body = {"target": "outcome", "examples": examples(labels), **options}
    return ProbabilityCalibrationRequest.model_validate(body)


@pytest.mark.parametrize(
    ("labels", "options", "says"),
    [
        ([0, 1] * 3 + [0], {}, "at least 8 items"),
        ([1] * 10, {}, "all 10 examples are labelled 1"),
        ([0] * 10, {}, "all 10 examples are labelled 0"),
        ([1] * 4 + [0] * 6, {}, "5 folds need at least 5 examples of each label"),
        ([0, 1] * 4, {"folds": 2}, "leave 4 to fit a fold on; need 8"),
        (["1"] + [0, 1] * 5, {}, "valid integer"),
        ([True] + [0, 1] * 5, {}, "valid integer"),
        ([1.0] + [0, 1] * 5, {}, "valid integer"),
        ([2] + [0, 1] * 5, {}, "label must be 0 or 1"),
    ],
)
def test_a_fit_that_cannot_be_made_is_refused_before_any_read(
    labels: list[Any], options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        fit_request(labels, **options)


def test_the_smallest_fits_are_admitted() -> None:
    assert len(fit_request([0, 1] * 5).examples) == 10  # 5 folds: 8 to fit each on
    assert len(fit_request([0, 1] * 8, folds=2).examples) == 16


async def test_the_applicable_calibration_is_named_default_or_none() -> None:
    store = pc.memory_store()
    named, default = record(), record("temperature")
    for cal in (named, default):
        await store.put("alpha", cal)

    async def pick(cid: str | None, mode: str = "direct", model: str = "m") -> str | None:
        cal = await pc.applicable(store, "alpha", cid, "outcome", mode, model)
        return None if cal is None else cal.id

    assert await pick(None) is None  # no default marked: raw
    await store.set_default("alpha", "outcome", default.id)
    assert await pick(None) == default.id
    assert await pick(named.id) == named.id
    assert await pick("none") is None
    # a default fitted for another mode or model is left out, not refused
    assert await pick(None, mode="reasoning") is None
    assert await pick(None, model="other") is None
    with pytest.raises(CalibrationMismatch, match="fitted on direct judgments"):
        await pick(named.id, mode="reasoning")
    with pytest.raises(CalibrationMismatch, match="model 'm', not 'other'"):
        await pick(named.id, model="other")
    with pytest.raises(UnknownCalibration):
        await pick("pcal_missing123")
    # another tenant's id is unknown to this one, and its defaults are its own
    assert await pc.applicable(store, "beta", None, "outcome", "direct", "m") is None
    with pytest.raises(UnknownCalibration):
        await pc.applicable(store, "beta", named.id, "outcome", "direct", "m")


@pytest.mark.parametrize(
    ("method", "params", "z", "expected"),
    [
        ("temperature", {"temperature": 4.0}, 2.0, 1 / (1 + math.exp(-0.5))),
        ("platt", {"a": 0.5, "b": -1.0}, 2.0, 0.5),
        ("raw", {}, 0.3, 1 / (1 + math.exp(-0.3))),
    ],
)
def test_a_stored_map_is_applied_by_its_formula(
    method: str, params: dict[str, Any], z: float, expected: float
) -> None:
    assert calibrated_probability(method, params, z) == pytest.approx(expected, abs=1e-15)
    assert calibrator_of(method, params).method == method


def outcome_response(
    logit: float | None, decided_by: str = "model", **update: Any
) -> OutcomeResponse:
    score = None if logit is None else 1 / (1 + math.exp(-logit))
    resp = OutcomeResponse(
        score=score,
        logit=logit,
        verdict=None if score is None else int(score >= 0.5),
        mode="direct",
        model="m",
        decided_by=decided_by,  # type: ignore[arg-type]
        usage=Usage(),
    )
    return resp.model_copy(update=update)


@pytest.mark.parametrize("method", ["temperature", "platt"])
def test_calibrated_outcomes_keep_the_order_of_the_raw_ones(method: str) -> None:
    cal = record(method)
    logits = np.random.default_rng(0).normal(0, 3, 200)
    raw = [outcome_response(float(z)) for z in logits]
    mapped = [calibrated.outcome(r, cal) for r in raw]
    for before, after in zip(raw, mapped, strict=True):
        assert after.raw_score == before.score
        assert after.logit == before.logit
        assert after.verdict == int(after.score >= 0.5)  # type: ignore[operator]
        assert after.calibration is not None
        assert after.calibration.id == cal.id
    r = np.array([x.score for x in raw])
    c = np.array([x.score for x in mapped])
    assert (np.argsort(r, kind="stable") == np.argsort(c, kind="stable")).all()


def test_a_rule_decision_or_a_read_of_another_mode_is_never_mapped() -> None:
    cal = record()
    ruled = outcome_response(None, decided_by="rule").model_copy(update={"score": 1.0})
    assert calibrated.outcome(ruled, cal) == ruled
    reasoning = outcome_response(0.5, mode="reasoning")
    assert calibrated.outcome(reasoning, cal) == reasoning
    assert calibrated.outcome(outcome_response(0.5), None) == outcome_response(0.5)


def test_a_reward_maps_only_what_the_model_decided() -> None:
    cal = record()
    resp = RewardResponse(
        rewards=[1.0, 0.0, 0.6],
        scores=[1.0, 0.0, 0.6],
        extra_logs={
            "decided_by_rule": [1.0, 0.0, 0.0],
            "decided_by_model": [0.0, 0.0, 1.0],
            "verifier_logit": [1e4, -1e4, 0.4],
            "model_score": [0.0, 0.0, 0.6],
        },
    )
    out = calibrated.reward(resp, cal)
    p = calibrated_probability("platt", dict(cal.parameters), 0.4)
    assert out.scores == out.rewards == [1.0, 0.0, p]
    assert out.extra_logs["model_score"] == [0.0, 0.0, 0.6]
    assert out.calibration is not None


def score_response(**update: Any) -> ScoreResponse:
    results = [
        ScoreResult(index=0, outcome=0.7, final=0.7, decided_by="model"),
        ScoreResult(index=1, outcome=1.0, final=1.0, decided_by="rule"),
        ScoreResult(index=2, outcome=0.2, final=0.2, decided_by="model"),
    ]
    resp = ScoreResponse(
        method="outcome", alpha=0.5, model="m", results=results, ranking=[1, 0, 2], usage=Usage()
    )
    return resp.model_copy(update=update)


def test_a_score_maps_model_outcomes_and_keeps_the_ranking() -> None:
    cal = record()
    out = calibrated.score(score_response(), cal)
    mapped = [r.outcome for r in out.results]
    assert mapped[1] == 1.0
    assert out.results[1].raw_outcome is None
    assert mapped[0] == pytest.approx(
        calibrated_probability("platt", dict(cal.parameters), math.log(0.7 / 0.3))
    )
    assert [r.raw_outcome for r in out.results] == [0.7, None, 0.2]
    assert [r.final for r in out.results] == mapped
    assert out.ranking == [1, 0, 2]
    # reads the budget lowered to direct are left alone by a reasoning calibration
    lowered = score_response(budget=BudgetInfo(max_eval_tokens=10, estimate=9, degraded=True))
    assert calibrated.score(lowered, record(mode="reasoning")) == lowered


def test_a_rerank_maps_model_scores_and_keeps_the_order() -> None:
    cal = record()
    results = [
        RerankResult(index=2, relevance_score=1.0, decided_by="rule"),
        RerankResult(index=0, relevance_score=0.7, decided_by="model"),
        RerankResult(index=1, relevance_score=0.2, decided_by="model"),
    ]
    resp = RerankResponse(
        id="r", model="m", results=results, meta=RerankMeta(billed_units={}), usage=Usage()
    )
    out = calibrated.rerank(resp, cal)
    assert [r.index for r in out.results] == [2, 0, 1]
    assert [r.raw_score for r in out.results] == [None, 0.7, 0.2]
    scores = [r.relevance_score for r in out.results]
    assert scores[0] == 1.0
    assert scores == sorted(scores, reverse=True)
    assert out.calibration is not None
    assert calibrated.rerank(resp, None) == resp


def test_a_calibration_id_needs_the_outcome_method() -> None:
    with pytest.raises(ValidationError, match="method='outcome'"):
        ScoreRequest.model_validate(
            {"question": "q", "responses": ["a"], "method": "fused", "calibration_id": "pcal_x"}
        )
    with pytest.raises(ValidationError, match="method='outcome'"):
        RewardRequest.model_validate(
            {"query": ["a", "b"], "method": "compare", "calibration_id": "pcal_x"}
        )
    with pytest.raises(ValidationError, match="method='outcome'"):
        RerankRequest.model_validate(
            {"query": "q", "documents": ["a"], "method": "process", "calibration_id": "pcal_x"}
        )
    ScoreRequest.model_validate(
        {"question": "q", "responses": ["a"], "method": "fused", "calibration_id": "none"}
    )
