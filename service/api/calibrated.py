"""Probability calibrations on the API side: the one that applies to a request, and the
calibrated answer built from the raw one (docs/methods.md J).

Applied after the job returns, so the worker and the judgment cache only ever see raw reads:
a new calibration never needs a new engine call.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
from scipy import special

from service.protocol import OutcomeResponse, RerankResponse, ScoreResponse
from service.protocol.calibrate import ProbabilityCalibration
from service.protocol.calibrated import CalibrationInfo, DecisionCalibrationInfo
from service.protocol.compare import CompareResponse
from service.protocol.decision_results import (
    Answer,
    ChoiceAnswer,
    ChoiceProbability,
    DecisionResponse,
    PredicateAnswer,
    ScoreAnswer,
    ScoreProbability,
)
from service.protocol.mcq import MCQAnswer, MCQAnswerResponse, MCQBatchResponse
from service.protocol.reward import RewardResponse
from service.scoring.calibration import calibrated_probability
from service.scoring.calibration_multiclass import tempered
from service.scoring.decisions import expected_level
from service.scoring.outcome import verdict

Answered = TypeVar("Answered", bound=MCQAnswer)


def info(cal: ProbabilityCalibration) -> CalibrationInfo:
    return CalibrationInfo(id=cal.id, method=cal.method, parameters=cal.parameters)


def outcome(resp: OutcomeResponse, cal: ProbabilityCalibration | None) -> OutcomeResponse:
    """``resp`` with its score mapped through ``cal`` and the raw score beside it. A rule's
    decision (1 or 0, no logit) is not a read of the model, so it is never mapped; nor is a
    read the budget lowered to another mode than the calibration's (``budget.note`` says so)."""
    if cal is None or resp.decided_by != "model" or resp.logit is None or resp.mode != cal.mode:
        return resp
    score = calibrated_probability(cal.method, cal.parameters, resp.logit)
    return resp.model_copy(
        update={
            "score": score,
            "verdict": verdict(score),
            "raw_score": resp.score,
            "calibration": info(cal),
        }
    )


def _mapped(cal: ProbabilityCalibration, raw: float) -> float:
    """A raw probability through ``cal``: its logit recovered exactly enough (a float64
    probability keeps about 16 digits; at 0 or 1 the logit is infinite and maps to 0 or 1)."""
    with np.errstate(divide="ignore"):
        z = float(special.logit(raw))
    return calibrated_probability(cal.method, cal.parameters, z)


def outcome_mode(mode: str) -> str:
    """The judging mode of a score or rerank request's outcome reads: single_pass reads them
    direct (serving/score.py)."""
    return "direct" if mode == "single_pass" else mode


def _lowered(
    resp: ScoreResponse | RerankResponse | CompareResponse | DecisionResponse,
    cal: ProbabilityCalibration,
) -> bool:
    """The budget lowered the reads to direct, and ``cal`` is for another mode (the answer's
    ``budget.note`` says so): the reads are not what the calibration was fitted on."""
    return resp.budget is not None and resp.budget.degraded and cal.mode != "direct"


def score(resp: ScoreResponse, cal: ProbabilityCalibration | None) -> ScoreResponse:
    """Each model-decided outcome (method 'outcome') mapped, raw beside it. The ranking and
    ties stay the raw ones: the map is monotone, and ties are the engine's precision."""
    if cal is None or resp.method != "outcome" or _lowered(resp, cal):
        return resp
    results = []
    for r in resp.results:
        if r.decided_by == "model" and r.outcome is not None:
            p = _mapped(cal, r.outcome)
            r = r.model_copy(update={"outcome": p, "final": p, "raw_outcome": r.outcome})
        results.append(r)
    return resp.model_copy(update={"results": results, "calibration": info(cal)})


def rerank(resp: RerankResponse, cal: ProbabilityCalibration | None) -> RerankResponse:
    """``score``'s mapping in the rerank shape (the caller passes ``cal`` for method 'outcome'
    only): each model-decided relevance score mapped, the raw one beside it, order kept."""
    if cal is None or _lowered(resp, cal):
        return resp
    results = [
        r.model_copy(
            update={
                "relevance_score": _mapped(cal, r.relevance_score),
                "raw_score": r.relevance_score,
            }
        )
        if r.decided_by == "model"
        else r
        for r in resp.results
    ]
    return resp.model_copy(update={"results": results, "calibration": info(cal)})


def reward(resp: RewardResponse, cal: ProbabilityCalibration | None) -> RewardResponse:
    """Each model-decided reward mapped through ``cal`` from its exact logit; rule decisions
    and empty responses stay 1 or 0. ``extra_logs.model_score`` keeps the raw scores."""
    logs = resp.extra_logs
    if cal is None or "decided_by_model" not in logs:
        return resp
    scores = [
        calibrated_probability(cal.method, cal.parameters, z) if by_model else s
        for s, z, by_model in zip(
            resp.scores, logs["verifier_logit"], logs["decided_by_model"], strict=True
        )
    ]
    return resp.model_copy(update={"rewards": scores, "scores": scores, "calibration": info(cal)})


