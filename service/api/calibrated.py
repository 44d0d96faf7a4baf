"""Probability calibrations on the API side: the one that applies to a request, and the
calibrated answer built from the raw one (docs/methods.md J).

Applied after the job returns, so the worker and the judgment cache only ever see raw reads:
a new calibration never needs a new engine call.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from service.protocol import OutcomeResponse, RerankResponse, ScoreResponse
from service.protocol.calibrate import CalibrationInfo, ProbabilityCalibration
from service.protocol.compare import CompareResponse
from service.protocol.reward import RewardResponse
from service.scoring.calibration import calibrated_probability
from service.scoring.outcome import verdict


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
    resp: ScoreResponse | RerankResponse | CompareResponse, cal: ProbabilityCalibration
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
