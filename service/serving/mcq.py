"""Multiple-choice answers and calibrations: request -> prompts -> letter logprobs -> debiasing.

Every item's letter probabilities are read in one engine batch (``option_logprobs``: the K
letters at the answer slot, exact, logsumexp over spellings). Debiasing is pure
(:mod:`service.scoring.debias`); fitted parameters come from a stored calibration of the
tenant whose job runs (:data:`service.serving.context.current_tenant`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from service.engine.adapters import served_id
from service.engine.base import Engine, OptionCall, SpanCall, TokenUsage
from service.protocol import Usage
from service.protocol.mcq import (
    Calibration,
    CalibrationCost,
    CalibrationRequest,
    CalibrationResponse,
    DebiasInfo,
    MCQAnswer,
    MCQAnswerRequest,
    MCQAnswerResponse,
    MCQBatchRequest,
    MCQBatchResponse,
    MCQItem,
    MCQOptions,
    PhiKind,
)
from service.scoring import debias, popprior, prompts
from service.serving.context import current_tenant, tenant_calibration
from service.stores.calibrations import CalibrationStore, new_calibration_id


class MCQServing:
    """Serves /v1/mcq/answer, /v1/mcq/answer/batch and fits /v1/mcq/calibrations."""

    def __init__(self, engine: Engine, model_name: str, calibrations: CalibrationStore) -> None:
        self._engine = engine
        self._model = model_name
        self._calibrations = calibrations
        self._letters: dict[int, list[list[int]]] = {}

    # -- answers ----------------------------------------------------------------------------

    async def answer(self, req: MCQAnswerRequest) -> MCQAnswerResponse:
        usage = TokenUsage()
        cal = await self.calibration_for(req, [req.k])
        [result] = await self._answer_items([req], req, cal, usage)
        return MCQAnswerResponse(
            **result.model_dump(), model=served_id(self._model), usage=Usage.of(usage)
        )

    async def answer_batch(self, req: MCQBatchRequest) -> MCQBatchResponse:
        usage = TokenUsage()
        cal = await self.calibration_for(req, [it.k for it in req.items])
        results = await self._answer_items(req.items, req, cal, usage)
        return MCQBatchResponse(
            model=served_id(self._model), results=results, usage=Usage.of(usage)
        )

    async def calibration_for(self, opts: MCQOptions, ks: Sequence[int]) -> Calibration | None:
        """The request's calibration, checked against its method, K and this model (422)."""
        return await tenant_calibration(
            self._calibrations, opts.prior_id, opts.debias, ks, served_id(self._model)
        )

    async def _answer_items(
        self,
        items: Sequence[MCQItem],
        opts: MCQOptions,
        cal: Calibration | None,
        usage: TokenUsage,
    ) -> list[MCQAnswer]:
        raw, pops = await asyncio.gather(
            self.letter_probs(items, usage),
            self._popularity(items, usage)
            if opts.debias == "popdebias"
            else _given_popularity(items),
        )
        p_cf: dict[int, list[float]] = {}
        if opts.debias == "contextual" and cal is None:
            for k in sorted({it.k for it in items}):
                p_cf[k] = await self.content_free(k, usage)
        results = []
        for item, probs, pop in zip(items, raw, pops, strict=True):
            out, params = _debiased(opts, cal, probs, pop, p_cf.get(item.k))
            best = debias.argmax(out)
            results.append(
                MCQAnswer(
                    probs_raw=probs,
                    probs=out,
                    answer_index=best,
                    answer_letter=prompts.LETTERS[best],
                    popularity=pop,
                    debias=DebiasInfo(
                        method=opts.debias,
                        calibration_id=cal.id if cal else None,
                        params=params,
                    ),
                )
            )
        return results

    # -- engine reads -----------------------------------------------------------------------

    def _letter_ids(self, k: int) -> list[list[int]]:
        if k not in self._letters:
            self._letters[k] = prompts.letter_variant_ids(self._engine.tokenizer, k)
        return self._letters[k]

    async def letter_probs(
        self, items: Sequence[tuple[str, Sequence[str]] | MCQItem], usage: TokenUsage
    ) -> list[list[float]]:
        """Softmax over the K letters of each (question, options), all in one engine batch."""
        calls = []
        for item in items:
            question, options = (item.question, item.options) if isinstance(item, MCQItem) else item
            rendered = prompts.mcq_prompt(self._engine.tokenizer, question, options)
            calls.append(OptionCall(rendered.prompt_ids, self._letter_ids(len(options))))
        results = await self._engine.option_logprobs(calls)
        for r in results:
            usage.add(r.usage)
        return [debias.softmax(r.logprobs) for r in results]

    async def _popularity(
        self, items: Sequence[MCQItem], usage: TokenUsage
    ) -> list[list[float] | None]:
        """Given values as they are; 'model': the question-free proxy, min-max per item."""
        wanted = [it.options for it in items if it.popularity == "model"]
        proxies = iter(await self.model_popularity(wanted, usage))
        return [next(proxies) if it.popularity == "model" else it.popularity for it in items]

    async def model_popularity(
        self, groups: Sequence[Sequence[str]], usage: TokenUsage
    ) -> list[list[float]]:
        """Per group of texts: the question-free mean logprob of each, min-max over the group."""
        calls = []
        for group in groups:
            for text in group:
                ids, start = prompts.popularity_ids(self._engine.tokenizer, text)
                calls.append(SpanCall(ids, start))
        spans = await self._engine.span_logprobs(calls) if calls else []
        for s in spans:
            usage.add(s.usage)
        out, cursor = [], 0
        for group in groups:
            out.append(
                debias.min_max([s.mean_logprob for s in spans[cursor : cursor + len(group)]])
            )
            cursor += len(group)
        return out

    async def content_free(self, k: int, usage: TokenUsage) -> list[float]:
        """p_cf: mean letter probabilities on the content-free inputs (docs/methods.md B.7)."""
        inputs = [(text, [text] * k) for text in prompts.CONTENT_FREE]
        return debias.mean_probs(await self.letter_probs(inputs, usage))

    # -- calibrations -----------------------------------------------------------------------

    async def calibrate(self, req: CalibrationRequest) -> CalibrationResponse:
        usage = TokenUsage()
        params = await self._fit(req, usage)
        cal = Calibration(
            id=new_calibration_id(),
            name=req.name,
            method=req.method,
            model=served_id(self._model),
            k=req.fitted_k,
            params=params,
            items=len(req.items),
            cost=CalibrationCost(forward_passes=usage.engine_calls, tokens=usage.total_tokens),
            created_at=time.time(),
        )
        await self._calibrations.put(current_tenant.get(), cal)
        return CalibrationResponse(**cal.model_dump(), usage=Usage.of(usage))

    async def _fit(self, req: CalibrationRequest, usage: TokenUsage) -> dict[str, Any]:
        if req.method == "contextual":
            k = req.fitted_k
            assert k is not None  # the request model guarantees items or k
            return {"p_cf": await self.content_free(k, usage)}
        if req.method == "pride":
            return {"prior": await self.pride_prior(req.items, usage)}
        pops = [p for p in await self._popularity(req.items, usage) if p is not None]
        if req.method == "popdebias":
            fit = await self.fit_lambda(
                req.items, pops, req.lambda_fit, req.phi, usage, req.answers
            )
            return {**fit.params(), "phi": req.phi}
        raw = await self.prior_reads(req.items, req.lambda_fit, usage)
        edges = list(req.bin_edges)
        return {
            "log_pi": debias.fit_bins(raw, pops, edges),
            "bin_edges": edges,
            "lambda_fit": req.lambda_fit,
        }

    async def prior_reads(
        self, items: Sequence[MCQItem], fit: popprior.LambdaFit, usage: TokenUsage
    ) -> list[list[float]]:
        """The letter reads a popularity prior is fitted on (docs/methods.md B.5).

        question_free hides each question, so no read can know the answer; the others read
        the items as asked.
        """
        if fit == "question_free":
            return await self.letter_probs(
                [(popprior.HIDDEN_QUESTION, it.options) for it in items], usage
            )
        return await self.letter_probs(items, usage)

    async def fit_lambda(
        self,
        items: Sequence[MCQItem],
        pops: Sequence[Sequence[float]],
        fit: popprior.LambdaFit,
        phi: PhiKind,
        usage: TokenUsage,
        answers: Sequence[int] | None = None,
    ) -> popprior.FittedLambda:
        """PopDebias' lambda on calibration items, by the chosen estimator, never below 0."""
        if not items:
            return popprior.clip(0.0, fit)
        probs = await self.prior_reads(items, fit, usage)
        if fit == "grid":
            if answers is None:
                raise ValueError("lambda_fit='grid' needs the calibration items' answers")
            return popprior.fit_grid(probs, pops, answers, phi)
        return popprior.fit_regression(probs, pops, phi, fit)

    async def pride_prior(self, items: Sequence[MCQItem], usage: TokenUsage) -> list[float]:
        """Global letter prior from the K cyclic permutations of every calibration item."""
        runs = [
            (item.question, debias.cyclic(item.options, shift))
            for item in items
            for shift in range(item.k)
        ]
        probs = await self.letter_probs(runs, usage)
        priors = []
        cursor = 0
        for item in items:
            priors.append(debias.pride_item_prior(probs[cursor : cursor + item.k]))
            cursor += item.k
        return debias.pride_global_prior(priors)


