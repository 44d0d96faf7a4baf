"""Recovering (question, response) from OpenRLHF's decoded prompt + response (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from service.scoring.reward import BoundaryNotFound, ChatMarkers, chat_markers, split_query

Q, A = "What is 2 + 2?", "2 + 2 = 4. The answer is 4."


def chat(tokenizer: Any, question: str = Q) -> str:
    return str(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
    )


def test_markers_come_from_the_models_chat_template(tokenizer: Any) -> None:
    m = chat_markers(tokenizer)
    assert m.user == "<|im_start|>user\n"
    assert m.assistant == "<|im_end|>\n<|im_start|>assistant\n"
    assert "<|im_end|>" in m.special


def test_a_query_that_starts_with_its_prompt_is_cut_there(tokenizer: Any) -> None:
    prompt = chat(tokenizer)
    query = prompt + A + tokenizer.eos_token
    assert split_query(query, prompt, "", chat_markers(tokenizer)) == (Q, A)


def test_without_a_prompt_the_last_assistant_marker_cuts(tokenizer: Any) -> None:
    # The response itself mentions the marker text of an earlier turn: the last one wins.
    first = chat(tokenizer, "Earlier question") + "Earlier answer<|im_end|>\n"
    query = first + "<|im_start|>user\n" + Q + "<|im_end|>\n<|im_start|>assistant\n" + A
    assert split_query(query, None, "", chat_markers(tokenizer)) == (Q, A)


def test_a_separator_wins_over_the_template(tokenizer: Any) -> None:
    query = f"Question: {Q}\nAnswer: {A}"
    assert split_query(query, None, "\nAnswer:", chat_markers(tokenizer)) == (f"Question: {Q}", A)


def test_a_prompt_that_does_not_prefix_the_query_falls_through(tokenizer: Any) -> None:
    query = chat(tokenizer) + A
    assert split_query(query, "something else", "", chat_markers(tokenizer)) == (Q, A)


def test_no_boundary_is_an_error_naming_the_fixes(tokenizer: Any) -> None:
    with pytest.raises(BoundaryNotFound, match="VERIFIER_REWARD__SEPARATOR"):
        split_query("plain text without markers", None, "", chat_markers(tokenizer))


class NoTemplate:
    all_special_tokens = ["</s>"]

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
        return []

    def apply_chat_template(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("no chat template")


def test_a_tokenizer_without_a_template_needs_a_separator() -> None:
    m = chat_markers(NoTemplate())
    assert m == ChatMarkers("", "", ("</s>",))
    assert split_query(f"{Q} ||| {A}</s>", None, "|||", m) == (Q, A)
    with pytest.raises(BoundaryNotFound):
        split_query(f"{Q} {A}", None, "", m)
