"""Usage records: the wire type sums field by field, like the engine's TokenUsage."""

from __future__ import annotations

from service.engine.base import TokenUsage
from service.protocol import Usage


def test_usage_sums_every_field() -> None:
    a = Usage.of(TokenUsage(10, 2, 4, 1, 0))
    b = Usage.of(TokenUsage(7, 5, 0, 2, 3))
    total = a + b
    assert total == Usage.of(TokenUsage(10, 2, 4, 1, 0).add(TokenUsage(7, 5, 0, 2, 3)))
    assert total.model_dump() == {
        "prompt_tokens": 17,
        "generated_tokens": 7,
        "cached_tokens": 4,
        "total_tokens": 24,
        "engine_calls": 3,
        "cached_judgments": 3,
    }
    # The operands are left as they were.
    assert a.total_tokens == 12
    assert b.total_tokens == 12


def test_sum_of_no_parts_is_zero() -> None:
    assert sum([], Usage()) == Usage()
    assert sum([Usage(prompt_tokens=3, total_tokens=3)], Usage()).total_tokens == 3
