"""Verification against the labels of GSM8K's labelled solutions (docs/methods.md E).

Every candidate solution of every question is checked against the question's reference
solution and compared with its ``is_correct`` label: accuracy, precision and recall of
"correct", the share decided by rule, engine calls and tokens per judgment, and the undecided
and disagreeing rows with their reasons. ``rule`` runs the rule verifier here (no server);
``hybrid`` and ``model`` ask a running service (``/v1/score`` per question, the reference in
the request, the judgment cache off).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

from verifier_client import AsyncClient

from service.evals.common import ProgressFn, gather_with_progress, open_client
from service.evals.data import load_gsm8k_solutions
from service.scoring.answers import RuleCheck
from service.scoring.bestofn import BestOfNItem
from service.serving.rules import RuleVerifier

DEFAULT_FILE: Final = Path("gsm8k") / "example_model_solutions.jsonl"
CHUNK: Final = 64
SHOWN: Final = 20  # undecided and disagreeing rows listed in the result
VERIFIERS: Final = ("rule", "hybrid", "model")


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics of checked rows (``label``: bool, ``equivalent``: bool | None, ``reason``)."""
    decided = [r for r in rows if r["equivalent"] is not None]
    right = sum(r["equivalent"] == r["label"] for r in decided)
    tp = sum(r["equivalent"] and r["label"] for r in decided)
    said_correct = sum(bool(r["equivalent"]) for r in decided)
    labelled_correct = sum(bool(r["label"]) for r in rows)
    return {
        "n": len(rows),
        "decided": len(decided),
        "decided_share": _ratio(len(decided), len(rows)),
        # undecided rows count as wrong: what a rule-only reward would get
        "accuracy": _ratio(right, len(rows)),
        "accuracy_decided": _ratio(right, len(decided)),
        "precision": _ratio(tp, said_correct),
        "recall": _ratio(tp, labelled_correct),
        "decided_by_rule_share": _ratio(
            sum(r.get("decided_by") == "rule" for r in rows), len(rows)
        ),
        "reasons": dict(Counter(r["reason"] for r in rows)),
        "undecided_rows": [r for r in rows if r["equivalent"] is None][:SHOWN],
        "disagreements": [r for r in decided if r["equivalent"] != r["label"]][:SHOWN],
        "n_disagreements": len(decided) - right,
    }


def _row(index: int, solver: str, label: bool, result: RuleCheck) -> dict[str, Any]:
    return {
        "item": index,
        "solver": solver,
        "label": label,
        "equivalent": result.equivalent,
        "decided_by": None if result.equivalent is None else "rule",
        "reason": result.reason,
        "extracted": result.extracted,
        "reference": result.reference,
    }


async def run_reference(
    path: Path,
    limit: int | None,
    workers: int,
    timeout_s: float,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Check every candidate of the first ``limit`` items; the result JSON of the eval."""
    items = load_gsm8k_solutions(path, limit)
    pairs = [
        (i, c.solver_name, c.is_correct, c.solution, item.ground_truth)
        for i, item in enumerate(items)
        for c in item.candidates
    ]
    rows: list[dict[str, Any]] = []
    with RuleVerifier(workers=workers, timeout_s=timeout_s) as verifier:
        verifier.check_sync("warm up", "1")  # the workers' imports are not the checks' time
        started = time.monotonic()
        for at in range(0, len(pairs), CHUNK):
            chunk = pairs[at : at + CHUNK]
            results = await verifier.check_many([(text, ref) for *_, text, ref in chunk])
            rows += [
                _row(i, name, label, r)
                for (i, name, label, _, _), r in zip(chunk, results, strict=True)
            ]
            if progress is not None:
                progress(len(rows), len(pairs))
    wall = time.monotonic() - started
    return {
        "verifier": "rule",
        "n_items": len(items),
        **summarize(rows),
        "engine_calls": 0,
        "tokens": 0,
        "engine_calls_per_judgment": 0.0,
        "tokens_per_judgment": 0.0,
        "checks_per_s": len(rows) / wall if wall > 0 else None,
        "wall_s": wall,
        "config": {"data": str(path), "workers": workers, "timeout_s": timeout_s},
    }


async def _served_item(
    client: AsyncClient, index: int, item: BestOfNItem, verifier: str, mode: str
) -> tuple[list[dict[str, Any]], int, int]:
    """One question's candidates judged by the service: rows, engine calls, tokens."""
    res = await client.score(
        question=item.question,
        responses=[c.solution for c in item.candidates],
        reference=item.ground_truth,
        verifier=verifier,
        method="outcome",
        mode=mode,
        cache=False,
    )
    by_index = {r.index: r for r in res.results}
    rows = []
    for i, cand in enumerate(item.candidates):
        r = by_index[i]
        rows.append(
            {
                "item": index,
                "solver": cand.solver_name,
                "label": cand.is_correct,
                "equivalent": None if r.final is None else r.final >= 0.5,
                "score": r.final,
                "decided_by": r.decided_by,
                "reason": r.rule.reason
                if r.rule is not None and r.decided_by == "rule"
                else "model",
                "extracted": r.rule.extracted if r.rule is not None else None,
                "reference": r.rule.reference if r.rule is not None else None,
            }
        )
    return rows, res.usage.engine_calls, res.usage.total_tokens


async def run_served(
    url: str,
    path: Path,
    limit: int | None,
    verifier: str,
    mode: str = "direct",
    concurrency: int = 8,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """``hybrid`` or ``model`` through the service at ``url``: the result JSON of one verifier."""
    if verifier not in ("hybrid", "model"):
        raise ValueError(f"verifier {verifier!r}: the service runs hybrid or model here")
    items = load_gsm8k_solutions(path, limit)
    started = time.monotonic()
    async with open_client(url, concurrency) as client:
        jobs = [_served_item(client, i, item, verifier, mode) for i, item in enumerate(items)]
        done = await gather_with_progress(jobs, progress)
    wall = time.monotonic() - started
    rows = [row for item_rows, _, _ in done for row in item_rows]
    calls = sum(c for _, c, _ in done)
    tokens = sum(t for _, _, t in done)
    return {
        "verifier": verifier,
        "n_items": len(items),
        **summarize(rows),
        "engine_calls": calls,
        "tokens": tokens,
        "engine_calls_per_judgment": calls / len(rows) if rows else None,
        "tokens_per_judgment": tokens / len(rows) if rows else None,
        "checks_per_s": len(rows) / wall if wall > 0 else None,
        "wall_s": wall,
        "config": {"data": str(path), "url": url, "mode": mode, "concurrency": concurrency},
    }


async def run_verifiers(
    path: Path,
    limit: int | None,
    verifiers: tuple[str, ...],
    *,
    url: str,
    mode: str = "direct",
    concurrency: int = 8,
    workers: int = 2,
    timeout_s: float = 2.0,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Each verifier over the same rows: ``{"verifiers": {name: result}, ...}``."""
    unknown = [v for v in verifiers if v not in VERIFIERS]
    if unknown or not verifiers:
        raise ValueError(f"verifiers {unknown or 'none'}: choose from {', '.join(VERIFIERS)}")
    results: dict[str, Any] = {}
    for name in verifiers:
        if name == "rule":
            results[name] = await run_reference(path, limit, workers, timeout_s, progress)
        else:
            results[name] = await run_served(url, path, limit, name, mode, concurrency, progress)
    return {
        "n_items": next(iter(results.values()))["n_items"],
        "verifiers": results,
        "config": {"data": str(path), "limit": limit, "url": url, "mode": mode},
    }
