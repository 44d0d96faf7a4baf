"""Probability calibrations of target ``decisions``, the pure parts: multi-class metrics and
fits, the fit request's refusals, and calibrated decision answers built from raw ones
(docs/methods.md J.6)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import special

from service.api import calibrated
from service.protocol.base import Usage
from service.protocol.calibrate import ProbabilityCalibrationRequest
from service.protocol.decision_results import (
    ChoiceAnswer,
    ChoiceProbability,
    DecisionResponse,
    DecisionUsage,
    PredicateAnswer,
    RefusalAnswer,
    ScoreAnswer,
    ScoreProbability,
)
from service.protocol.decisions import DecisionRequest
from service.protocol.mcq import DebiasInfo, MCQAnswerResponse, MCQBatchResponse
from service.scoring import calibration as c
from service.scoring import calibration_multiclass as cm
from tests.support.calibration_math import ece_of_bins
from tests.support.calibration_records import record

CHOICE = {"type": "choice", "instructions": "Which?", "choices": [{"value": "a"}, {"value": "b"}]}
PREDICATE = {"type": "predicate", "instructions": "Is it?"}
SCORE = {
    "type": "score",
    "instructions": "How good?",
    "levels": [{"label": "bad"}, {"label": "ok"}, {"label": "good"}],
}


# --- scoring ---------------------------------------------------------------------------------


def test_multiclass_metrics_are_top_label_with_multiclass_nll_and_brier() -> None:
    probs = [[0.7, 0.2, 0.1], [0.4, 0.6], [0.5, 0.3, 0.2], [0.1, 0.9]]
    answers = [0, 0, 2, 1]
    m = cm.multiclass_metrics([cm.option_logits(p) for p in probs], answers, n_bins=2)
    # confidences 0.7, 0.6, 0.5, 0.9; right: yes, no, no, yes
    assert (m.n, m.base_rate) == (4, 0.5)
    assert m.mean_probability == pytest.approx(np.mean([0.7, 0.6, 0.5, 0.9]))
    assert m.nll == pytest.approx(-np.mean(np.log([0.7, 0.4, 0.2, 0.9])))
    brier = [0.09 + 0.04 + 0.01, 0.36 + 0.36, 0.25 + 0.09 + 0.64, 0.01 + 0.01]
    assert m.brier == pytest.approx(np.mean(brier))
    # equal-mass bins by confidence: {0.5 wrong, 0.6 wrong}, {0.7 right, 0.9 right}
    assert [(b.count, b.observed) for b in m.bins] == [(2, 0.0), (2, 1.0)]
    assert m.ece == pytest.approx((0.55 + 0.2) / 2)
    assert m.auroc == 1.0


def test_group_folds_keep_a_group_together_and_are_deterministic() -> None:
    groups = [0, 0, 1, 2, 2, 2, 3, 4]
    folds = cm.group_folds(groups, 2, seed=3)
    for g in set(groups):
        assert len({int(folds[i]) for i, x in enumerate(groups) if x == g}) == 1
    assert sorted(set(folds.tolist())) == [0, 1]
    assert cm.group_folds(groups, 2, seed=3).tolist() == folds.tolist()
    with pytest.raises(c.CalibrationInputError, match="6 folds need at least 6 examples"):
        cm.group_folds(groups, 6)


def overconfident(n: int, k: int, seed: int) -> tuple[list[list[float]], list[int]]:
    """Reads sharper than the truth: the answer drawn from softmax(z), reported as
    softmax(3 z)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k))
    truth = special.softmax(z, axis=1)
    answers = [int(rng.choice(k, p=row)) for row in truth]
    return special.softmax(3 * z, axis=1).tolist(), answers


