"""The subset of a Hugging Face tokenizer the scoring layer uses (kept here: scoring is pure)."""

from __future__ import annotations

from typing import Any, Protocol


class Tokenizer(Protocol):
    @property
    def all_special_tokens(self) -> list[str]: ...

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]: ...

    def decode(self, ids: Any, *args: Any, **kwargs: Any) -> str: ...

    def apply_chat_template(self, messages: Any, *args: Any, **kwargs: Any) -> Any: ...


def special_tokens(tokenizer: Tokenizer) -> list[str]:
    """Every text the tokenizer reads as one control token: its special tokens and all its
    added tokens (``all_special_tokens`` omits added ones such as ``<file_sep>``, which the
    backend still matches in plain text)."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    contents = (str(getattr(tok, "content", tok)) for tok in added.values())
    return sorted({*tokenizer.all_special_tokens, *contents})


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` without added special tokens (special tokens written in the text
    are still recognised).

    Goes straight to the fast tokenizer's Rust backend where there is one: the same ids
    (tested), but vLLM's tokenizer wrapper around ``encode`` cost about a third of the API
    process's event-loop time under MCQ load.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return list(backend.encode(text, add_special_tokens=False).ids)
    return list(tokenizer.encode(text, add_special_tokens=False))
