"""Rule verification against the labels of GSM8K's labelled solutions (docs/methods.md E).

Every candidate solution of every question is checked against the question's reference
solution by the rule verifier alone (no engine, no server) and compared with its
``is_correct`` label: accuracy, precision and recall of "correct", the share the rule decides,
and the undecided and disagreeing rows with their reasons.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

from service.evals.common import ProgressFn
from service.evals.data import load_gsm8k_solutions
from service.scoring.answers import RuleCheck
from service.serving.rules import RuleVerifier

DEFAULT_FILE: Final = Path("gsm8k") / "example_model_solutions.jsonl"
CHUNK: Final = 64
SHOWN: Final = 20  # undecided and disagreeing rows listed in the result


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
        "checks_per_s": len(rows) / wall if wall > 0 else None,
        "wall_s": wall,
        "config": {"data": str(path), "workers": workers, "timeout_s": timeout_s},
    }
