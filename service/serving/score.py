"""Scoring many responses to one question, fusion and Best-of-N reranking (docs/methods.md A.5)."""

from __future__ import annotations

import asyncio
import uuid

from service.engine.adapters import served_id
from service.protocol import (
    JudgeOptions,
    OutcomeRequest,
    OutcomeResponse,
    ProcessOptions,
    ProcessRequest,
    ProcessResponse,
    RerankDocument,
    RerankMeta,
    RerankRequest,
    RerankResponse,
    RerankResult,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
    ScoreResult,
    Usage,
)
from service.protocol.code import CodeTests
from service.protocol.compare import CompareRequest
from service.scoring import code as code_checks
from service.scoring.fusion import fuse, rank
from service.scoring.ties import DTYPE_TOLERANCE, tie_groups
from service.serving.compare import CompareServing
from service.serving.outcome import OutcomeServing
from service.serving.process import ProcessServing


def _final(outcome: float | None, process: float | None, alpha: float) -> float | None:
    """The fused score; None only for an undecided rule-only outcome (nothing else ran)."""
    if outcome is not None and process is not None:
        return fuse(outcome, process, alpha)
    return outcome if outcome is not None else process


def _breaks_ties(opts: ScoreOptions) -> bool:
    """verifier hybrid with tests, outcome scores: the model's P(correct) orders equal finals."""
    return bool(opts.tests) and opts.method == "outcome" and opts.resolved_verifier() == "hybrid"


def _ranking(finals: list[float | None]) -> list[int]:
    """Best first; an undecided (None) result after every scored one."""
    return rank([-1.0 if f is None else f for f in finals])


