"""Recovering (question, response) from a decoded ``prompt + response`` string (pure).

Order: the query starts with its prompt (OpenRLHF sends both) -> cut there; else the last
occurrence of the configured separator; else the last occurrence of the chat template's
assistant marker. The question is then the last user turn's text when the template's user
marker is present, and the tokenizer's special tokens (end of turn, EOS, padding) are removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.scoring.tokenizer import Tokenizer

_USER_SENTINEL = "\u2063QUESTION\u2063"


class BoundaryNotFound(ValueError):
    """No way to tell where the response starts in a query."""


@dataclass(frozen=True, slots=True)
class ChatMarkers:
    """Text around a user turn's content in the chat template ('' where unknown)."""

    user: str  # before the content, e.g. "<|im_start|>user\n"
    assistant: str  # after it, up to the response, e.g. "<|im_end|>\n<|im_start|>assistant\n"
    special: tuple[str, ...]  # special-token strings removed from both texts


def chat_markers(tokenizer: Tokenizer) -> ChatMarkers:
    """The markers of ``tokenizer``'s chat template, read by rendering a sentinel question."""
    special = tuple(sorted(set(tokenizer.all_special_tokens), key=len, reverse=True))
    try:
        text: Any = tokenizer.apply_chat_template(
            [{"role": "user", "content": _USER_SENTINEL}],
            tokenize=False,
            add_generation_prompt=True,
        )
    except Exception:  # a tokenizer without a chat template: separators only
        return ChatMarkers("", "", special)
    before, _, after = str(text).partition(_USER_SENTINEL)
    # The user marker starts at the last special token before the content.
    starts = [before.rfind(tok) for tok in special if tok and tok in before]
    user = before[max(starts) :] if starts else ""
    return ChatMarkers(user=user, assistant=after, special=special)


def _strip_special(text: str, special: tuple[str, ...]) -> str:
    for tok in special:
        if tok:
            text = text.replace(tok, "")
    return text.strip()


def split_query(
    query: str, prompt: str | None, separator: str, markers: ChatMarkers
) -> tuple[str, str]:
    """(question, response) of one query; raises ``BoundaryNotFound``."""
    if prompt and query.startswith(prompt):
        head, response = prompt, query[len(prompt) :]
    elif separator and separator in query:
        cut = query.rfind(separator)
        head, response = query[:cut], query[cut + len(separator) :]
    elif markers.assistant and markers.assistant.strip() and markers.assistant in query:
        cut = query.rfind(markers.assistant)
        head, response = query[:cut], query[cut + len(markers.assistant) :]
    else:
        raise BoundaryNotFound(
            "cannot tell where the response starts: send `prompts`, or set a separator "
            "(VERIFIER_REWARD__SEPARATOR or `separator`); the chat template's assistant marker "
            f"{markers.assistant!r} is not in the query"
        )
    if markers.assistant and head.endswith(markers.assistant):
        head = head[: -len(markers.assistant)]  # a prompt that ends in the generation prompt
    if markers.user and markers.user in head:
        head = head[head.rfind(markers.user) + len(markers.user) :]
    return _strip_special(head, markers.special), _strip_special(response, markers.special)
