"""Refuse text that is not valid Unicode before it reaches the tokenizer.

JSON may carry a lone surrogate as an escape (``"\\ud98c"``); Python decodes it into a ``str``
that cannot be encoded as UTF-8, and the tokenizer fails on it. Such text is refused with a
422 naming the field rather than repaired: a repaired text would be judged as something the
client did not send.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _first_surrogate(data: Any) -> tuple[str, str] | None:
    """(path, code point) of the first lone surrogate in strings, lists and dicts, or None.

    Iterative, so deeply nested input cannot exhaust the interpreter's stack.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found:
                return path or "body", f"U+{ord(found.group()):04X}"
        elif isinstance(value, dict):
            for key, item in value.items():
                # The path is echoed in the error: never put a surrogate into it.
                name = str(key).encode("utf-8", "backslashreplace").decode()
                child = f"{path}.{name}" if path else name
                stack.extend(((child, key), (child, item)))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


def check_unicode(data: Any) -> None:
    """``ValueError`` (a 422 once pydantic wraps it) if any text holds a lone surrogate."""
    found = _first_surrogate(data)
    if found is not None:
        path, code = found
        raise ValueError(
            f"{path} contains a lone surrogate ({code}), which is not valid Unicode; "
            "send the text as valid UTF-8"
        )
