"""HumanEval through HTTP on the session's real server: every reference solution passes its
tests and every one without its return statements fails; the eval's report matches its rows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from service.evals.code import DEFAULT_FILE, run_code_eval
from tests.e2e.test_evals import run_cli

pytestmark = pytest.mark.timeout(600)


def test_humaneval_references_pass_and_broken_ones_fail(server: Any, data_dir: Path) -> None:
    result = asyncio.run(run_code_eval(server.url, data_dir / DEFAULT_FILE, None, concurrency=4))
    assert result["n_tasks"] == 164
    assert result["n"] == {"canonical": 164, "no_return": 164}
    assert result["tests_disagreements"] == []
    assert result["pass_rate"] == {"canonical": 1.0, "no_return": 0.0}
    assert result["tests_agreement"] == 1.0


def test_eval_code_with_the_judge_and_samples(server: Any, tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    rows = [
        {"task_id": "HumanEval/0", "completion": "    return False\n"},
        {
            "task_id": "HumanEval/0",
            "completion": "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
            " for b in numbers[i + 1:])\n",
        },
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "code.json"
    run_cli(
        "code",
        *("--limit", "2", "--judge", "--samples", str(samples), "--url", server.url),
        *("--output", str(out)),
    )
    result = json.loads(out.read_text())
    assert result["n"] == {"canonical": 2, "no_return": 2, "sample": 2}
    assert result["pass_rate"]["sample"] == 0.5  # the second sample is right, the first is not
    assert 0.0 <= result["judge_auroc"] <= 1.0
    bon = result["best_of_n"]
    assert (bon["tasks"], bon["random"], bon["oracle"]) == (1, 0.5, 1.0)
    assert bon["judge_pick"] in (0.0, 1.0)
