"""Request limits, declared once on the wire models and checked in one place before queueing.

A field says what it is with an ``Annotated`` marker, e.g.
``question: Annotated[str, Text]`` or ``responses: Annotated[list[str], Texts, Documents]``;
:func:`bounded` walks a request (nested models and lists too) and yields each bounded value
with its field path and limit kind. The API maps a kind to its setting and status
(``service.api.limits.enforce``) and the schema states it (``service.app``).

A model whose bounded values are not plain fields (the inputs of a pooling request, a reward
request's labels) yields them from a ``bounded_parts()`` method.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import BaseModel

LimitKind = Literal["text", "reference", "documents", "steps", "samples", "reasoning_tokens"]
LIMIT_KINDS: Final[tuple[LimitKind, ...]] = (
    "text",
    "reference",
    "documents",
    "steps",
    "samples",
    "reasoning_tokens",
)


@dataclass(frozen=True)
class Limit:
    """A field's limit: ``kind`` names the setting; ``each`` applies it to every item of a
    list, ``count`` to the list's length (else to the value itself)."""

    kind: LimitKind
    each: bool = False
    count: bool = False


Text: Final = Limit("text")
"""A text up to ``max_text_chars``; over is a 413."""
Texts: Final = Limit("text", each=True)
"""A list of texts, each up to ``max_text_chars``."""
Reference: Final = Limit("reference")
"""A reference or criteria up to ``max_text_chars``; over is a 422 (one field of a judgment)."""
Documents: Final = Limit("documents", count=True)
"""A list of at most ``max_documents`` items."""
MaxSteps: Final = Limit("steps")
"""A step count up to ``max_steps``."""
Samples: Final = Limit("samples")
"""Sampled rationales up to ``max_samples``."""
ReasoningTokens: Final = Limit("reasoning_tokens")
"""A rationale budget up to ``max_reasoning_tokens``."""


@dataclass(frozen=True)
class Bounded:
    """One bounded value: a text (measured in characters), a number, or a list's length
    (``count``)."""

    path: str
    value: str | int
    kind: LimitKind
    count: bool = False

    @property
    def size(self) -> int:
        return len(self.value) if isinstance(self.value, str) else self.value


def limits_of(model: type[BaseModel], name: str) -> list[Limit]:
    """The limit markers of one field of ``model``."""
    return [m for m in model.model_fields[name].metadata if isinstance(m, Limit)]


def _apply(limit: Limit, path: str, value: object) -> Iterator[Bounded]:
    if limit.count:
        if isinstance(value, list):
            yield Bounded(path, len(value), limit.kind, count=True)
    elif limit.each:
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    yield Bounded(f"{path}[{i}]", item, limit.kind)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        yield Bounded(path, value, limit.kind)


def _nested(path: str, value: object) -> Iterator[Bounded]:
    if isinstance(value, BaseModel):
        yield from bounded(value, f"{path}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield from bounded(item, f"{path}[{i}].")
    elif isinstance(value, dict):  # named models (a reward item's components)
        for key, item in value.items():
            if isinstance(item, BaseModel):
                yield from bounded(item, f"{path}.{key}.")


def bounded(req: BaseModel, prefix: str = "") -> Iterator[Bounded]:
    """Every bounded value of ``req``, its nested models and lists, with its field path."""
    for name, field in type(req).model_fields.items():
        value = getattr(req, name)
        if value is None:
            continue
        wire = field.alias or name  # the path names the field as the request spells it
        for limit in limits_of(type(req), name):
            yield from _apply(limit, prefix + wire, value)
        yield from _nested(prefix + wire, value)
    parts = getattr(req, "bounded_parts", None)
    if callable(parts):
        for part in parts():
            yield Bounded(prefix + part.path, part.value, part.kind, part.count)
