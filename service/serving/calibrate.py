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

from service.engine.adapters import served_id
from service.engine.base import TokenUsage
from service.errors import CalibrationUnfittable
from service.protocol import OutcomeRequest, Usage
from service.protocol.calibrate import (
    CalibrationFit,
    CalibrationMetrics,
    CompareExample,
    OutcomeExample,
    ProbabilityCalibrationRequest,
    ProbabilityCalibrationResponse,
    TypeFit,
)
from service.protocol.compare import CompareRequest
from service.protocol.decision_results import Answer, ChoiceAnswer, PredicateAnswer, RefusalAnswer
from service.scoring.calibration import (
    BinaryMetrics,
    CalibrationInputError,
    calibrate_binary,
    pair_logits,
)
from service.scoring.calibration_multiclass import calibrate_by_kind, option_logits
from service.scoring.finite import finite_or_none
from service.serving.compare import CompareServing
from service.serving.decisions import DecisionServing
from service.serving.mcq import MCQServing
from service.serving.outcome import OutcomeServing
from service.stores.probability_calibrations import new_probability_calibration_id


def _metrics(m: BinaryMetrics) -> CalibrationMetrics:
    return CalibrationMetrics.model_validate(finite_or_none(asdict(m)))


class CalibrationServing:
    """Serves POST /v1/calibrations (the fit; storing is the API's)."""

    def __init__(
        self,
        outcome: OutcomeServing,
        compare: CompareServing,
        decisions: DecisionServing,
        mcq: MCQServing,
        model_name: str,
    ) -> None:
        self._outcome = outcome
        self._compare = compare
        self._decisions = decisions
        self._mcq = mcq
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

    async def _decision_rows(
        self, req: ProbabilityCalibrationRequest
    ) -> tuple[list[list[float]], Usage]:
        """Each labelled question's label probabilities as /v1/decisions answers them (one
        order of the choices, no debiasing), in ``req.decision_rows()`` order."""
        examples = req.decision_examples()
        answers = await asyncio.gather(
            *(
                self._decisions.decide(
                    ex.request(req.mode, req.reasoning_tokens, served_id(self._model))
                )
                for ex in examples
            )
        )
        usage = sum((Usage.of(a.usage) for a in answers), Usage())
        rows = []
        for e, q, _, _ in req.decision_rows():
            got = answers[e].answers[q]
            if isinstance(got, RefusalAnswer):
                raise CalibrationUnfittable(
                    f"examples[{e}].questions[{q}] got no answer (its prompt does not fit the "
                    "model): shorten it or leave it out"
                )
            rows.append(label_probabilities(got))
        return rows, usage

    async def _fit_decisions(
        self, req: ProbabilityCalibrationRequest
    ) -> ProbabilityCalibrationResponse:
        probs, usage = await self._decision_rows(req)
        labelled = req.decision_rows()
        return self._multiclass(
            req,
            probs,
            [answer for _, _, _, answer in labelled],
            [kind for _, _, kind, _ in labelled],
            [example for example, _, _, _ in labelled],
            usage,
        )

    async def _fit_mcq(self, req: ProbabilityCalibrationRequest) -> ProbabilityCalibrationResponse:
        """Each question's option probabilities as /v1/mcq/answer reads them (no debiasing);
        one temperature."""
        examples = req.mcq_examples()
        counts = TokenUsage()
        probs = await self._mcq.letter_probs([(ex.question, ex.options) for ex in examples], counts)
        answers = [ex.answer_index for ex in examples]
        n = len(examples)
        return self._multiclass(req, probs, answers, ["mcq"] * n, list(range(n)), Usage.of(counts))

    def _multiclass(
        self,
        req: ProbabilityCalibrationRequest,
        probs: list[list[float]],
        answers: list[int],
        kinds: list[str],
        groups: list[int],
        usage: Usage,
    ) -> ProbabilityCalibrationResponse:
        """A temperature per kind fitted on multi-class reads, k-fold by group; decisions
        report each question type (``types``), mcq its one temperature."""
        try:
            report = calibrate_by_kind(
                [option_logits(p) for p in probs],
                answers,
                kinds,
                groups,
                folds=req.folds,
                n_bins=req.bins,
                seed=req.seed,
            )
        except CalibrationInputError as exc:
            raise CalibrationUnfittable(str(exc)) from exc
        types = {
            kind: TypeFit(
                questions=len(fit.fitted),
                temperature=fit.temperature.t,
                at_bound=fit.temperature.at_bound,
                fit_set=CalibrationFit(
                    raw=_metrics(report.kind_metrics[kind]["raw"]),
                    calibrated=_metrics(report.kind_metrics[kind]["fitted"]),
                ),
                held_out=CalibrationFit(
                    raw=_metrics(report.kind_metrics[kind]["raw"]),
                    calibrated=_metrics(report.kind_metrics[kind]["held_out"]),
                ),
            )
            for kind, fit in report.by_kind.items()
        }
        parameters: dict[str, float | bool]
        if req.target == "mcq":
            parameters = {"temperature": types["mcq"].temperature}
        else:
            parameters = {k: t.temperature for k, t in types.items()}
        parameters["at_bound"] = any(t.at_bound for t in types.values())
        raw = _metrics(report.metrics["raw"])
        return ProbabilityCalibrationResponse(
            id=new_probability_calibration_id(),
            name=req.name,
            target=req.target,
            method="temperature",
            parameters=parameters,
            model=served_id(self._model),
            mode=req.mode,
            reasoning_tokens=req.reasoning_tokens if req.mode == "reasoning" else None,
            examples=raw.n,
            positives=round(raw.base_rate * raw.n),
            folds=req.folds,
            bins=req.bins,
            seed=req.seed,
            fit_set=CalibrationFit(raw=raw, calibrated=_metrics(report.metrics["fitted"])),
            held_out=CalibrationFit(raw=raw, calibrated=_metrics(report.metrics["held_out"])),
            types=types if req.target == "decisions" else None,
            created_at=time.time(),
            usage=usage,
        )

    async def fit(self, req: ProbabilityCalibrationRequest) -> ProbabilityCalibrationResponse:
        if req.target == "decisions":
            return await self._fit_decisions(req)
        if req.target == "mcq":
            return await self._fit_mcq(req)
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
            model=served_id(self._model),
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


def label_probabilities(answer: Answer) -> list[float]:
    """A decision answer's probability per label as read (a predicate: true, false)."""
    if isinstance(answer, PredicateAnswer):
        return [answer.probability, 1.0 - answer.probability]
    if isinstance(answer, ChoiceAnswer):
        return [c.probability for c in answer.probabilities]
    assert not isinstance(answer, RefusalAnswer)  # the caller refuses those
    return [level.probability for level in answer.probabilities]
