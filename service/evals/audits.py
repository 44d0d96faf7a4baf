"""The MCQ audits against a running service: ``verifier eval popmcq`` and ``choices-only``.

- PopMCQ: a pool file goes to ``POST /v1/mcq/popmcq`` in one request, so the service picks
  the calibration split once and scores every debiasing method on the same built items.
- Choices-only: items go to ``POST /v1/mcq/audit`` in chunks; the per-item results are merged
  and summarised by the same pure function the service uses
  (:func:`service.scoring.audit.summarize`), so figures over a whole data set are exact, not
  averages of chunk averages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import httpx
from verifier_client.models import Usage

from service.evals import popdebias_cv
from service.evals.common import ProgressFn, gather_with_progress, open_client, sum_usage
from service.evals.data import GoldItem, Skipped, read_items
from service.scoring import audit, inferred, tagging
from service.scoring.finite import finite_or_none

# The example pool ships with the project (data/SOURCES.md says how it was built).
DEFAULT_POOL: Final = Path(__file__).resolve().parents[2] / "data" / "popmcq" / "pool.jsonl"
DEFAULT_ARC: Final = Path("arc") / "ARC-Challenge-Dev.jsonl"


# --- PopMCQ -----------------------------------------------------------------------------------


def _option(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str) and value.strip():
        return {"text": value}
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        out = {"text": value["text"]}
        if value.get("popularity") is not None:
            out["popularity"] = float(value["popularity"])
        return out
    raise ValueError(f"{where} is neither a text nor {{text, popularity}}")


def _aliases(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(a, str) and a.strip() for a in value):
        raise ValueError("aliases must be a list of non-empty texts")
    return list(value)


def read_pool(path: Path) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """Pool rows ``{id, question, answer, aliases?, candidates}``; answers and candidates are
    texts or
    ``{text, popularity}``. Unreadable rows are counted, never dropped silently."""
    items: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                question = row["question"]
                if not isinstance(question, str) or not question.strip():
                    raise ValueError("empty question")
                cands = row["candidates"]
                if not isinstance(cands, list) or not cands:
                    raise ValueError("candidates must be a non-empty list")
                items.append(
                    {
                        "id": str(row.get("id", n)),
                        "question": question,
                        "answer": _option(row["answer"], "answer"),
                        "candidates": [_option(c, f"candidates[{i}]") for i, c in enumerate(cands)],
                        "aliases": _aliases(row.get("aliases", [])),
                    }
                )
            except (KeyError, TypeError, ValueError) as exc:
                skipped.append(Skipped(n, f"{type(exc).__name__}: {exc}"))
    return items, skipped


async def run_popmcq(
    url: str,
    data: Path,
    *,
    popularity: str = "model",
    methods: Sequence[str] = ("none", "popdebias", "pride", "contextual"),
    strategies: Sequence[str] = ("S1", "S2", "S3", "S4", "S5", "S6"),
    seed: int = 0,
    calibration_ratio: float = 0.2,
    limit: int | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    lambda_fit: str = "question_free",
    timeout_s: float | None = None,
    open_recall: bool = False,
    variants: bool = False,
) -> dict[str, Any]:
    """One PopMCQ request over the pool; with ``variants`` the scored items come back with
    their raw reads and the PopDebias variants are cross-validated on them
    (:mod:`service.evals.popdebias_cv`)."""
    items, skipped = read_pool(data)
    if limit is not None:
        items = items[:limit]
    if len(items) < 2:
        raise ValueError(f"{data}: {len(items)} readable pool rows; need at least 2")
    body: dict[str, Any] = {
        "items": items,
        "popularity": popularity,
        "methods": list(methods),
        "strategies": list(strategies),
        "seed": seed,
        "calibration_ratio": calibration_ratio,
        "lambda_fit": lambda_fit,
        "open_recall": open_recall,
        "return_items": variants,
    }
    start = time.perf_counter()
    async with open_client(url, 1, transport, timeout_s) as client:
        result = (await client.popmcq(**body)).model_dump(mode="json")
    if variants:
        result["variants"] = popdebias_cv.cross_validate(popdebias_cv.rows_of(result), seed=seed)
    result["skipped_rows"] = [{"row": s.row, "reason": s.reason} for s in skipped]
    result["wall_s"] = time.perf_counter() - start
    result["config"] = {
        "data": str(data),
        "url": url,
        **{k: v for k, v in body.items() if k != "items"},
    }
    return result


# --- choices-only / reasoning -----------------------------------------------------------------

CHUNK: Final = 8  # items per audit request


def item_run(result: dict[str, Any]) -> audit.ItemRun:
    """An :class:`audit.ItemRun` back from one item of an audit response."""
    rec = audit.ItemRun(k=result["k"], answer_index=result["answer_index"], item_id=result["id"])
    for cond, r in result["conditions"].items():
        rec.runs[cond] = audit.ConditionRun(
            index=r["answer_index"],
            probs=r["probs"],
            parsed=r.get("parsed_index"),
            rationale=r.get("rationale"),
            idk=r.get("idk", False),
            prediction=_prediction(r.get("prediction")),
            inferred=_inferred(r.get("inferred_question")),
        )
    for cond, kinds in result.get("perturbations", {}).items():
        rec.perturbed[cond] = {
            kind: audit.PerturbedRun(p["answer_index"], p["chose_injected"], p["inserted_at"])
            for kind, p in kinds.items()
        }
    return rec


def _prediction(p: dict[str, Any] | None) -> audit.Prediction | None:
    if p is None:
        return None
    return audit.Prediction(
        index=p["predicted_index"], prob=p["probability"], empty=p["trace_empty"]
    )


def _inferred(found: dict[str, Any] | None) -> audit.Inferred | None:
    if found is None:
        return None
    return audit.Inferred(question=found["question"], match_prob=found["match_probability"])


def tagging_summary(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    tagged = [r for r in results if r.get("tags")]
    if not tagged:
        return None
    labels = [{n: t["value"] for n, t in r["tags"].items()} for r in tagged]
    correct = [r["conditions"]["choices_only_reason"]["correct"] for r in tagged]
    return {
        "n": len(tagged),
        "label_rates": {n: sum(row[n] for row in labels) / len(labels) for n in tagging.LABELS},
        "regression": tagging.logit_regression(labels, correct),
    }


def _body(chunk: Sequence[GoldItem], options: dict[str, Any]) -> dict[str, Any]:
    items = [
        {
            "id": it.id,
            "question": it.question,
            "options": it.options,
            "answer_index": it.answer_index,
        }
        for it in chunk
    ]
    return {"items": items, **options}


async def run_choices_only(
    url: str,
    data: Path,
    *,
    limit: int | None = None,
    reasoning_tokens: int = 64,
    conditions: Sequence[str] = audit.CONDITIONS,
    idk: bool = False,
    perturbations: bool = False,
    tag_strategies: bool = False,
    predictability: bool = False,
    inferred_question: bool = False,
    trace_judge: str = "served",
    seed: int | None = None,
    temperature: float = 0.0,
    chunk: int = CHUNK,
    concurrency: int = 2,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    items, skipped = read_items(data)
    if limit is not None:
        items = items[:limit]
    limit_k = 10 - int(idk) - int(perturbations)
    too_wide = [it for it in items if it.k > limit_k]
    items = [it for it in items if it.k <= limit_k]
    skipped += [
        Skipped(0, f"{it.id}: {it.k} options, no room for idk/perturbation") for it in too_wide
    ]
    if not items:
        raise ValueError(f"{data}: no readable items")
    options: dict[str, Any] = {
        "conditions": list(conditions),
        "reasoning_tokens": reasoning_tokens,
        "idk": idk,
        "perturbations": perturbations,
        "tag_strategies": tag_strategies,
        "predictability": predictability,
        "seed": seed,
        "temperature": temperature,
    }
    if inferred_question:
        options["inferred_question"] = True
    if predictability or inferred_question:
        options["trace_judge"] = trace_judge
    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    start = time.perf_counter()
    async with open_client(url, concurrency, transport) as client:

        async def one(chunk_items: Sequence[GoldItem]) -> dict[str, Any]:
            answer = await client.mcq_audit(**_body(chunk_items, options))
            return answer.model_dump(mode="json")

        answers = await gather_with_progress([one(c) for c in chunks], progress)
    wall = time.perf_counter() - start
    results = [r for a in answers for r in a["items"]]
    runs = [item_run(r) for r in results]
    summary = audit.summarize(runs)
    summary["tagging"] = tagging_summary(results)
    summary["inferred_question"] = inferred.summarize(runs)
    by_cond: dict[str, int] = {}
    for a in answers:
        for cond, n in a["tokens_by_condition"].items():
            by_cond[cond] = by_cond.get(cond, 0) + n
    report: dict[str, Any] = finite_or_none(
        {
            "model": answers[0]["model"],
            "trace_judge": answers[0]["trace_judge"],
            "summary": summary,
            "items": results,
            "n_items": len(results),
            "skipped": [{"row": s.row, "reason": s.reason} for s in skipped],
            "usage": sum_usage(Usage.model_validate(a["usage"]) for a in answers),
            "tokens_by_condition": by_cond,
            "tokens_per_item_by_condition": {c: n / len(results) for c, n in by_cond.items()},
            "wall_s": wall,
            "items_per_s": len(results) / wall if wall > 0 else None,
            "config": {"data": str(data), "url": url, "limit": limit, "chunk": chunk, **options},
        }
    )
    return report
