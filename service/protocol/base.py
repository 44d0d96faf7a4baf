"""What every wire model shares: the base model, the error shape, usage and budget options.

Unknown request fields are accepted and dropped (with a log line), so clients written for a newer
version, or SDKs that send extra fields (Cohere's, Jina's), keep working.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.protocol.limits import Reference, Text
from service.protocol.textcheck import check_unicode

logger = logging.getLogger(__name__)


class ServiceModel(BaseModel):
    # strict: a request is read as its schema says (schema fuzzing sent `"cache": 0` and got a
    # 200: lax mode took 0 for false and "5" for 5). A JSON integer still fills a number field.
    model_config = ConfigDict(extra="ignore", protected_namespaces=(), strict=True)

    @model_validator(mode="before")
    @classmethod
    def _log_dropped(cls, data: Any) -> Any:
        check_unicode(data)
        if isinstance(data, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            extra = sorted(k for k in data if k not in known)
            if extra:
                logger.info("%s: ignoring unknown fields %s", cls.__name__, extra)
        return data


def adapter_of(model: str | None) -> str | None:
    """The LoRA adapter a request's ``model`` names ('<served name>:<adapter>'), or None for
    the served model itself (no ``model``, or a name without ':', answered by the served model
    whatever it says, as OpenAI-shaped clients send their own names)."""
    if model is None or ":" not in model:
        return None
    return model.split(":", 1)[1]


def adapter_id(served: str, adapter: str | None) -> str:
    """The id of ``adapter`` of the model served as ``served`` (``served`` itself for None):
    what /v1/models lists and answers echo, the inverse of :func:`adapter_of`."""
    return served if adapter is None else f"{served}:{adapter}"


class ModelChoice(ServiceModel):
    """The OpenAI-style ``model`` field every judging request takes."""

    model: str | None = Field(
        default=None,
        max_length=256,
        description="Unset or any name without ':': the served model. "
        "'<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); "
        "another name with ':' is a 404 model_not_found.",
    )


def _non_blank(value: str, name: str) -> str:
    if not value.strip():
        raise ValueError(f"{name} must not be empty or whitespace only")
    return value


class QuestionResponse(ServiceModel):
    """One response to one question, both non-empty: what an outcome judgment reads."""

    question: Annotated[str, Text] = Field(description="The problem the response answers.")
    response: Annotated[str, Text] = Field(description="The candidate answer under judgment.")

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("response")
    @classmethod
    def _r(cls, v: str) -> str:
        return _non_blank(v, "response")


class ReferenceTexts(ServiceModel):
    """A reference and criteria shown to the judge (docs/methods.md E.4, H.1)."""

    reference: Annotated[str | None, Reference] = Field(
        default=None,
        description="The gold answer, or a reference solution (its final answer is compared).",
    )
    criteria: Annotated[str | None, Reference] = Field(
        default=None, description="What counts as correct (rubric text); shown to the model."
    )

    @field_validator("reference")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        return None if v is None else _non_blank(v, "reference")

    @field_validator("criteria")
    @classmethod
    def _crit(cls, v: str | None) -> str | None:
        return None if v is None else _non_blank(v, "criteria")


class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail


class Usage(BaseModel):
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    engine_calls: int = 0
    cached_judgments: int = Field(
        default=0, description="Judgments answered from the judgment cache (no tokens spent)."
    )

    def __add__(self, other: Usage) -> Usage:
        """Field-wise sum, e.g. ``sum(parts, Usage())`` for a request made of several parts."""
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields}
        )

    @classmethod
    def of(cls, counts: object) -> Usage:
        """From any object with these counts as attributes (the engine's ``TokenUsage``), so the
        wire layer needs no import of the engine."""
        return cls.model_validate(counts, from_attributes=True)


JudgeMode = Literal["direct", "reasoning"]
BudgetPolicy = Literal["refuse", "degrade"]


class BudgetOptions(ModelChoice):
    """A per-request token budget, checked against an estimate before anything runs."""

    max_eval_tokens: int | None = Field(
        default=None, ge=1, description="Refuse (or degrade) when the estimate is above this."
    )
    budget_policy: BudgetPolicy = Field(
        default="refuse",
        description="refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.",
    )


class BudgetInfo(BaseModel):
    """What the planner decided; present when the request set max_eval_tokens."""

    max_eval_tokens: int
    estimate: int
    degraded: bool = False
    note: str | None = None


class Metered(BaseModel):
    """A job's response: what it cost (``usage``) and what the planner decided (``budget``).

    Pydantic puts inherited fields first, and the wire order has them last, so a response
    lists ``Metered`` *before* the model holding its own fields::

        class OutcomeResponse(Metered, _OutcomeFields): ...  # score, ..., usage, budget
    """

    usage: Usage
    budget: BudgetInfo | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    owned_by: str = "verifier-service"
    max_model_len: int
    root: str
    device: str | None = Field(default=None, description="cpu or cuda, once the engine runs.")
    dtype: str | None = Field(
        default=None, description="The engine's dtype (what `dtype=auto` resolved to)."
    )
    kind: Literal["generative", "reward", "process_reward"] | None = Field(
        default=None,
        description="generative: a judge read at a verdict slot; reward: a sequence reward "
        "model; process_reward: a PRM (both on vLLM's pooling runner). From the settings "
        "or a local model's config.json; null where neither tells, until the engine runs.",
    )
    pooling_task: str | None = Field(
        default=None, description="Pooling kinds: classify or token_classify (/pooling's task)."
    )
    step_tag: str | None = Field(default=None, description="process_reward: the step tag.")
    code_execution: bool = Field(
        default=False,
        description="Code sent with requests is run in the sandbox (/run_code, `tests`, code "
        "specs); off: those answer 422 code_execution_disabled.",
    )
    code_languages: list[str] | None = Field(
        default=None,
        description="The languages runs take, once a sandbox runs in this process.",
    )
    parent: str | None = Field(
        default=None,
        description="A LoRA adapter: the served model it adapts (its id is "
        "'<parent>:<adapter>', the name a request's `model` gives).",
    )
    workers: int | None = Field(
        default=None,
        description="Worker processes reading this model's queue, seen within "
        "queue.claim_idle_ms (a model run in the API process counts as one); null when the "
        "queue cannot be read.",
    )
    ready: bool = Field(
        default=False, description="Its engine runs here, or a worker reads its queue."
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ModelReadiness(BaseModel):
    name: str
    ready: bool = Field(description="Its engine runs here, or a worker reads its queue.")
    workers: int | None = Field(description="As in /v1/models.")


class Readiness(BaseModel):
    status: Literal["ready", "starting", "failed"]
    model: str = Field(description="The default model (what answers a request naming none).")
    detail: str | None = None
    models: list[ModelReadiness] = Field(
        default_factory=list,
        description="Each served model, once the process is ready: requests for a model with "
        "no worker wait in its queue until one comes or their deadline passes.",
    )