def compare(resp: CompareResponse, cal: ProbabilityCalibration | None) -> CompareResponse:
    """Each pairwise preference mapped through ``cal`` (a temperature, so ``[i][j] + [j][i]``
    stays 1), the raw matrix beside it. With two responses each score is that pair's
    preference, so it is mapped too; with more, a score aggregates several pairs and stays
    raw. Rewards and ranking stay raw: the map is monotone in each pair. A read the budget
    lowered to another mode than the calibration's is left raw (``budget.note`` says so)."""
    if cal is None or _lowered(resp, cal):
        return resp
    matrix = [[None if p is None else _mapped(cal, p) for p in row] for row in resp.preferences]
    update: dict[str, object] = {
        "preferences": matrix,
        "raw_preferences": resp.preferences,
        "calibration": info(cal),
    }
    if len(resp.results) == 2:
        update["results"] = [
            r.model_copy(update={"score": matrix[r.index][1 - r.index], "raw_score": r.score})
            for r in resp.results
        ]
    return resp.model_copy(update=update)


def _tempered_answer(a: Answer, t: float) -> Answer:
    """One decision answer through temperature ``t``: its probabilities mapped, the raw ones
    beside them; the choice (argmax) is kept, a tie included."""
    if isinstance(a, PredicateAnswer):
        p = tempered([a.probability, 1.0 - a.probability], t)[0]
        return a.model_copy(update={"probability": p, "raw_probability": a.probability})
    if isinstance(a, ChoiceAnswer):
        probs = tempered([c.probability for c in a.probabilities], t)
        mapped = [
            ChoiceProbability(value=c.value, probability=p)
            for c, p in zip(a.probabilities, probs, strict=True)
        ]
        chosen = next(i for i, c in enumerate(a.probabilities) if c.value == a.choice)
        return a.model_copy(
            update={
                "probabilities": mapped,
                "confidence": probs[chosen],
                "raw_probabilities": a.probabilities,
            }
        )
    if isinstance(a, ScoreAnswer):
        probs = tempered([level.probability for level in a.probabilities], t)
        levels = [
            ScoreProbability(label=level.label, value=level.value, probability=p)
            for level, p in zip(a.probabilities, probs, strict=True)
        ]
        return a.model_copy(
            update={
                "probabilities": levels,
                "score": expected_level(probs),
                "confidence": max(probs),
                "raw_score": a.score,
                "raw_probabilities": a.probabilities,
            }
        )
    return a  # a refusal has no probabilities


def decisions(resp: DecisionResponse, cal: ProbabilityCalibration | None) -> DecisionResponse:
    """Each answer of a question type ``cal`` has a temperature for, mapped by it (a monotone
    map per question, so every choice and ranking stays the raw one); ``calibration.applied``
    says whether any answer was. A read the budget lowered to another mode than the
    calibration's is left raw (``budget.note`` says so)."""
    if cal is None or _lowered(resp, cal):
        return resp
    temperatures = {k: float(v) for k, v in cal.parameters.items() if not isinstance(v, bool)}
    answers = [
        _tempered_answer(a, temperatures[a.type]) if a.type in temperatures else a
        for a in resp.answers
    ]
    applied = any(a.type in temperatures for a in resp.answers)
    block = DecisionCalibrationInfo(
        id=cal.id,
        method=cal.method,
        parameters=cal.parameters,
        applied=applied,
        temperatures=temperatures,
    )
    return resp.model_copy(update={"answers": answers, "calibration": block})


def _tempered_mcq(a: Answered, t: float) -> Answered:
    """One MCQ answer's ``probs`` through temperature ``t``, the unmapped ones beside; the
    answer (argmax, a tie included) is kept."""
    return a.model_copy(update={"probs": tempered(a.probs, t), "uncalibrated_probs": a.probs})


def mcq(resp: MCQAnswerResponse, cal: ProbabilityCalibration | None) -> MCQAnswerResponse:
    """``probs`` (after debiasing) mapped through ``cal``'s temperature; ``probs_raw`` (before
    debiasing) and the answer stay the read's."""
    if cal is None:
        return resp
    mapped = _tempered_mcq(resp, float(cal.parameters["temperature"]))
    return mapped.model_copy(update={"calibration": info(cal)})


def mcq_batch(resp: MCQBatchResponse, cal: ProbabilityCalibration | None) -> MCQBatchResponse:
    """`mcq`'s map on every result."""
    if cal is None:
        return resp
    t = float(cal.parameters["temperature"])
    results = [_tempered_mcq(r, t) for r in resp.results]
    return resp.model_copy(update={"results": results, "calibration": info(cal)})
