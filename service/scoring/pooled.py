"""Prompts and reads for trained reward models and PRMs served by vLLM's pooling runner
(docs/methods.md G).

A sequence RM reads the chat-templated (question, response) and returns one row of class
logits; a PRM reads the steps joined by its step tag and returns one row at every tag. The
reward of a row is a log-odds, the same scale as the generative judge's verdict logit, so the
aggregations, first-error index and fusion apply unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from service.scoring.prompts import defuse
from service.scoring.tokenizer import Tokenizer, encode, special_tokens

EngineKind = Literal["generative", "reward", "process_reward"]
PoolingTask = Literal["classify", "token_classify"]

# Architecture name endings and the kind each serves (vLLM's own naming).
_KIND_BY_SUFFIX: Final[tuple[tuple[str, EngineKind], ...]] = (
    ("ForProcessRewardModel", "process_reward"),
    ("ForRewardModel", "reward"),
    ("ForSequenceClassification", "reward"),
)
# The step tag a PRM architecture was trained with, where the checkpoint does not say.
DEFAULT_STEP_TAGS: Final[dict[str, str]] = {"Qwen2ForProcessRewardModel": "<extra_0>"}


def kind_of(architectures: Sequence[str]) -> EngineKind:
    """The engine kind a checkpoint's ``architectures`` ask for (generative if none match)."""
    for arch in architectures:
        for suffix, kind in _KIND_BY_SUFFIX:
            if arch.endswith(suffix):
                return kind
    return "generative"


def task_of(kind: EngineKind, architectures: Sequence[str]) -> PoolingTask:
    """vLLM's pooling task for a kind: a ``*ForSequenceClassification`` pools the last token
    (classify); ``*ForRewardModel`` and PRMs return token rows (token_classify)."""
    if kind == "reward" and any(a.endswith("ForSequenceClassification") for a in architectures):
        return "classify"
    return "token_classify"


def step_tag_of(architectures: Sequence[str], setting: str | None) -> str | None:
    if setting:
        return setting
    return next((DEFAULT_STEP_TAGS[a] for a in architectures if a in DEFAULT_STEP_TAGS), None)


def _logsumexp(xs: Sequence[float]) -> float:
    top = max(xs)
    return top + math.log(sum(math.exp(x - top) for x in xs))


def row_logit(row: Sequence[float], positive: int) -> float:
    """A row's log-odds of the positive class: a one-logit head's value itself (a
    Bradley-Terry reward), else ``l[pos] - logsumexp(others)`` (two classes: ``l1 - l0``), so
    that ``sigmoid`` of it is the positive class's softmax probability."""
    if len(row) == 1:
        return float(row[0])
    if not 0 <= positive < len(row):
        raise ValueError(f"positive class {positive} outside the model's {len(row)} classes")
    return float(row[positive]) - _logsumexp([x for i, x in enumerate(row) if i != positive])


def _messages(system: str | None, question: str, answer: str) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def _render(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    if not isinstance(text, str):
        raise TypeError("chat template did not render to text")
    return encode(tokenizer, text)


def reward_prompt_ids(
    tokenizer: Tokenizer, question: str, response: str, system: str | None = None
) -> list[int]:
    """The RM's input: its chat template over (question, response), as RMs are trained.
    Special tokens written in the texts are broken so a text cannot close its own turn."""
    special = special_tokens(tokenizer)
    question, response = defuse(question, (), special), defuse(response, (), special)
    return _render(tokenizer, _messages(system, question, response))


@dataclass(frozen=True, slots=True)
class StepPrompt:
    """A PRM's input and the position of the tag after each step."""

    ids: list[int]
    tag_positions: list[int]


def step_prompt(
    tokenizer: Tokenizer,
    question: str,
    steps: Sequence[str],
    tag: str,
    system: str | None = None,
) -> StepPrompt:
    """Steps joined by the step tag, with one after the last (the PRM's training format, e.g.
    Qwen2.5-Math-PRM's ``"<extra_0>".join(steps) + "<extra_0>"``). Raises ValueError unless
    the tag reads as one token exactly once after every step."""
    tag_ids = encode(tokenizer, tag)
    if len(tag_ids) != 1:
        raise ValueError(f"step tag {tag!r} is {len(tag_ids)} tokens for this tokenizer, not 1")
    special = [*special_tokens(tokenizer), tag]
    question = defuse(question, (), special)
    safe = [defuse(step, (), special) for step in steps]
    ids = _render(tokenizer, _messages(system, question, "".join(s + tag for s in safe)))
    positions = [i for i, t in enumerate(ids) if t == tag_ids[0]]
    if len(positions) != len(steps):
        raise ValueError(
            f"the step tag {tag!r} reads {len(positions)} times for {len(steps)} steps: a step "
            "holds the tag, or the tag merges with the text around it"
        )
    return StepPrompt(ids=ids, tag_positions=positions)
