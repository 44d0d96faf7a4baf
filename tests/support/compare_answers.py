"""Labelled GSM8K solutions files and /v1/judge/compare answers, for the eval harnesses' unit
tests against fake services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SOLVERS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def write_solutions(path: Path, flags: list[list[bool]]) -> None:
    """A solutions file in the GSM8K example format: question i, each solver right or not."""
    with path.open("w", encoding="utf-8") as handle:
        for i, row in enumerate(flags):
            line: dict[str, Any] = {"question": f"q{i}", "ground_truth": "A: 1"}
            for solver, ok in zip(SOLVERS, row, strict=True):
                line[solver] = {"is_correct": ok, "solution": f"{solver} says {i}"}
            handle.write(json.dumps(line) + "\n")


def pair_answer(p01: float, **update: Any) -> dict[str, Any]:
    """A pairwise, swapped comparison of two responses where P(0 over 1) is ``p01``;
    ``update`` replaces any field."""
    return {
        "mode": "pairwise",
        "aggregation": "bradley_terry",
        "debias": "swap",
        "model": "fake-model",
        "results": [
            {"index": 0, "reward": 0.0, "score": p01},
            {"index": 1, "reward": 0.0, "score": 1 - p01},
        ],
        "ranking": [0, 1] if p01 >= 0.5 else [1, 0],
        "preferences": [[None, p01], [1 - p01, None]],
        "position_consistency": 1.0,
        "first_position_rate": 0.5,
        "passes": 2,
        "usage": {"prompt_tokens": 10, "generated_tokens": 0, "total_tokens": 10},
        **update,
    }