class ScoreServing:
    """Serves POST /v1/score and the rerank endpoints."""

    def __init__(
        self,
        outcome: OutcomeServing,
        process: ProcessServing,
        model: str,
        compare: CompareServing | None = None,
        tie_tolerance: float = DTYPE_TOLERANCE["bfloat16"],
    ) -> None:
        self._outcome = outcome
        self._process = process
        self._model = model
        self._compare = compare
        self._tie_tolerance = tie_tolerance

    def _ties(self, finals: list[float | None], ranking: list[int]) -> list[list[int]]:
        return tie_groups(finals, ranking, self._tie_tolerance)

    async def _one(
        self, opts: ScoreOptions, question: str, response: str
    ) -> tuple[OutcomeResponse | None, ProcessResponse | None, OutcomeResponse | None]:
        judge_opts = opts.model_dump(include=set(JudgeOptions.model_fields))
        process_opts = opts.model_dump(include=set(ProcessOptions.model_fields))
        # The reference goes to both parts; the verifier and the tests only to the outcome
        # (steps are always judged by the model).
        ref_opts = {"reference": opts.reference, "criteria": opts.criteria}
        code_opts = opts.model_dump(include=set(CodeTests.model_fields))
        out_task = proc_task = tie_task = None
        if opts.method in ("outcome", "fused"):
            mode = "direct" if opts.mode == "single_pass" else opts.mode
            base = {**judge_opts, **ref_opts, "mode": mode, "question": question}
            req = OutcomeRequest.model_validate(
                {**base, **code_opts, "verifier": opts.verifier, "response": response}
            )
            out_task = asyncio.ensure_future(self._outcome.judge(req))
            if _breaks_ties(opts):  # the model orders what the tests tie
                tie = OutcomeRequest.model_validate(
                    {**base, "verifier": "model", "response": response}
                )
                tie_task = asyncio.ensure_future(self._outcome.judge(tie))
        if opts.method in ("process", "fused"):
            preq = ProcessRequest.model_validate(
                {
                    **judge_opts,
                    **process_opts,
                    **ref_opts,
                    "question": question,
                    "response": response,
                }
            )
            proc_task = asyncio.ensure_future(self._process.judge(preq))
        try:
            outcome = await out_task if out_task else None
            process = await proc_task if proc_task else None
            tiebreak = await tie_task if tie_task else None
        finally:
            for t in (out_task, proc_task, tie_task):
                if t is not None and not t.done():
                    t.cancel()
        return outcome, process, tiebreak

    async def score(self, req: ScoreRequest) -> ScoreResponse:
        if req.method == "compare":
            return await self._by_comparison(req)
        if req.tests:  # before any engine work: the tiebreak reads start beside the tests
            self._outcome.admit_tests(req)
        pairs = await asyncio.gather(*(self._one(req, req.question, r) for r in req.responses))
        usage = Usage()
        results: list[ScoreResult] = []
        for i, (outcome, process, tie) in enumerate(pairs):
            for part in (outcome, process, tie):
                if part is not None:
                    usage += part.usage
            o = outcome.score if outcome else None
            p = process.aggregate if process else None
            final = _final(o, p, req.alpha)
            results.append(
                ScoreResult(
                    index=i,
                    outcome=o,
                    process=p,
                    final=final,
                    first_error_step=process.first_error_step if process else None,
                    n_steps=len(process.steps) if process else None,
                    decided_by=outcome.decided_by if outcome else None,
                    rule=outcome.rule if outcome else None,
                    code=outcome.code if outcome else None,
                    tiebreak=tie.score if tie else None,
                )
            )
        finals = [r.final for r in results]
        if _breaks_ties(req):
            tiebreaks = [r.tiebreak or 0.0 for r in results]
            ranking = code_checks.rank_with_tiebreak(finals, tiebreaks)
            ties = code_checks.split_ties(self._ties(list(tiebreaks), ranking), finals)
        else:
            ranking = _ranking(finals)
            ties = self._ties(finals, ranking)
        return ScoreResponse(
            method=req.method,
            alpha=req.alpha,
            model=served_id(self._model),
            results=results,
            ranking=ranking,
            ties=ties,
            tie_tolerance=self._tie_tolerance,
            usage=usage,
        )

    async def _by_comparison(self, req: ScoreRequest) -> ScoreResponse:
        """method='compare': one comparison of all the responses; final = its score."""
        if self._compare is None:
            raise RuntimeError("method='compare' needs the compare serving")
        reasoning = req.mode == "reasoning"
        compared = await self._compare.compare(
            CompareRequest.model_validate(
                {
                    **req.compare_spec().model_dump(),
                    "question": req.question,
                    "responses": req.responses,
                    "reference": req.reference,
                    "criteria": req.criteria,
                    "reasoning_tokens": req.reasoning_tokens if reasoning else None,
                    "samples": req.compare_samples(),
                    "temperature": req.temperature,
                    "seed": req.seed,
                    "return_reads": False,
                }
            )
        )
        results = [
            ScoreResult(index=r.index, compare=r.reward, final=r.score) for r in compared.results
        ]
        return ScoreResponse(
            method=req.method,
            alpha=req.alpha,
            model=served_id(self._model),
            results=results,
            ranking=compared.ranking,
            ties=self._ties([r.final for r in results], compared.ranking),
            tie_tolerance=self._tie_tolerance,
            comparison=compared.summary(),
            usage=compared.usage,
        )

    async def rerank(self, req: RerankRequest) -> RerankResponse:
        texts = req.texts()
        fields = set(ScoreOptions.model_fields)
        score_req = ScoreRequest.model_validate(
            {**req.model_dump(include=fields), "question": req.query, "responses": texts}
        )
        scored = await self.score(score_req)
        order = scored.ranking
        if req.top_n is not None and req.top_n > 0:
            order = order[: req.top_n]
        results = [
            RerankResult(
                index=i,
                # Cohere's shape needs a number: an undecided rule-only result is 0 (and last)
                relevance_score=scored.results[i].final or 0.0,
                document=RerankDocument(text=texts[i]) if req.return_documents else None,
                decided_by=scored.results[i].decided_by,
                rule=scored.results[i].rule,
                code=scored.results[i].code,
                tiebreak=scored.results[i].tiebreak,
            )
            for i in order
        ]
        return RerankResponse(
            id=str(uuid.uuid4()),
            model=served_id(self._model),
            results=results,
            # Over every document: a tie across the top_n cut is still a tie.
            ties=scored.ties,
            tie_tolerance=scored.tie_tolerance,
            meta=RerankMeta(billed_units={"search_units": 1}),
            usage=scored.usage,
        )
