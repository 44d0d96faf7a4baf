"""PopMCQ stress tests (docs/methods.md B.1-B.3): pools -> S1-S6 items -> answers -> debiasing ->
metrics.

One request runs the whole study so the calibration split is chosen once: a seeded share of the
kept questions fits PopDebias' lambda (question-free reads by default, docs/methods.md B.5) and
PriDe's prior and is excluded from the scored items; contextual calibration needs no items.
Every method is scored on the same built items, from one engine batch of letter reads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from service.engine.adapters import served_id
from service.engine.base import Engine, GenerateCall, TokenUsage
from service.protocol import Usage
from service.protocol.audit import (
    OpenRecall,
    OpenRecallItem,
    PopMCQBuiltItem,
    PopMCQCell,
    PopMCQRequest,
    PopMCQResponse,
)
from service.protocol.mcq import MCQItem
from service.scoring import debias, open_recall, popmcq, popprior, prompts
from service.scoring.finite import finite_or_none
from service.scoring.popmcq_build import (
    PAPER_MIN_CANDIDATES,
    PAPER_REQUIRED,
    BuiltItem,
    Candidate,
    PoolItem,
    build_all,
)
from service.scoring.tokenizer import encode, special_tokens
from service.serving.mcq import MCQServing


class PopMCQServing:
    """Serves POST /v1/mcq/popmcq."""

    def __init__(self, engine: Engine, model_name: str, mcq: MCQServing) -> None:
        self._engine = engine
        self._model = model_name
        self._mcq = mcq

    async def _pool(self, req: PopMCQRequest, usage: TokenUsage) -> list[PoolItem]:
        if req.popularity == "model":
            texts = [[it.answer.text, *(c.text for c in it.candidates)] for it in req.items]
            pops = await self._mcq.model_popularity(texts, usage)
        else:
            pops = [
                [float(it.answer.popularity or 0.0)]
                + [float(c.popularity or 0.0) for c in it.candidates]
                for it in req.items
            ]
        return [
            PoolItem(
                id=it.id or str(i),
                question=it.question,
                gold=Candidate(it.answer.text, p[0]),
                candidates=tuple(
                    Candidate(c.text, v) for c, v in zip(it.candidates, p[1:], strict=True)
                ),
            )
            for i, (it, p) in enumerate(zip(req.items, pops, strict=True))
        ]

    async def _open_recall(
        self, req: PopMCQRequest, pool: Sequence[PoolItem], usage: TokenUsage
    ) -> list[OpenRecallItem]:
        """Every question without options, answered greedily in one engine batch, then
        matched against its answer, aliases and wrong candidates (docs/methods.md B.8)."""
        tok = self._engine.tokenizer
        special = special_tokens(tok)
        calls = [
            GenerateCall(
                encode(
                    tok,
                    prompts.render_chat(
                        tok,
                        open_recall.SYSTEM,
                        open_recall.user(prompts.defuse(p.question, (), special)),
                    )
                    + open_recall.PREFIX,
                ),
                max_tokens=req.open_recall_tokens,
                stop=("\n",),
            )
            for p in pool
        ]
        generated = await self._engine.generate(calls)
        out = []
        for p, it, g in zip(pool, req.items, generated, strict=True):
            usage.add(g.usage)
            r = open_recall.match(
                g.text, [p.gold.text, *it.aliases], [c.text for c in p.candidates]
            )
            out.append(
                OpenRecallItem(
                    item_id=p.id,
                    answer=r.answer,
                    read=r.read,
                    matched=r.matched,
                    distractor=r.distractor,
                    known=r.known,
                )
            )
        return out

    async def run(self, req: PopMCQRequest) -> PopMCQResponse:
        usage = TokenUsage()
        pool = await self._pool(req, usage)
        recalled = await self._open_recall(req, pool, usage) if req.open_recall else None
        filt: dict[str, Any] = (
            {"required": PAPER_REQUIRED, "min_candidates": PAPER_MIN_CANDIDATES}
            if req.paper_filter
            else {"required": (), "min_candidates": 0}
        )
        report = build_all(pool, req.strategies, req.seed, **filt)
        kept = sorted({b.item_id for b in report.built})
        random.Random(req.seed).shuffle(kept)
        n_cal = max(1, round(req.calibration_ratio * len(kept))) if len(kept) > 1 else 0
        calib_ids = set(kept[:n_cal])
        calib = [b for b in report.built if b.item_id in calib_ids]
        scored = [b for b in report.built if b.item_id not in calib_ids]
        raw = await self._mcq.letter_probs([(b.question, b.options) for b in scored], usage)
        fitted = await self._fit(req, calib, usage)
        known = {r.item_id for r in recalled or () if r.known}
        in_known = [b.item_id in known for b in scored]
        table: dict[str, dict[str, PopMCQCell]] = {}
        table_known: dict[str, dict[str, PopMCQCell]] = {}
        chosen: dict[str, list[int]] = {}
        for method in req.methods:
            probs = [_apply(method, fitted, p, b) for p, b in zip(raw, scored, strict=True)]
            chosen[method] = [debias.argmax(p) for p in probs]
            table[method] = _cells(req.strategies, scored, probs)
            if recalled is not None:
                table_known[method] = _cells(
                    req.strategies,
                    [b for b, k in zip(scored, in_known, strict=True) if k],
                    [p for p, k in zip(probs, in_known, strict=True) if k],
                )
        items = None
        if req.return_items:
            items = [
                PopMCQBuiltItem(
                    item_id=b.item_id,
                    strategy=b.strategy,
                    options=list(b.options),
                    popularity=list(b.popularity),
                    answer_index=b.answer_index,
                    probs=raw[i],
                    chosen={m: chosen[m][i] for m in req.methods},
                )
                for i, b in enumerate(scored)
            ]
        return PopMCQResponse(
            model=served_id(self._model),
            n_items=len(req.items),
            n_kept=len(kept),
            n_calibration=len(calib_ids),
            n_scored=len(kept) - len(calib_ids),
            calibration_ids=sorted(calib_ids),
            dropped=[{"id": i, "reason": r} for i, r in report.dropped],
            built={s: sum(b.strategy == s for b in scored) for s in req.strategies},
            skipped={s: report.skipped.get(s, 0) for s in req.strategies},
            calibration=finite_or_none(fitted),
            table=table,
            items=items,
            open_recall=None
            if recalled is None
            else _recall_summary(req, recalled, kept, calib_ids),
            table_known=table_known if recalled is not None else None,
            usage=Usage.of(usage),
        )

    async def _fit(
        self, req: PopMCQRequest, calib: Sequence[BuiltItem], usage: TokenUsage
    ) -> dict[str, dict[str, Any]]:
        """Label-free fits on the calibration split (each only if its method is asked for)."""
        fitted: dict[str, dict[str, Any]] = {}
        if "popdebias" in req.methods:
            used = fitting_items(calib, req.lambda_fit)
            items = [MCQItem(question=b.question, options=list(b.options)) for b in used]
            fit = await self._mcq.fit_lambda(
                items,
                [list(b.popularity) for b in used],
                req.lambda_fit,
                req.phi,
                usage,
                [b.answer_index for b in used],
            )
            fitted["popdebias"] = {**fit.params(), "phi": req.phi, "built_items": len(used)}
        if "pride" in req.methods:
            items = [MCQItem(question=b.question, options=list(b.options)) for b in calib]
            prior = await self._mcq.pride_prior(items, usage) if items else [0.25] * 4
            fitted["pride"] = {"prior": prior, "built_items": len(items)}
        if "contextual" in req.methods:
            fitted["contextual"] = {"p_cf": await self._mcq.content_free(4, usage)}
        return fitted


def _recall_summary(
    req: PopMCQRequest, recalled: list[OpenRecallItem], kept: Sequence[str], calib: set[str]
) -> OpenRecall:
    hits = sum(r.known for r in recalled)
    known = {r.item_id for r in recalled if r.known}
    return OpenRecall.model_validate(
        finite_or_none(
            {
                "n": len(recalled),
                "n_known": hits,
                "known_rate": hits / len(recalled),
                "known_rate_se": open_recall.binomial_se(hits, len(recalled)),
                "n_scored_known": sum(i in known and i not in calib for i in kept),
                "max_tokens": req.open_recall_tokens,
                "items": [r.model_dump() for r in recalled],
            }
        )
    )


def fitting_items(calib: Sequence[BuiltItem], fit: popprior.LambdaFit) -> list[BuiltItem]:
    """The calibration items a lambda is fitted on (docs/methods.md B.5).

    The regressions leave S6 out: its "None of the above" has a popularity of 0 by
    construction, not a measured one. ``items`` keeps S1 only, the one strategy whose
    distractors are drawn independently of popularity. The grid fit, which reads labels, uses
    every calibration item.
    """
    if fit == "grid":
        return list(calib)
    if fit == "items":
        return [b for b in calib if b.strategy == "S1"]
    return [b for b in calib if b.strategy != "S6"]


def _apply(
    method: str, fitted: dict[str, dict[str, Any]], probs: list[float], item: BuiltItem
) -> list[float]:
    if method == "popdebias":
        f = fitted["popdebias"]
        return debias.loglinear(probs, list(item.popularity), f["lambda"], f["phi"])
    if method == "pride":
        return debias.pride(probs, fitted["pride"]["prior"])
    if method == "contextual":
        return debias.contextual(probs, fitted["contextual"]["p_cf"])
    return list(probs)


def _cells(
    strategies: Sequence[str], items: Sequence[BuiltItem], probs: Sequence[list[float]]
) -> dict[str, PopMCQCell]:
    out = {}
    for strategy in strategies:
        rows = []
        for b, p in zip(items, probs, strict=True):
            if b.strategy != strategy:
                continue
            c = debias.argmax(p)
            rows.append(
                popmcq.Choice(
                    correct=c == b.answer_index,
                    pop_chosen=b.popularity[c],
                    pop_gold=b.popularity[b.answer_index],
                    confidence=p[c],
                )
            )
        out[strategy] = PopMCQCell.model_validate(
            finite_or_none(
                {
                    "n": len(rows),
                    "accuracy": popmcq.accuracy(rows),
                    "accuracy_se": open_recall.binomial_se(sum(r.correct for r in rows), len(rows)),
                    "rho": popmcq.popularity_bias(rows),
                    "rho_relative": popmcq.relative_popularity_bias(rows),
                    "hpsr": popmcq.hpsr(rows),
                    "pop_gap": popmcq.pop_gap(rows),
                    "confidence": popmcq.confidence(rows),
                    "overconfidence": popmcq.overconfidence(rows),
                }
            )
        )
    return out
