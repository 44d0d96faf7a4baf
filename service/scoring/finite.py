"""Undefined figures (NaN, infinities) as None, so reports and responses stay strict JSON."""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """NaN and infinities (undefined figures) become None, recursively through dicts and lists.

    Example:
        >>> finite_or_none({"f1": float("nan"), "acc": [50.0, float("inf")], "n": 3})
        {'f1': None, 'acc': [50.0, None], 'n': 3}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value