def test_a_temperature_per_kind_undoes_overconfidence_and_keeps_every_argmax() -> None:
    choice, choice_y = overconfident(300, 4, seed=0)
    pred, pred_y = overconfident(300, 2, seed=1)
    rows = [cm.option_logits(p) for p in choice + pred]
    kinds = ["choice"] * 300 + ["predicate"] * 300
    groups = list(range(300)) * 2  # the i-th choice and predicate share an input
    fit = cm.calibrate_by_kind(rows, choice_y + pred_y, kinds, groups, folds=5, n_bins=10)
    for kind in ("choice", "predicate"):
        assert fit.by_kind[kind].temperature.t == pytest.approx(3.0, rel=0.25)
        assert len(fit.by_kind[kind].fold_temperatures) == 5
        m = fit.kind_metrics[kind]
        assert m["held_out"].ece < m["raw"].ece / 2
    assert fit.metrics["held_out"].nll < fit.metrics["raw"].nll
    assert fit.metrics["held_out"].ece == pytest.approx(
        ece_of_bins([vars_of(b) for b in fit.metrics["held_out"].bins])
    )
    # a temperature never moves a row's argmax
    for kind, fitted in fit.by_kind.items():
        mine = [r for r, k in zip(rows, kinds, strict=True) if k == kind]
        for raw, held in zip(mine, fitted.held_out, strict=True):
            assert int(np.argmax(raw)) == int(np.argmax(held))


def vars_of(b: c.ReliabilityBin) -> dict[str, Any]:
    return {"count": b.count, "mean_predicted": b.mean_predicted, "observed": b.observed}


def test_tempered_probabilities_are_the_softmax_of_log_p_over_t() -> None:
    p = [0.6, 0.3, 0.1, 0.0]
    got = cm.tempered(p, 2.0)
    root = np.sqrt(p)
    assert got == pytest.approx((root / root.sum()).tolist(), abs=1e-12)
    assert cm.tempered([0.25, 0.75], 1.0) == pytest.approx([0.25, 0.75], abs=1e-15)


# --- the fit request -------------------------------------------------------------------------


def decision_examples(n: int, questions: list[dict[str, Any]], answers: Any) -> list[Any]:
    return [
        {"input": f"input {i}", "questions": questions, "answers": answers(i)} for i in range(n)
    ]


def fit_request(examples: list[Any], **options: Any) -> ProbabilityCalibrationRequest:
    body = {"target": "decisions", "examples": examples, "folds": 2, **options}
    return ProbabilityCalibrationRequest.model_validate(body)


def test_a_decisions_fit_lists_its_labelled_questions() -> None:
    qs = [CHOICE, PREDICATE, SCORE]
    req = fit_request(decision_examples(16, qs, lambda i: ["b", i % 2 == 0, None]))
    rows = req.decision_rows()
    assert len(rows) == 32
    assert rows[:4] == [
        (0, 0, "choice", 1),
        (0, 1, "predicate", 0),
        (1, 0, "choice", 1),
        (1, 1, "predicate", 1),
    ]
    r = req.decision_examples()[0].request("direct", 256, "m")
    assert isinstance(r, DecisionRequest)
    assert (r.permutations, r.debias, r.calibration_id) == (1, "none", None)


@pytest.mark.parametrize(
    ("questions", "answers", "n", "options", "says"),
    [
        ([PREDICATE], lambda i: [i % 2 == 0], 16, {"method": "platt"}, "temperature only"),
        ([PREDICATE], lambda i: [True], 16, {}, "every labelled predicate is true"),
        ([PREDICATE], lambda i: [None], 16, {}, "no example labels any question"),
        ([PREDICATE], lambda i: [i % 2 == 0], 12, {}, "leaves 6 labelled predicate"),
        ([CHOICE], lambda i: ["c"], 16, {}, "not one of the question's choice values"),
        ([CHOICE], lambda i: [True], 16, {}, "typed"),
        ([PREDICATE], lambda i: [1], 16, {}, "labelled true or false"),
        ([SCORE], lambda i: [3], 16, {}, "a level index is 0 to 2"),
        ([SCORE], lambda i: ["great"], 16, {}, "not one of the question's level labels"),
        ([CHOICE], lambda i: ["a", "b"], 16, {}, "2 answers for 1 questions"),
        (
            [CHOICE, PREDICATE],
            lambda i: ["a", True if i < 3 else (False if i < 5 else None)],
            16,
            {},
            "5 labelled predicate questions",
        ),
    ],
)
def test_a_decisions_fit_that_cannot_be_made_is_refused_before_any_read(
    questions: list[Any], answers: Any, n: int, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        fit_request(decision_examples(n, questions, answers), **options)


def test_examples_of_another_target_are_refused() -> None:
    outcome = [{"question": "q", "response": "r", "label": i % 2} for i in range(16)]
    with pytest.raises(ValidationError, match="not a decisions example"):
        fit_request(outcome)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"debias": "pride", "calibration_id": "pcal_x"}, "needs calibration_id"),
        ({"calibration_id": "cal_x"}, "is an MCQ prior"),
    ],
)
def test_a_decision_names_a_prior_or_a_probability_calibration(
    options: dict[str, Any], says: str
) -> None:
    body = {"input": "x", "model": "m", "questions": [CHOICE], **options}
    with pytest.raises(ValidationError, match=says):
        DecisionRequest.model_validate(body)
    ok = DecisionRequest.model_validate(
        {"input": "x", "model": "m", "questions": [CHOICE], "calibration_id": "pcal_x"}
    )
    assert (ok.prior_id, ok.probability_calibration_id) == (None, "pcal_x")
    prior = DecisionRequest.model_validate(
        {
            "input": "x",
            "model": "m",
            "questions": [CHOICE],
            "debias": "pride",
            "calibration_id": "cal_x",
        }
    )
    assert (prior.prior_id, prior.probability_calibration_id) == ("cal_x", None)