def _debiased(
    opts: MCQOptions,
    cal: Calibration | None,
    probs: list[float],
    pop: list[float] | None,
    p_cf: list[float] | None,
) -> tuple[list[float], dict[str, Any]]:
    """The debiased probabilities and the parameters applied."""
    params = cal.params if cal is not None else {}
    if opts.debias == "popdebias":
        assert pop is not None  # the request model requires popularity for popdebias
        if opts.popdebias_lambda is not None or "lambda" in params:
            applied = _lambda_params(opts, params)
            return debias.loglinear(probs, pop, applied["lambda"], applied["phi"]), applied
        edges = params["bin_edges"]
        return debias.binned(probs, pop, params["log_pi"], edges), {
            "log_pi": params["log_pi"],
            "bin_edges": edges,
        }
    if opts.debias == "pride":
        return debias.pride(probs, params["prior"]), {"prior": params["prior"]}
    if opts.debias == "contextual":
        cf = params.get("p_cf", p_cf)
        assert cf is not None
        return debias.contextual(probs, cf), {"p_cf": cf}
    return list(probs), {}


def _lambda_params(opts: MCQOptions, params: dict[str, Any]) -> dict[str, Any]:
    """The lambda and phi to apply, with the calibration's fit report when it gave them."""
    if opts.popdebias_lambda is not None:
        return {"lambda": opts.popdebias_lambda, "phi": params.get("phi", opts.phi)}
    fitted = popprior.clip(float(params["lambda"]), params.get("lambda_fit", "items"))
    # Older calibrations stored the regression slope unclipped: a negative one is applied as 0.
    raw = float(params.get("lambda_raw", fitted.raw))
    report = popprior.FittedLambda(fitted.value, raw, raw < 0, fitted.estimator).params()
    return {**report, "phi": params.get("phi", opts.phi)}


async def _given_popularity(items: Sequence[MCQItem]) -> list[list[float] | None]:
    """Popularity as the client gave it (no 'model' proxy is computed without popdebias)."""
    return [it.popularity if isinstance(it.popularity, list) else None for it in items]
