"""Probability calibrations: read the judge on labelled examples, fit, report (docs/methods.md J).

The reads go through the outcome serving path a later request takes (same prompts, mode and
rationale budget, and the judgment cache), always by the model: a rule decision is 0 or 1 and
is never calibrated. The API process stores the fitted record (``api/calibrated.py``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict

from service.errors import CalibrationUnfittable
from service.protocol import OutcomeRequest, Usage
from service.protocol.calibrate import (
    CalibrationFit,
    CalibrationMetrics,
    OutcomeExample,
    ProbabilityCalibrationRequest,
    ProbabilityCalibrationResponse,
)
from service.scoring.calibration import BinaryMetrics, CalibrationInputError, calibrate_binary
from service.scoring.finite import finite_or_none
from service.serving.outcome import OutcomeServing
from service.stores.probability_calibrations import new_probability_calibration_id


def _metrics(m: BinaryMetrics) -> CalibrationMetrics:
    return CalibrationMetrics.model_validate(finite_or_none(asdict(m)))


class CalibrationServing:
    """Serves POST /v1/calibrations (the fit; storing is the API's)."""

    def __init__(self, outcome: OutcomeServing, model_name: str) -> None:
        self._outcome = outcome
        self._model = model_name

    def _request(self, req: ProbabilityCalibrationRequest, ex: OutcomeExample) -> OutcomeRequest:
        return OutcomeRequest.model_validate(
            {
                "question": ex.question,
                "response": ex.response,
                "reference": ex.reference,
                "criteria": ex.criteria,
                "verifier": "model",
                "mode": req.mode,
                "reasoning_tokens": req.reasoning_tokens,
                "cache": req.cache,
            }
        )

    async def fit(self, req: ProbabilityCalibrationRequest) -> ProbabilityCalibrationResponse:
        # Concurrent calls: the engine batches them as it would concurrent requests.
        answers = await asyncio.gather(
            *(self._outcome.judge(self._request(req, ex)) for ex in req.examples)
        )
        logits = [a.logit for a in answers]
        usage = sum((a.usage for a in answers), Usage())
        if any(z is None for z in logits):
            raise CalibrationUnfittable("the model gave no logit for some examples")
        labels = [ex.label for ex in req.examples]
        try:
            report = calibrate_binary(
                [float(z) for z in logits if z is not None],
                labels,
                folds=req.folds,
                n_bins=req.bins,
                seed=req.seed,
            )
        except CalibrationInputError as exc:
            raise CalibrationUnfittable(str(exc)) from exc
        m = req.method
        return ProbabilityCalibrationResponse(
            id=new_probability_calibration_id(),
            name=req.name,
            target=req.target,
            method=m,
            parameters=report.parameters[m],
            model=self._model,
            mode=req.mode,
            reasoning_tokens=req.reasoning_tokens if req.mode == "reasoning" else None,
            examples=report.n,
            positives=sum(labels),
            folds=req.folds,
            bins=req.bins,
            seed=req.seed,
            fit_set=CalibrationFit(
                raw=_metrics(report.fit_set["raw"]), calibrated=_metrics(report.fit_set[m])
            ),
            held_out=CalibrationFit(
                raw=_metrics(report.held_out["raw"].metrics),
                calibrated=_metrics(report.held_out[m].metrics),
            ),
            created_at=time.time(),
            usage=usage,
        )