# --- applying --------------------------------------------------------------------------------


def response(*answers: Any) -> DecisionResponse:
    return DecisionResponse(answers=list(answers), model="m", usage=DecisionUsage())


def choice(probs: list[float]) -> ChoiceAnswer:
    top = int(np.argmax(probs))
    return ChoiceAnswer(
        choice=f"v{top}",
        probabilities=[
            ChoiceProbability(value=f"v{i}", probability=p) for i, p in enumerate(probs)
        ],
        confidence=probs[top],
    )


def score(probs: list[float]) -> ScoreAnswer:
    return ScoreAnswer(
        score=sum(i * p for i, p in enumerate(probs)),
        probabilities=[
            ScoreProbability(label=f"l{i}", value=i, probability=p) for i, p in enumerate(probs)
        ],
        confidence=max(probs),
    )


def decision_record(**temperatures: float) -> Any:
    return record("temperature", target="decisions", parameters={**temperatures, "at_bound": False})


def test_a_calibrated_decision_maps_each_fitted_type_and_keeps_every_choice() -> None:
    cal = decision_record(choice=2.0, predicate=0.5)
    raw = response(
        choice([0.5, 0.3, 0.2]),
        PredicateAnswer(probability=0.8),
        score([0.2, 0.5, 0.3]),
        RefusalAnswer(),
    )
    out = calibrated.decisions(raw, cal)
    assert out.calibration is not None
    assert out.calibration.applied is True
    assert out.calibration.temperatures == {"choice": 2.0, "predicate": 0.5}
    assert (out.calibration.id, out.calibration.method) == (cal.id, "temperature")
    ch = out.answers[0]
    assert isinstance(ch, ChoiceAnswer)
    assert [p.probability for p in ch.probabilities] == pytest.approx(
        cm.tempered([0.5, 0.3, 0.2], 2.0), abs=1e-15
    )
    assert ch.choice == "v0"
    assert ch.confidence == ch.probabilities[0].probability
    assert ch.raw_probabilities == raw.answers[0].probabilities  # type: ignore[union-attr]
    pred = out.answers[1]
    assert isinstance(pred, PredicateAnswer)
    assert pred.probability == pytest.approx(0.8**2 / (0.8**2 + 0.2**2))
    assert pred.raw_probability == 0.8
    # score has no temperature here: its answer is the raw one, untouched
    assert out.answers[2] == raw.answers[2]
    assert out.answers[3] == raw.answers[3]


def test_a_calibrated_score_recomputes_its_expected_level() -> None:
    out = calibrated.decisions(response(score([0.2, 0.5, 0.3])), decision_record(score=3.0))
    a = out.answers[0]
    assert isinstance(a, ScoreAnswer)
    probs = [p.probability for p in a.probabilities]
    assert probs == pytest.approx(cm.tempered([0.2, 0.5, 0.3], 3.0), abs=1e-15)
    assert a.score == pytest.approx(sum(i * p for i, p in enumerate(probs)))
    assert (a.raw_score, a.confidence) == (pytest.approx(1.1), max(probs))


