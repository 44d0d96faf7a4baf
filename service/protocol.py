"""Every wire model: the single source of the HTTP contract.

Unknown request fields are accepted and dropped (with a log line), so clients written for a newer
version, or SDKs that send extra fields (Cohere's, Jina's), keep working.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.engine.base import TokenUsage

logger = logging.getLogger(__name__)


class ServiceModel(BaseModel):
    model_config = ConfigDict(extra="ignore", protected_namespaces=())

    @model_validator(mode="before")
    @classmethod
    def _log_dropped(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            extra = sorted(k for k in data if k not in known)
            if extra:
                logger.info("%s: ignoring unknown fields %s", cls.__name__, extra)
        return data


def _non_blank(value: str, name: str) -> str:
    if not value.strip():
        raise ValueError(f"{name} must not be empty or whitespace only")
    return value


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

    @classmethod
    def of(cls, usage: TokenUsage) -> Usage:
        return cls(
            prompt_tokens=usage.prompt_tokens,
            generated_tokens=usage.generated_tokens,
            cached_tokens=usage.cached_tokens,
            total_tokens=usage.total_tokens,
            engine_calls=usage.engine_calls,
        )


JudgeMode = Literal["direct", "reasoning"]


class JudgeOptions(ServiceModel):
    """Options shared by every judging endpoint."""

    mode: JudgeMode = Field(
        default="direct",
        description="direct: read the verdict at once; reasoning: write a rationale first.",
    )
    reasoning_tokens: int = Field(
        default=256, ge=1, description="Rationale budget per judgment (reasoning mode)."
    )
    samples: int = Field(
        default=1, ge=1, description="Sampled rationales per judgment; scores are averaged."
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Rationale sampling temperature; default 0 for one sample, 0.7 for several.",
    )
    seed: int | None = Field(default=None, description="Base seed; sample i uses seed + i.")

    @model_validator(mode="after")
    def _samples_need_reasoning(self) -> JudgeOptions:
        if self.samples > 1 and self.mode != "reasoning":
            raise ValueError(
                "samples > 1 needs mode='reasoning': a direct verdict reads exact label "
                "probabilities, so repeating it adds nothing"
            )
        return self

    def resolved_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.samples == 1 else 0.7


class OutcomeRequest(JudgeOptions):
    """POST /v1/judge/outcome."""

    question: str = Field(description="The problem the response answers.")
    response: str = Field(description="The candidate answer under judgment.")
    return_rationale: bool = False

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("response")
    @classmethod
    def _r(cls, v: str) -> str:
        return _non_blank(v, "response")


class SampleJudgment(BaseModel):
    score: float
    logit: float
    rationale: str | None = None
    rationale_tokens: int = 0
    rationale_finish: str | None = Field(
        default=None,
        description=(
            "'verdict' (wrote the marker), 'eos' (ended early) or 'length' (budget ran out)."
        ),
    )


class OutcomeResponse(BaseModel):
    score: float = Field(description="P(correct) = sigmoid(logit).")
    logit: float = Field(description="logp('1') - logp('0'); for several samples logit(score).")
    verdict: int = Field(description="1 if score >= 0.5 else 0.")
    mode: JudgeMode
    model: str
    rationale: str | None = None
    samples: list[SampleJudgment] | None = None
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    owned_by: str = "verifier-service"
    max_model_len: int
    root: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Readiness(BaseModel):
    status: Literal["ready", "starting", "failed"]
    model: str
    detail: str | None = None
