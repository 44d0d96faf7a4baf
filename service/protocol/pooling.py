"""POST /classify and /pooling in vLLM 0.32's shapes (``vllm/entrypoints/pooling/classify``
and ``.../pooling/protocol.py``), so verl's and AReaL's reward clients work by pointing at us.

A request holds ``input`` (a text, texts, token ids or lists of them) or ``messages`` (one
chat, rendered by the model's template). Fields vLLM takes that change nothing here are
accepted; the ones this service does not implement are refused by name when set.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import Field, model_validator

from service.protocol.base import Metered, ModelChoice, ServiceModel, Usage
from service.protocol.limits import Bounded

PoolingTask = Literal["classify", "token_classify"]
# vLLM's other tasks, refused with a message (this service serves reward models only).
OtherTask = Literal["embed", "token_embed", "plugin", "score"]
PoolingInput = str | list[str] | list[int] | list[list[int]]
# vLLM fields that would change the input here; refused by name when set.
_UNSUPPORTED = ("truncate_prompt_tokens", "chat_template", "cache_salt", "mm_processor_kwargs")


class PoolingInputs(ModelChoice):
    """What /classify and /pooling share: the input, its rendering and the activation."""

    user: str | None = None
    input: PoolingInput | None = Field(
        default=None, description="A text, texts, token ids, or lists of token ids."
    )
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="One chat, rendered with the model's chat template."
    )
    add_special_tokens: bool | None = Field(
        default=None,
        description="Add the tokenizer's special tokens (BOS). Unset: true for `input`, false "
        "for `messages` (the template holds them), as vLLM does.",
    )
    add_generation_prompt: bool = False
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    use_activation: bool | None = Field(
        default=None,
        description="Unset or true: probabilities (sigmoid for one class, softmax otherwise); "
        "false: raw logits, as verl and AReaL ask.",
    )
    request_id: str | None = None
    priority: int = 0
    truncate_prompt_tokens: int | None = None
    chat_template: str | None = None
    cache_salt: str | None = None
    mm_processor_kwargs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_input(self) -> PoolingInputs:
        if (self.input is None) == (self.messages is None):
            raise ValueError("give exactly one of `input` or `messages`")
        if isinstance(self.input, list) and not self.input:
            raise ValueError("input must not be empty")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must not be empty")
        if self.add_generation_prompt and self.continue_final_message:
            raise ValueError("add_generation_prompt and continue_final_message exclude each other")
        unsupported = [n for n in _UNSUPPORTED if getattr(self, n) is not None]
        if self.priority != 0:
            unsupported.append("priority")
        if unsupported:
            raise ValueError(
                f"{', '.join(unsupported)}: not supported by this service; leave unset"
            )
        return self

    def bounded_parts(self) -> list[Bounded]:
        """Each text input and message content, and the inputs as documents."""
        items = self.inputs()
        parts = [
            Bounded(f"input[{i}]", t, "text") for i, t in enumerate(items) if isinstance(t, str)
        ]
        for i, m in enumerate(self.messages or []):
            parts.append(Bounded(f"messages[{i}].content", str(m.get("content") or ""), "text"))
        if self.input is not None:
            parts.append(Bounded("input", len(items), "documents", count=True))
        return parts

    def inputs(self) -> list[str | list[int]]:
        """The prompts, one per returned item (a chat is one)."""
        value = self.input
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if all(isinstance(v, int) for v in value):
            return [list(value)]  # type: ignore[arg-type]
        return list(value)  # type: ignore[arg-type]


class ClassifyRequest(PoolingInputs):
    """POST /classify: one row of class scores per input (a sequence RM's reward)."""


class PoolingRequest(PoolingInputs):
    """POST /pooling: the model's pooling output per input (token rows for a PRM)."""

    task: PoolingTask | OtherTask | None = Field(
        default=None, description="Unset: the model's own (classify or token_classify)."
    )
    encoding_format: Literal["float", "base64", "bytes", "bytes_only"] = "float"
    dimensions: int | None = None

    @model_validator(mode="after")
    def _supported(self) -> PoolingRequest:
        if self.encoding_format != "float":
            raise ValueError("encoding_format: only 'float' is supported here")
        if self.dimensions is not None:
            raise ValueError("dimensions: embeddings are not served here; leave unset")
        if self.task is not None and self.task not in ("classify", "token_classify"):
            raise ValueError(
                f"task={self.task!r}: this service serves reward models and PRMs "
                "(classify, token_classify)"
            )
        return self


class PoolingUsage(Usage):
    """Our usage with vLLM's field names beside it (pooling generates nothing)."""

    completion_tokens: int = 0
    prompt_tokens_details: dict[str, int] | None = None


class ClassificationData(ServiceModel):
    index: int
    label: str | None
    probs: list[float]
    num_classes: int


def _created() -> int:
    return int(time.time())


class ClassificationResponse(Metered):
    id: str = Field(default_factory=lambda: f"classify-{uuid.uuid4().hex}")
    object: str = "list"
    created: int = Field(default_factory=_created)
    model: str
    data: list[ClassificationData]
    usage: PoolingUsage


class PoolingResponseData(ServiceModel):
    index: int
    object: str = "pooling"
    data: list[list[float]] | list[float]


class PoolingResponse(Metered):
    id: str = Field(default_factory=lambda: f"pool-{uuid.uuid4().hex}")
    object: str = "list"
    created: int = Field(default_factory=_created)
    model: str
    data: list[PoolingResponseData]
    usage: PoolingUsage
