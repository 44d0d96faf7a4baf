"""The subset of a Hugging Face tokenizer the scoring layer uses (kept here: scoring is pure)."""

from __future__ import annotations

from typing import Any, Protocol


class Tokenizer(Protocol):
    @property
    def all_special_tokens(self) -> list[str]: ...

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]: ...

    def apply_chat_template(self, messages: Any, *args: Any, **kwargs: Any) -> Any: ...
