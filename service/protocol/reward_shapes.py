"""The RL stacks' own reward shapes, answered by ``/v1/rewards``' job (docs/api.md).

- **slime** (``--rm-type remote_rm --rm-url URL``): one POST per sample of exactly
  ``{"prompt", "response", "label"}``; the reply's JSON is the reward, or with ``--reward-key
  reward`` the key of a dict. Its ``--group-rm`` sends the same body per sample, concurrently.
- **NeMo Gym** (a resources server's ``POST /verify``): a Responses-API ``response`` with the
  row's ``responses_create_params`` and task fields; the reply echoes the body and adds
  ``reward`` (and ``reward_components`` for a multi-reward task).

Each becomes one :class:`RewardItem`: the sample's verification spec is the slime ``label``
when it is a spec, the NeMo Gym row's ``verifier`` (or ``components``), else read from the
usual fields (a gold answer: ``math``, or ``choice`` with options; nothing: ``model``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from service.protocol.base import ServiceModel
from service.protocol.limits import Reference, Text
from service.protocol.rewards import RewardItem


def _text_of(content: Any) -> str:
    """A message content: a string, or the text of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def last_user_text(messages: Any) -> str:
    """The last user message's text of a message list (slime's untemplated prompt, a Responses
    ``input``); a string is itself."""
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                return _text_of(m.get("content"))
    return ""


def label_spec(label: Any) -> dict[str, Any]:
    """The item fields a label stands for: a spec (a dict with ``type``), components (a dict
    with ``components``), a gold answer (a string or a number: ``math``), or nothing
    (``None`` or blank: ``model``)."""
    if isinstance(label, dict):
        if "components" in label:
            return {k: label[k] for k in ("components", "formula") if k in label}
        return {"verifier": label}
    if isinstance(label, bool) or not isinstance(label, str | int | float):
        if label is None:
            return {"verifier": {"type": "model"}}
        raise ValueError(
            f"label is {type(label).__name__}; send a gold answer (a string or a number), a "
            "verification spec ({'type': ...}), components, or null"
        )
    text = str(label)
    if not text.strip():
        return {"verifier": {"type": "model"}}
    return {"verifier": {"type": "math", "reference": text}}


# --- slime ---------------------------------------------------------------------------------------


class SlimeRewardRequest(ServiceModel):
    """slime's remote reward body, exactly as its ``remote_rm`` posts it."""

    prompt: str | list[dict[str, Any]] = Field(
        description="The prompt: a string (templated or not), or a message list (the last user "
        "message is the task)."
    )
    response: Annotated[str, Text] = Field(description="The generated text.")
    label: Any = Field(
        default=None,
        description="The dataset's label: a gold answer (math: rule, then the judge), a "
        "verification spec as /v1/rewards takes it (`{type: ...}`), components (`{components, "
        "formula}`), or null (the judge alone).",
    )

    def item(self) -> RewardItem:
        return RewardItem.model_validate(
            {
                "prompt": last_user_text(self.prompt),
                "response": self.response,
                **label_spec(self.label),
            }
        )


# --- NeMo Gym ------------------------------------------------------------------------------------


class NemoCreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    input: str | list[dict[str, Any]]


class NemoResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    output: list[dict[str, Any]] = Field(default_factory=list)

    def final_text(self) -> str:
        """The last assistant message's output_text parts (not every message joined, as
        ``output_text`` does: an agent's earlier messages are not its answer)."""
        for item in reversed(self.output):
            if item.get("type", "message") == "message" and item.get("role") == "assistant":
                text = "".join(
                    str(p.get("text", ""))
                    for p in item.get("content") or []
                    if isinstance(p, dict) and p.get("type") == "output_text"
                )
                if text:
                    return text
        return ""


class NemoVerifyRequest(BaseModel):
    """NeMo Gym's ``BaseVerifyRequest`` and the row's task fields (all echoed back)."""

    model_config = ConfigDict(extra="allow")
    responses_create_params: NemoCreateParams
    response: NemoResponse
    verifier: dict[str, Any] | None = Field(
        default=None, description="The row's verification spec, as /v1/rewards takes it."
    )
    components: dict[str, Any] | None = None
    formula: str | None = None
    expected_answer: Annotated[str | None, Reference] = Field(
        default=None,
        description="Without a spec: the gold answer (math; choice when `options` are sent).",
    )
    options: list[Any] | None = Field(
        default=None, description="NeMo Gym's MCQ options ([{'A': text}, ...] or texts)."
    )

    def item(self) -> RewardItem:
        fields: dict[str, Any]
        if self.components is not None:
            fields = {"components": self.components, "formula": self.formula}
        elif self.verifier is not None:
            fields = {"verifier": self.verifier}
        elif self.expected_answer is not None and self.options:
            fields = {"verifier": {"type": "choice", "answer": self.expected_answer}}
        else:
            fields = label_spec(self.expected_answer)
        return RewardItem.model_validate(
            {
                "prompt": last_user_text(self.responses_create_params.input),
                "response": self.response.final_text(),
                **fields,
            }
        )


class NemoVerifyResponse(NemoVerifyRequest):
    """NeMo Gym's ``BaseVerifyResponse`` (the request echoed, ``reward``) with
    ``reward_components`` when the row has components, and this service's detail."""

    reward: float
    reward_components: dict[str, float] | None = None
    decided_by: str
    extracted_answer: str | None = None
    timed_out: bool = False
    failed: str | None = None
