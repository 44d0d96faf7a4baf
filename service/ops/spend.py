"""What one job spent on the engine, counted as its engine requests end.

Whoever runs a job opens a :class:`Spend` with :func:`counting` around its handler; the
engines add to the current one as each request finishes or is aborted. A job cancelled because
its caller left then reports what it really spent, and its quota is settled for that.

Example::

    with counting() as spent:
        result = await handler(job)
    spent.total  # prompt plus generated tokens of every engine request it made
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class Spend:
    """Tokens a job's engine requests consumed (mutable: tasks the job spawns share it)."""

    prompt_tokens: int = 0
    generated_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    def add(self, prompt_tokens: int, generated_tokens: int = 0) -> None:
        self.prompt_tokens += max(0, prompt_tokens)
        self.generated_tokens += max(0, generated_tokens)


_current: ContextVar[Spend | None] = ContextVar("spend", default=None)


@contextmanager
def counting() -> Iterator[Spend]:
    """A fresh counter that engine requests made in this context (and its tasks) add to."""
    spend = Spend()
    token = _current.set(spend)
    try:
        yield spend
    finally:
        _current.reset(token)


def record(prompt_tokens: int, generated_tokens: int = 0) -> None:
    """Add one engine request's tokens to the current job's counter; no job, no count.

    An aborted request still ran its prefill: count at least its prompt."""
    spend = _current.get()
    if spend is not None:
        spend.add(prompt_tokens, generated_tokens)
