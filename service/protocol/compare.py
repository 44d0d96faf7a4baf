"""Wire models of ``POST /v1/judge/compare`` (docs/methods.md H) and the compare options that
``/v1/score``, ``/v1/rerank`` and ``/get_reward`` take with ``method: "compare"``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, field_validator, model_validator

from service.protocol.base import BudgetOptions, Metered, ReferenceTexts, ServiceModel, _non_blank
from service.protocol.calibrated import NO_CALIBRATION, CalibrationInfo, prior_part
from service.protocol.limits import Documents, ReasoningTokens, Samples, Text, Texts
from service.scoring.compare import LABELS, CompareAggregation, CompareDebias, CompareMode

MIN_RESPONSES = 2
MAX_LIST = len(LABELS)  # a list read letters its responses A-Z
# Reads of one request (orders x samples), as for decisions: vLLM's default batch of 256
# sequences. Pairwise with both orders reads n(n-1) orders: 16 responses are 240 reads.
MAX_READS = 256

DEBIAS_OF: dict[CompareMode, tuple[CompareDebias, ...]] = {
    "pairwise": ("swap", "none"),
    "listwise": ("permute", "pride", "none"),
}
AGGREGATIONS_OF: dict[CompareMode, tuple[CompareAggregation, ...]] = {
    "pairwise": ("bradley_terry", "win_rate"),
    "listwise": ("mean_probability", "bradley_terry", "win_rate"),
}


class CompareSpec(ServiceModel):
    """How responses are compared: the fields of /v1/judge/compare, and the ``compare``
    object of /v1/score, /v1/rerank and /get_reward with ``method: "compare"``."""

    mode: CompareMode = Field(
        default="pairwise",
        description="pairwise: every pair read (in both orders by default); listwise: all "
        "responses in one prompt, 'which is best' read over their letters.",
    )
    aggregation: CompareAggregation | None = Field(
        default=None,
        description="pairwise: bradley_terry (default) or win_rate; listwise: mean_probability "
        "(default), or either of those over the listwise preference matrix.",
    )
    debias: CompareDebias | None = Field(
        default=None,
        description="Position debiasing. pairwise: swap (default: both orders of every pair) "
        "or none; listwise: permute (default: cyclic orders), pride (a stored letter prior, "
        "one read) or none.",
    )
    permutations: int | None = Field(
        default=None,
        ge=1,
        description="listwise with permute: cyclic orders read (default: one per response, "
        "so every response is shown at every letter once).",
    )
    calibration_id: str | None = Field(
        default=None,
        description="listwise with pride: a PriDe calibration fitted on items with as many "
        "options as there are responses (POST /v1/mcq/calibrations). On /v1/judge/compare "
        "also a probability calibration of target 'compare' (pcal_..., POST "
        "/v1/calibrations) mapping the pairwise preferences, or 'none' for the raw read "
        "when the tenant has a default.",
    )

    def resolved_debias(self) -> CompareDebias:
        return self.debias or DEBIAS_OF[self.mode][0]

    def resolved_aggregation(self) -> CompareAggregation:
        return self.aggregation or AGGREGATIONS_OF[self.mode][0]

    def check_compare(
        self, n: int, samples: int, where: str = "responses", probability: bool = False
    ) -> None:
        """A ``ValueError`` naming the field for an option that does not fit ``n`` responses.
        ``probability``: ``calibration_id`` may name a probability calibration (only
        /v1/judge/compare's preferences are mapped by one)."""
        mode = self.mode
        if self.debias is not None and self.debias not in DEBIAS_OF[mode]:
            raise ValueError(
                f"debias={self.debias!r} does not apply to {mode} comparisons; use one of "
                f"{', '.join(DEBIAS_OF[mode])}"
            )
        if self.aggregation is not None and self.aggregation not in AGGREGATIONS_OF[mode]:
            raise ValueError(
                f"aggregation={self.aggregation!r} does not apply to {mode} comparisons; use "
                f"one of {', '.join(AGGREGATIONS_OF[mode])}"
            )
        debias = self.resolved_debias()
        if self.permutations is not None and debias != "permute":
            raise ValueError("permutations applies to mode='listwise' with debias='permute'")
        self._check_calibration_id(debias, probability)
        if n < MIN_RESPONSES:
            raise ValueError(f"{where} has {n} items; a comparison needs at least {MIN_RESPONSES}")
        if mode == "listwise" and n > MAX_LIST:
            raise ValueError(
                f"{where} has {n} items; a listwise read letters them A-Z, so at most {MAX_LIST}"
            )
        reads = self.reads(n) * samples
        if reads > MAX_READS:
            raise ValueError(
                f"{where} has {n} items: {mode} with debias={debias!r} and samples={samples} "
                f"is {reads} reads, over {MAX_READS}; send fewer responses, use "
                "mode='listwise', or debias='none'"
            )

    def _check_calibration_id(self, debias: CompareDebias, probability: bool) -> None:
        cid = self.calibration_id
        prior = prior_part(cid) is not None
        if (debias == "pride") != prior:
            raise ValueError(
                "debias='pride' needs calibration_id (a PriDe calibration), and a PriDe "
                "calibration_id needs debias='pride'"
            )
        if cid is None or prior:
            return
        if not probability:
            raise ValueError(
                "a probability calibration (target 'compare') maps the preferences of "
                "/v1/judge/compare only; here calibration_id names a PriDe calibration "
                "for debias='pride'"
            )
        if cid != NO_CALIBRATION and (self.mode, debias) != ("pairwise", "swap"):
            raise ValueError(
                f"calibration {cid} maps pairwise preferences read in both orders; use "
                "mode='pairwise' with debias='swap'"
            )

    def reads(self, n: int) -> int:
        """Orders read once each (before samples)."""
        debias = self.resolved_debias()
        if self.mode == "pairwise":
            return n * (n - 1) // (1 if debias == "swap" else 2)
        return min(self.permutations or n, n) if debias == "permute" else 1


class CompareRequest(BudgetOptions, CompareSpec, ReferenceTexts):
    """POST /v1/judge/compare. A reference and criteria are shown to the judge."""

    question: Annotated[str, Text] = Field(description="The problem the responses answer.")
    responses: Annotated[list[str], Texts, Documents] = Field(
        description="2 or more candidate responses, compared together."
    )
    reasoning_tokens: Annotated[int | None, ReasoningTokens] = Field(
        default=None,
        ge=1,
        description="Compare in writing within this many tokens before each read; unset: "
        "read at once.",
    )
    samples: Annotated[int, Samples] = Field(
        default=1, ge=1, description="Sampled comparisons per order (needs reasoning_tokens)."
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Sampling temperature of the comparisons; default 0 for one sample, 0.7 "
        "for several.",
    )
    seed: int | None = Field(default=None, description="Base seed; sample i uses seed + i.")
    return_reads: bool = Field(
        default=True, description="Return every read (its order and letter probabilities)."
    )

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @model_validator(mode="after")
    def _fits(self) -> CompareRequest:
        for i, text in enumerate(self.responses):
            _non_blank(text, f"responses[{i}]")
        if self.samples > 1 and self.reasoning_tokens is None:
            raise ValueError(
                "samples > 1 needs reasoning_tokens: a direct read gives exact letter "
                "probabilities, so repeating it adds nothing"
            )
        self.check_compare(len(self.responses), self.samples, probability=True)
        return self

    @property
    def reasoning(self) -> bool:
        return self.reasoning_tokens is not None

    def resolved_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.samples == 1 else 0.7

    def degraded(self) -> CompareRequest:
        """The budget planner's cheaper copy: read at once, one sample."""
        return CompareRequest.model_validate(
            {**self.model_dump(), "reasoning_tokens": None, "samples": 1, "temperature": None}
        )


class CompareRead(BaseModel):
    order: list[int] = Field(description="The responses shown, as letters A, B, ... in order.")
    probabilities: list[float] = Field(
        description="Each shown letter's probability, normalised over the letters shown (after "
        "PriDe, with debias='pride')."
    )
    sample: int = 0
    reasoning: str | None = Field(default=None, description="The written comparison, if any.")


class CompareResult(BaseModel):
    index: int
    reward: float = Field(
        description="bradley_terry: the centred log-strength; win_rate: the win rate; "
        "mean_probability: log of the mean probability of being best."
    )
    score: float = Field(
        description="In [0, 1]. bradley_terry: the expected win rate under the fit; win_rate: "
        "the win rate; mean_probability: the mean probability of being best (sums to 1). "
        "Calibrated (two responses only): the calibrated preference over the other."
    )
    raw_score: float | None = Field(
        default=None, description="The raw score when a calibration mapped `score`; else null."
    )


class CompareSummary(BaseModel):
    """What a comparison found, without its per-response results (``/v1/score``'s
    ``comparison``)."""

    mode: CompareMode
    aggregation: CompareAggregation
    debias: CompareDebias
    preferences: list[list[float | None]] = Field(
        description="preferences[i][j]: P(response i preferred over j), the mean over the "
        "reads showing both (listwise: p_i / (p_i + p_j)); [i][j] + [j][i] = 1; the diagonal "
        "is null."
    )
    position_consistency: float | None = Field(
        description="The share of pairs whose preferred response is the same in every order "
        "read; null when each pair was read in one order only."
    )
    first_position_rate: float | None = Field(
        description="The mean probability of the first letter shown (no position bias: 1/2 "
        "pairwise, 1/n listwise), before PriDe."
    )
    passes: int = Field(description="Reads made (orders x samples).")


class _CompareFields(CompareSummary):
    model: str
    results: list[CompareResult] = Field(description="One per response, in request order.")
    ranking: list[int] = Field(description="Indices best first; ties by lowest index.")
    reads: list[CompareRead] | None = None


class CompareResponse(Metered, _CompareFields):
    raw_preferences: list[list[float | None]] | None = Field(
        default=None,
        description="The raw preference matrix when a calibration mapped `preferences`; else null.",
    )
    calibration: CalibrationInfo | None = Field(
        default=None, description="The calibration `preferences` went through; null: none."
    )

    def summary(self) -> CompareSummary:
        return CompareSummary.model_validate(
            self.model_dump(include=set(CompareSummary.model_fields))
        )
