"""Probability calibrations: read the judge on labelled examples, fit, report (docs/methods.md J).

The reads go through the serving path a later request takes (same prompts, mode and
rationale budget, and the judgment cache): outcome judgments always by the model (a rule
decision is 0 or 1 and is never calibrated); compare pairs as /v1/judge/compare reads them by
default, pairwise in both orders. The API process stores the fitted record.
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
    CompareExample,
    OutcomeExample,
    ProbabilityCalibrationRequest,
    ProbabilityCalibrationResponse,
)
from service.protocol.compare import CompareRequest
from service.scoring.calibration import (
    BinaryMetrics,
    CalibrationInputError,
    calibrate_binary,
    pair_logits,
)
from service.scoring.finite import finite_or_none
from service.serving.compare import CompareServing
from service.serving.outcome import OutcomeServing
from service.stores.probability_calibrations import new_probability_calibration_id


def _metrics(m: BinaryMetrics) -> CalibrationMetrics:
    return CalibrationMetrics.model_validate(finite_or_none(asdict(m)))


class CalibrationServing:
    """Serves POST /v1/calibrations (the fit; storing is the API's)."""

    def __init__(self, outcome: OutcomeServing, compare: CompareServing, model_name: str) -> None:
        self._outcome = outcome
        self._compare = compare
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

    def _pair(self, req: ProbabilityCalibrationRequest, ex: CompareExample) -> CompareRequest:
        return CompareRequest.model_validate(
            {
                "question": ex.question,
                "responses": ex.responses,
                "reference": ex.reference,
                "criteria": ex.criteria,
                "mode": "pairwise",
                "debias": "swap",
                "reasoning_tokens": req.reasoning_tokens if req.mode == "reasoning" else None,
                "return_reads": False,
            }
        )

    async def _outcome_logits(
        self, req: ProbabilityCalibrationRequest
    ) -> tuple[list[float], Usage]:
        # Concurrent calls: the engine batches them as it would concurrent requests.
        answers = await asyncio.gather(
            *(self._outcome.judge(self._request(req, ex)) for ex in req.outcome_examples())
        )
        usage = sum((a.usage for a in answers), Usage())
        logits = [a.logit for a in answers]
        if any(z is None for z in logits):
            raise CalibrationUnfittable("the model gave no logit for some examples")
        return [float(z) for z in logits if z is not None], usage

    async def _pair_logits(self, req: ProbabilityCalibrationRequest) -> tuple[list[float], Usage]:
        pairs = req.compare_examples()
        answers = await asyncio.gather(
            *(self._compare.compare(self._pair(req, ex)) for ex in pairs)
        )
        usage = sum((a.usage for a in answers), Usage())
        preferred = []
        for ex, a in zip(pairs, answers, strict=True):
            p = a.preferences[ex.preferred][1 - ex.preferred]
            assert p is not None  # off the diagonal
            preferred.append(p)
        return pair_logits(preferred), usage

    async def fit(self, req: ProbabilityCalibrationRequest) -> ProbabilityCalibrationResponse:
        if req.target == "compare":
            logits, usage = await self._pair_logits(req)
        else:
            logits, usage = await self._outcome_logits(req)
        labels = req.labels()
        try:
            report = calibrate_binary(
                logits,
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
