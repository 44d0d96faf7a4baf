"""Code verification on HumanEval (docs/methods.md L): the tests against labelled candidates,
and the judge beside them.

Every task gives two labelled candidates: its reference solution (correct) and the same with
its return statements removed (wrong). ``--samples`` adds generated ones in HumanEval's sample
format (``{"task_id", "completion"}``, the completion appended to the task's prompt), labelled
by the tests. Each candidate is sent to ``/v1/rewards`` with a ``code`` spec holding the task's
``check``, and with ``--judge`` a ``model`` spec beside it. Reported: each kind's pass rate
(pass@1 of the given candidates), the tests' agreement with the labels, the judge's accuracy
and AUROC against them, and where a task has several samples, Best-of-N: the pass rate of the
sample the judge ranks first against the mean (a random pick).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Final

from verifier_client import AsyncClient

from service.evals.common import ProgressFn, gather_with_progress, open_client
from service.evals.data import HumanEvalRow, load_humaneval
from service.scoring.calibration import auroc

DEFAULT_FILE: Final = Path("humaneval") / "HumanEval.jsonl.gz"
SHOWN: Final = 20


def load_samples(path: Path) -> dict[str, list[str]]:
    """Completions per task id from a HumanEval sample file (JSONL)."""
    out: dict[str, list[str]] = defaultdict(list)
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("task_id"), str) or not isinstance(
                row.get("completion"), str
            ):
                raise ValueError(
                    f"{path}:{number}: a sample is {{'task_id': str, 'completion': str}}"
                )
            out[row["task_id"]].append(row["completion"])
    return out


def _candidates(task: HumanEvalRow, samples: list[str]) -> list[tuple[str, str, bool | None]]:
    """(kind, code, label): the reference, the broken reference, then the samples (unlabelled)."""
    given: list[tuple[str, str, bool | None]] = [
        ("canonical", task.canonical, True),
        ("no_return", task.broken, False),
    ]
    return given + [("sample", task.prompt + s, None) for s in samples]


async def _task(
    client: AsyncClient, task: HumanEvalRow, samples: list[str], judge: bool, timeout_s: float
) -> list[dict[str, Any]]:
    code = {"type": "code", "tests": [{"assert": task.check}], "test_timeout_s": timeout_s}
    cands = _candidates(task, samples)
    items = []
    for kind, text, _ in cands:
        item: dict[str, Any] = {"prompt": task.prompt, "response": text, "id": kind}
        if judge:
            item["components"] = {"tests": code, "judge": {"type": "model"}}
        else:
            item["verifier"] = code
        items.append(item)
    res = await client.rewards(items=items, cache=False)
    rows = []
    for (kind, _, label), r in zip(cands, res.results, strict=True):
        tests = r.components["tests"] if r.components else r
        passed = tests.reward == 1.0
        rows.append(
            {
                "task_id": task.task_id,
                "kind": kind,
                "label": passed if label is None else label,
                "passed": passed,
                "statuses": [c.status for c in tests.code.cases] if tests.code else [],
                "judge": r.reward_components.get("judge") if r.reward_components else None,
            }
        )
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        kinds[r["kind"]].append(r)
    given = [r for r in rows if r["kind"] != "sample"]
    out: dict[str, Any] = {
        "pass_rate": {k: sum(r["passed"] for r in rs) / len(rs) for k, rs in kinds.items()},
        "n": {k: len(rs) for k, rs in kinds.items()},
        "tests_agreement": sum(r["passed"] == r["label"] for r in given) / len(given),
        "tests_disagreements": [r for r in given if r["passed"] != r["label"]][:SHOWN],
    }
    judged = [r for r in given if r["judge"] is not None]
    if judged:
        right = sum((r["judge"] >= 0.5) == r["label"] for r in judged)
        out["judge_accuracy"] = right / len(judged)
        out["judge_auroc"] = auroc([r["judge"] for r in judged], [int(r["label"]) for r in judged])
    out["best_of_n"] = _best_of_n([r for r in rows if r["kind"] == "sample"])
    return out


def _best_of_n(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per task with 2+ judged samples: the judge's pick's pass rate vs the mean (random)."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in samples:
        if r["judge"] is not None:
            by_task[r["task_id"]].append(r)
    groups = [g for g in by_task.values() if len(g) >= 2]
    if not groups:
        return None
    picked = [max(g, key=lambda r: r["judge"])["passed"] for g in groups]
    return {
        "tasks": len(groups),
        "n_per_task": statistics.mean(len(g) for g in groups),
        "random": statistics.mean(statistics.mean(r["passed"] for r in g) for g in groups),
        "judge_pick": sum(picked) / len(picked),
        "oracle": sum(any(r["passed"] for r in g) for g in groups) / len(groups),
    }


async def run_code_eval(
    url: str,
    path: Path,
    limit: int | None,
    *,
    samples: Path | None = None,
    judge: bool = False,
    timeout_s: float = 10.0,
    concurrency: int = 4,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """The result JSON of the code eval through the service at ``url``."""
    tasks = load_humaneval(path, limit)
    extra = load_samples(samples) if samples is not None else {}
    started = time.monotonic()
    async with open_client(url, concurrency) as client:
        jobs = [_task(client, t, extra.get(t.task_id, []), judge, timeout_s) for t in tasks]
        done = await gather_with_progress(jobs, progress)
    wall = time.monotonic() - started
    rows = [r for task_rows in done for r in task_rows]
    return {
        "n_tasks": len(tasks),
        **summarize(rows),
        "runs_per_s": len(rows) / wall if wall > 0 else None,
        "wall_s": wall,
        "config": {
            "data": str(path),
            "samples": None if samples is None else str(samples),
            "judge": judge,
            "url": url,
            "timeout_s": timeout_s,
        },
    }
