"""Token counts of engine calls: a leaf shared by the engine, serving and the wire models.

It lives apart from ``service.engine`` so that ``service.protocol`` (the wire layer) can turn
counts into its ``Usage`` without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TokenUsage"]


@dataclass(slots=True)
class TokenUsage:
    """Tokens one or more engine calls consumed."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_tokens: int = 0
    engine_calls: int = 0
    cached_judgments: int = 0  # answered from the judgment cache: no tokens spent

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    def add(self, other: TokenUsage) -> TokenUsage:
        self.prompt_tokens += other.prompt_tokens
        self.generated_tokens += other.generated_tokens
        self.cached_tokens += other.cached_tokens
        self.engine_calls += other.engine_calls
        self.cached_judgments += other.cached_judgments
        return self
