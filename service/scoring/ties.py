"""Ties in a ranking: scores closer than the engine's precision are not an order (methods.md).

A bf16 engine reads a verdict logit on a grid of about 2^-3 near 0, and identical reads move
by up to ~0.05 in probability, so two responses whose scores differ by less than the tie
tolerance are reported as tied rather than silently ordered by index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# Default tie tolerance on a probability-scale score, by engine dtype: one unit in the last
# place of the dtype's mantissa near 1 (bf16 8 bits, fp16 11, fp32 24 but its reads still
# move through the float32 softmax and batch order, so 2^-14 is kept as a floor).
DTYPE_TOLERANCE: Final[dict[str, float]] = {
    "bfloat16": 2.0**-8,
    "float16": 2.0**-11,
    "float32": 2.0**-14,
}


def default_tolerance(dtype: str) -> float:
    """The tie tolerance for an engine ``dtype``; an unknown or remote one is taken as bf16."""
    return DTYPE_TOLERANCE.get(dtype, DTYPE_TOLERANCE["bfloat16"])


def tie_groups(
    scores: Sequence[float | None], ranking: Sequence[int], tolerance: float
) -> list[list[int]]:
    """Groups of indices (in ``ranking`` order) of two or more tied results.

    Neighbours in ``ranking`` whose scores differ by less than ``tolerance`` are tied, and ties
    chain: a, b, c with a-b and b-c under the tolerance form one group even when a-c is not.
    A difference of exactly ``tolerance`` is not a tie. ``None`` (undecided) ties only with
    ``None``.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    for pos, idx in enumerate(ranking):
        if pos and _tied(scores[ranking[pos - 1]], scores[idx], tolerance):
            current.append(idx)
            continue
        if len(current) > 1:
            groups.append(current)
        current = [idx]
    if len(current) > 1:
        groups.append(current)
    return groups


def _tied(a: float | None, b: float | None, tolerance: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) < tolerance
