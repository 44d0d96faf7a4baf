"""The rule-verification eval: its metrics recomputed by hand, and a short real run on the
project's GSM8K labelled solutions."""

from __future__ import annotations

import asyncio
import json

import pytest

from service.config import PROJECT_DATA
from service.evals.reference import DEFAULT_FILE, run_reference, summarize


def row(label: bool, equivalent: bool | None, reason: str = "x") -> dict[str, object]:
    return {"label": label, "equivalent": equivalent, "reason": reason}


def test_summarize_against_hand_counts() -> None:
    rows = [
        row(True, True),  # tp
        row(True, False),  # fn
        row(False, True),  # fp
        row(False, False),  # tn
        row(True, None, "timeout"),  # undecided, labelled correct
    ]
    out = summarize(rows)
    assert out["n"] == 5
    assert out["decided"] == 4
    assert out["decided_share"] == pytest.approx(4 / 5)
    assert out["accuracy"] == pytest.approx(2 / 5)  # undecided counts as wrong
    assert out["accuracy_decided"] == pytest.approx(2 / 4)
    assert out["precision"] == pytest.approx(1 / 2)
    assert out["recall"] == pytest.approx(1 / 3)
    assert out["n_disagreements"] == 2
    assert out["reasons"] == {"x": 4, "timeout": 1}
    assert [r["equivalent"] for r in out["undecided_rows"]] == [None]


def test_a_short_run_on_the_labelled_solutions() -> None:
    path = PROJECT_DATA / DEFAULT_FILE
    result = asyncio.run(run_reference(path, 5, workers=1, timeout_s=5.0))
    assert result["n_items"] == 5
    assert result["n"] == 20
    assert result["engine_calls"] == 0
    labels = [
        entry["is_correct"]
        for line in path.read_text(encoding="utf-8").splitlines()[:5]
        for key, entry in json.loads(line).items()
        if isinstance(entry, dict)
    ]
    # GSM8K's labels come from the final answers, so the rule must match all of them here
    assert result["decided"] == 20
    assert result["accuracy"] == 1.0
    assert sum(labels) == result["reasons"].get("equivalent", 0)