def test_a_calibration_without_the_answered_types_is_reported_not_applied() -> None:
    raw = response(score([0.2, 0.5, 0.3]))
    out = calibrated.decisions(raw, decision_record(choice=2.0))
    assert out.answers == raw.answers
    assert out.calibration is not None
    assert out.calibration.applied is False
    assert calibrated.decisions(raw, None) == raw


@pytest.mark.parametrize("t", [0.3, 1.0, 4.0])
def test_ties_and_order_survive_any_temperature(t: float) -> None:
    probs = [0.4, 0.4, 0.15, 0.05]
    out = calibrated.decisions(response(choice(probs)), decision_record(choice=t)).answers[0]
    assert isinstance(out, ChoiceAnswer)
    mapped = [p.probability for p in out.probabilities]
    assert mapped[0] == mapped[1]
    assert np.argsort(mapped, kind="stable").tolist() == np.argsort(probs, kind="stable").tolist()
    assert out.choice == "v0"


# --- target mcq ------------------------------------------------------------------------------


def mcq_request(n: int, **options: Any) -> ProbabilityCalibrationRequest:
    examples = [
        {"question": f"q{i}", "options": ["a", "b", "c"], "answer_index": i % 3} for i in range(n)
    ]
    body = {"target": "mcq", "examples": examples, **options}
    return ProbabilityCalibrationRequest.model_validate(body)


def test_an_mcq_fit_takes_labelled_questions() -> None:
    req = mcq_request(10)
    assert [ex.answer_index for ex in req.mcq_examples()] == [i % 3 for i in range(10)]


@pytest.mark.parametrize(
    ("n", "options", "says"),
    [
        (10, {"method": "platt"}, "temperature only"),
        (10, {"mode": "reasoning"}, "mode must be 'direct'"),
        (9, {}, "leave 7 to fit a fold on"),
        (8, {"folds": 2}, "leave 4 to fit a fold on"),
    ],
)
def test_an_mcq_fit_that_cannot_be_made_is_refused(
    n: int, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        mcq_request(n, **options)


def test_an_mcq_example_needs_its_answer_among_its_options() -> None:
    examples = [{"question": "q", "options": ["a", "b"], "answer_index": 2}] * 10
    with pytest.raises(ValidationError, match="answer_index 2 is outside the 2 options"):
        ProbabilityCalibrationRequest.model_validate({"target": "mcq", "examples": examples})


def mcq_answer(probs: list[float]) -> MCQAnswerResponse:
    top = int(np.argmax(probs))
    return MCQAnswerResponse(
        probs_raw=[0.25] * len(probs),
        probs=probs,
        answer_index=top,
        answer_letter="ABCD"[top],
        debias=DebiasInfo(method="pride"),
        model="m",
        usage=Usage(),
    )


def test_a_calibrated_mcq_answer_maps_probs_and_keeps_the_answer_and_the_raw_read() -> None:
    cal = record("temperature", target="mcq")  # T = 2
    out = calibrated.mcq(mcq_answer([0.1, 0.6, 0.2, 0.1]), cal)
    assert out.probs == pytest.approx(cm.tempered([0.1, 0.6, 0.2, 0.1], 2.0), abs=1e-15)
    assert out.uncalibrated_probs == [0.1, 0.6, 0.2, 0.1]
    assert out.probs_raw == [0.25] * 4  # before debiasing: untouched
    assert (out.answer_index, out.answer_letter) == (1, "B")
    assert out.calibration is not None
    assert out.calibration.parameters["temperature"] == 2.0
    batch = MCQBatchResponse(
        model="m", results=[mcq_answer([0.7, 0.3]), mcq_answer([0.5, 0.5])], usage=Usage()
    )
    mapped = calibrated.mcq_batch(batch, cal)
    assert [r.probs for r in mapped.results] == [
        pytest.approx(cm.tempered([0.7, 0.3], 2.0)),
        [0.5, 0.5],
    ]
    assert [r.answer_index for r in mapped.results] == [0, 0]
    assert calibrated.mcq(mcq_answer([0.5, 0.5]), None).calibration is None
