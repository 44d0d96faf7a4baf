"""Rubric grading against labels (docs/methods.md K.3): GSM8K solutions, rewritten so every
criterion's truth is known, graded by a ``rubric`` spec through ``/v1/rewards``.

Per question, one correct and one wrong solution (where the file has both) are taken, each in
three forms: as written; ``answer_only`` (its final ``A: <n>`` line alone, no computation);
``sentence`` (the computation kept, the final line rewritten as "So the answer is <n>."). The
rubric's criteria and their labels:

- ``correct`` (weight 2): the final answer equals the reference; the file's ``is_correct``.
- ``computation`` (1): the response shows its calculations; false for ``answer_only``.
- ``format`` (1): it ends with a line ``A: <number>``; false for ``sentence``.
- ``wrong_answer`` (-1, a penalty): the final answer differs from the reference; not ``is_correct``.

Reported per criterion: accuracy of ``holds`` (P(yes) >= 0.5) and AUROC of P(yes) against the
label; and the rubric reward's AUROC against ``correct`` and against all three good criteria
holding.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from verifier_client import AsyncClient

from service.evals.common import ProgressFn, gather_with_progress, open_client, sum_usage
from service.evals.data import load_gsm8k_solutions
from service.scoring.bestofn import BestOfNItem
from service.scoring.calibration import auroc

DEFAULT_FILE: Final = Path("gsm8k") / "example_model_solutions.jsonl"
FORMS: Final = ("as_written", "answer_only", "sentence")
# (name, text, weight): the rubric every solution is graded by.
CRITERIA: Final = (
    ("correct", "The final answer equals the reference answer.", 2.0),
    ("computation", "The response shows the calculations that lead to its answer.", 1.0),
    ("format", "The response ends with a line of the form 'A: <number>'.", 1.0),
    ("wrong_answer", "The response's final answer differs from the reference answer.", -1.0),
)
GOOD: Final = ("correct", "computation", "format")
_FINAL = re.compile(r"\n?A:\s*(?P<answer>[^\n]*)\s*$")


@dataclass(frozen=True, slots=True)
class Case:
    question: str
    reference: str
    form: str
    response: str
    labels: dict[str, bool]


def final_answer(text: str) -> str:
    """The text after a solution's closing ``A:``; ValueError without one."""
    match = _FINAL.search(text.strip())
    if match is None:
        raise ValueError(f"no final 'A: <answer>' line in {text[-60:]!r}")
    return match["answer"].strip()


def forms(solution: str, is_correct: bool) -> list[tuple[str, str, dict[str, bool]]]:
    """(form, response, labels) of one solution in the three forms."""
    body = solution.strip()
    answer = final_answer(body)
    work = _FINAL.sub("", body).rstrip()
    texts = {
        "as_written": body,
        "answer_only": f"A: {answer}",
        "sentence": f"{work}\nSo the answer is {answer}.",
    }
    return [
        (
            form,
            texts[form],
            {
                "correct": is_correct,
                "computation": form != "answer_only",
                "format": form != "sentence",
                "wrong_answer": not is_correct,
            },
        )
        for form in FORMS
    ]


def build_cases(items: list[BestOfNItem]) -> list[Case]:
    """Per question, its first correct and first wrong solution (those it has), in every form."""
    cases: list[Case] = []
    for item in items:
        reference = final_answer(item.ground_truth)
        for want in (True, False):
            cand = next((c for c in item.candidates if c.is_correct is want), None)
            if cand is None:
                continue
            for form, response, labels in forms(cand.solution, want):
                cases.append(Case(item.question, reference, form, response, labels))
    return cases


def rubric_spec(reference: str) -> dict[str, Any]:
    return {
        "type": "rubric",
        "reference": reference,
        "criteria": [{"text": text, "weight": weight} for _, text, weight in CRITERIA],
    }


async def _grade(client: AsyncClient, case: Case) -> dict[str, Any]:
    item = {
        "prompt": case.question,
        "response": case.response,
        "verifier": rubric_spec(case.reference),
    }
    res = await client.rewards(items=[item], cache=False)
    result = res.results[0]
    if result.criteria is None:
        raise ValueError(f"no criteria in a rubric result: {result.failed or result.decided_by}")
    return {
        "question": case.question,
        "form": case.form,
        "labels": case.labels,
        "p": {
            name: c.probability for (name, _, _), c in zip(CRITERIA, result.criteria, strict=True)
        },
        "reward": result.reward,
        "usage": res.usage,
        "model": res.model,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for name, _, weight in CRITERIA:
        labels = [int(r["labels"][name]) for r in rows]
        probs = [r["p"][name] for r in rows]
        per[name] = {
            "weight": weight,
            "accuracy": statistics.mean(
                int(p >= 0.5) == y for p, y in zip(probs, labels, strict=True)
            ),
            "auroc": auroc(probs, labels) if 0 < sum(labels) < len(labels) else None,
            "mean_p_true": statistics.mean(p for p, y in zip(probs, labels, strict=True) if y)
            if any(labels)
            else None,
            "mean_p_false": statistics.mean(p for p, y in zip(probs, labels, strict=True) if not y)
            if not all(labels)
            else None,
            "positives": sum(labels),
        }
    rewards = [r["reward"] for r in rows]
    correct = [int(r["labels"]["correct"]) for r in rows]
    ideal = [int(all(r["labels"][g] for g in GOOD)) for r in rows]
    return {
        "criteria": per,
        "reward_auroc_correct": auroc(rewards, correct) if 0 < sum(correct) < len(rows) else None,
        "reward_auroc_all_good": auroc(rewards, ideal) if 0 < sum(ideal) < len(rows) else None,
    }


async def run_rubric_eval(
    url: str,
    path: Path,
    limit: int | None,
    *,
    concurrency: int = 4,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """The result JSON of the rubric eval through the service at ``url``."""
    cases = build_cases(load_gsm8k_solutions(path, limit))
    started = time.monotonic()
    async with open_client(url, concurrency) as client:
        rows = await gather_with_progress([_grade(client, c) for c in cases], progress)
    wall = time.monotonic() - started
    model = rows[0]["model"] if rows else ""
    usage = sum_usage(r.pop("usage") for r in rows)
    return {
        "n_cases": len(rows),
        "n_questions": len({c.question for c in cases}),
        **summarize(rows),
        "usage": usage,
        "rubrics_per_s": len(rows) / wall if wall > 0 else None,
        "wall_s": wall,
        "model": model,
        "rows": rows,
        "config": {"data": str(path), "url": url, "criteria": [list(c) for c in CRITERIA]},
    }
