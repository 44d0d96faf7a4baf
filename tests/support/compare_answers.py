"""The JSON of a /v1/judge/compare answer for one pair, for fake services in unit tests."""

from __future__ import annotations

from typing import Any


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
