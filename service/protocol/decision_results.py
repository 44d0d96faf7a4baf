"""Wire models of the ``POST /v1/decisions`` answer: OpenAI's ``decision`` type field for field
(docs/methods.md F), with this service's optional extensions."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from service.protocol.base import Metered, Usage
from service.protocol.calibrated import DecisionCalibrationInfo


class PredicateAnswer(BaseModel):
    type: Literal["predicate"] = "predicate"
    name: str | None = None
    probability: float
    raw_probability: float | None = Field(
        default=None,
        description="Extension: the raw read when a calibration mapped `probability`.",
    )


class ChoiceProbability(BaseModel):
    value: str | bool
    probability: float


class ChoiceAnswer(BaseModel):
    type: Literal["choice"] = "choice"
    name: str | None = None
    choice: str | bool
    probabilities: list[ChoiceProbability] = Field(description="One per choice, in their order.")
    confidence: float = Field(description="The probability of the chosen value.")
    passes: int = Field(
        default=1,
        description="Extension: the reads averaged (cyclic orders of the choices x samples).",
    )
    raw_probabilities: list[ChoiceProbability] | None = Field(
        default=None,
        description="Extension: the raw read when a calibration mapped `probabilities`.",
    )


class ScoreProbability(BaseModel):
    label: str
    value: int = Field(description="The level's index: 0 for the first level.")
    probability: float


class ScoreAnswer(BaseModel):
    type: Literal["score"] = "score"
    name: str | None = None
    score: float = Field(description="The expected level index, sum of value * probability.")
    probabilities: list[ScoreProbability]
    confidence: float = Field(description="The probability of the most likely level.")
    raw_score: float | None = Field(
        default=None, description="Extension: `score` of the raw read, when calibrated."
    )
    raw_probabilities: list[ScoreProbability] | None = Field(
        default=None,
        description="Extension: the raw read when a calibration mapped `probabilities`.",
    )


class RefusalAnswer(BaseModel):
    """No answer to this question (its prompt does not fit the model, or its labels got less
    probability than min_label_probability); the other questions are answered."""

    type: Literal["refusal"] = "refusal"
    name: str | None = None


Answer = Annotated[
    PredicateAnswer | ChoiceAnswer | ScoreAnswer | RefusalAnswer, Field(discriminator="type")
]


class InputTokensDetails(BaseModel):
    cache_write_tokens: int = Field(
        default=0, description="Always 0: no explicit cache writes (vLLM caches by content)."
    )
    cached_tokens: int = 0


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class DecisionUsage(Usage):
    """OpenAI's usage fields, then this service's (every route reports the latter)."""

    input_tokens: int = 0
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: int = 0
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)

    @classmethod
    def of_counts(cls, counts: object, reasoning_tokens: int = 0) -> DecisionUsage:
        """From the engine's counts (any object with the ``Usage`` attributes)."""
        base = Usage.of(counts)
        return cls(
            **base.model_dump(),
            input_tokens=base.prompt_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=base.cached_tokens),
            output_tokens=base.generated_tokens,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning_tokens),
        )


class _DecisionFields(BaseModel):
    answers: list[Answer] = Field(description="In question order.")
    model: str


class DecisionResponse(Metered, _DecisionFields):
    usage: DecisionUsage
    calibration: DecisionCalibrationInfo | None = Field(
        default=None,
        description="Extension: the probability calibration the answers went through (each "
        "answer of a fitted type carries its raw read beside); null: raw reads.",
    )
