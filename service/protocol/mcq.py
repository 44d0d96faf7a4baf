"""Wire models of the multiple-choice endpoints (docs/methods.md B.4-B.7): answers and calibrations.

Shares the base model, usage and budget options of :mod:`service.protocol`.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from service.protocol.base import BudgetOptions, Metered, ServiceModel, _non_blank
from service.protocol.calibrated import CalibrationInfo, prior_part, probability_part
from service.protocol.limits import Documents, Text, Texts
from service.scoring.popprior import LambdaFit

MIN_OPTIONS, MAX_OPTIONS = 2, 10
DebiasMethod = Literal["none", "popdebias", "pride", "contextual"]
CalibrationMethod = Literal["popdebias", "popdebias_binned", "pride", "contextual"]
PhiKind = Literal["pop", "log"]

POPULARITY_HELP = (
    "One value in [0, 1] per option, used as given; or 'model': the model's question-free "
    "mean log-probability of each option text, min-max normalised per question (all equal: "
    "0.5 each). The PopMCQ paper used normalised Wikipedia page views; 'model' is a proxy the "
    "service can compute itself, not that signal."
)


class MCQQuestion(ServiceModel):
    """A question with 2-10 non-blank options (answers and audits build on it)."""

    question: Annotated[str, Text]
    options: Annotated[list[str], Texts] = Field(
        min_length=MIN_OPTIONS, max_length=MAX_OPTIONS, description="Option texts, A, B, ..."
    )

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("options")
    @classmethod
    def _opts(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            _non_blank(text, f"options[{i}]")
        return v


class MCQItem(MCQQuestion):
    """One multiple-choice question with 2-10 options."""

    popularity: list[float] | Literal["model"] | None = Field(
        default=None, description=POPULARITY_HELP
    )

    @model_validator(mode="after")
    def _pop(self) -> MCQItem:
        pop = self.popularity
        if isinstance(pop, list):
            if len(pop) != len(self.options):
                raise ValueError(
                    f"popularity has {len(pop)} values for {len(self.options)} options; give "
                    "one per option"
                )
            bad = [v for v in pop if not (math.isfinite(v) and 0.0 <= v <= 1.0)]
            if bad:
                raise ValueError(f"popularity values must lie in [0, 1]; got {bad[:3]}")
        return self

    @property
    def k(self) -> int:
        return len(self.options)


class MCQOptions(BudgetOptions):
    debias: DebiasMethod = Field(
        default="none",
        description="popdebias: remove a popularity prior (needs popularity and a calibration "
        "or popdebias_lambda); pride: remove an option-letter prior (needs a calibration); "
        "contextual: divide by the letter probabilities on content-free inputs.",
    )
    calibration_id: str | None = Field(
        default=None,
        description="A debiasing calibration of this tenant (cal_..., POST "
        "/v1/mcq/calibrations) for pride, popdebias or contextual; or a probability "
        "calibration (pcal_..., POST /v1/calibrations, target 'mcq') that maps `probs` through "
        "its temperature; 'none' for the raw read. Unset: the tenant's default mcq "
        "calibration, when one is marked and was fitted for this model.",
    )
    popdebias_lambda: float | None = Field(
        default=None, description="PopDebias lambda to use without a calibration."
    )
    phi: PhiKind = Field(default="pop", description="PopDebias phi(pop): pop or log(pop).")

    @model_validator(mode="after")
    def _needs(self) -> MCQOptions:
        lam = self.popdebias_lambda
        if lam is not None and not math.isfinite(lam):
            raise ValueError("popdebias_lambda must be a finite number")
        if lam is not None and lam < 0:
            # A negative lambda adds a popularity prior instead of removing one (B.5).
            raise ValueError("popdebias_lambda must be >= 0 (a negative one rewards popularity)")
        if self.debias == "pride" and self.prior_id is None:
            raise ValueError(
                "debias='pride' needs calibration_id naming a debiasing calibration (cal_...): "
                "fit one with POST /v1/mcq/calibrations (method 'pride')"
            )
        if self.debias == "popdebias" and self.prior_id is None and lam is None:
            raise ValueError(
                "debias='popdebias' needs calibration_id (method 'popdebias' or "
                "'popdebias_binned') or popdebias_lambda"
            )
        return self

    @property
    def prior_id(self) -> str | None:
        """``calibration_id`` when it names a debiasing calibration, else None."""
        return prior_part(self.calibration_id)

    @property
    def probability_calibration_id(self) -> str | None:
        """``calibration_id`` when it names a probability calibration (or ``"none"``)."""
        return probability_part(self.calibration_id)


class MCQAnswerRequest(MCQItem, MCQOptions):
    """POST /v1/mcq/answer."""

    @model_validator(mode="after")
    def _popularity_for_popdebias(self) -> MCQAnswerRequest:
        if self.debias == "popdebias" and self.popularity is None:
            raise ValueError("debias='popdebias' needs popularity (values, or 'model')")
        return self


class MCQBatchRequest(MCQOptions):
    """POST /v1/mcq/answer/batch: many items, one engine batch, one debiasing setting."""

    items: Annotated[list[MCQItem], Documents] = Field(min_length=1)

    @model_validator(mode="after")
    def _popularity_for_popdebias(self) -> MCQBatchRequest:
        if self.debias == "popdebias":
            missing = [i for i, it in enumerate(self.items) if it.popularity is None]
            if missing:
                raise ValueError(
                    f"debias='popdebias' needs popularity on every item; missing on {missing[:5]}"
                )
        return self


class DebiasInfo(BaseModel):
    method: DebiasMethod
    calibration_id: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="What was applied.")


class MCQAnswer(BaseModel):
    probs_raw: list[float] = Field(description="Softmax over the K option letters.")
    probs: list[float] = Field(description="After debiasing (= probs_raw for 'none').")
    answer_index: int
    answer_letter: str
    popularity: list[float] | None = Field(default=None, description="The popularity used.")
    debias: DebiasInfo
    uncalibrated_probs: list[float] | None = Field(
        default=None,
        description="`probs` before a probability calibration mapped them (after debiasing); "
        "null when none did.",
    )


class _MCQAnswerFields(MCQAnswer):
    model: str


class MCQAnswerResponse(Metered, _MCQAnswerFields):
    calibration: CalibrationInfo | None = Field(
        default=None, description="The probability calibration `probs` went through; null: none."
    )


class _MCQBatchFields(BaseModel):
    model: str
    results: list[MCQAnswer]


class MCQBatchResponse(Metered, _MCQBatchFields):
    calibration: CalibrationInfo | None = Field(
        default=None,
        description="The probability calibration every result's `probs` went through; null: none.",
    )


class CalibrationRequest(BudgetOptions):
    """POST /v1/mcq/calibrations: fit a debiasing method on unlabelled items."""

    method: CalibrationMethod
    items: Annotated[list[MCQItem], Documents] = Field(
        default_factory=list,
        description="Calibration items (no labels). contextual needs none if k is given.",
    )
    k: int | None = Field(
        default=None,
        ge=MIN_OPTIONS,
        le=MAX_OPTIONS,
        description="contextual without items: the number of options.",
    )
    phi: PhiKind = "pop"
    lambda_fit: LambdaFit = Field(
        default="question_free",
        description="popdebias and popdebias_binned: which reads fit the prior "
        "(docs/methods.md B.5). question_free: the items with their question hidden, so "
        "knowing the answer cannot bend the fit; items: the items as asked, sound only when "
        "their distractors are drawn independently of popularity; grid (popdebias only): "
        "the lambda in [0, 10] with the best accuracy on the items, needs answers. A fitted "
        "lambda below 0 is applied as 0 and reported (lambda_raw, clipped).",
    )
    answers: list[int] | None = Field(
        default=None,
        description="lambda_fit='grid': the index of the right option of each item (labels "
        "of the calibration items only).",
    )
    bin_edges: list[float] = Field(
        default=[0.3, 0.7], description="popdebias_binned: upper edges of the popularity bins."
    )
    name: str = Field(default="", max_length=200)

    @model_validator(mode="after")
    def _check(self) -> CalibrationRequest:
        if self.method != "contextual" and not self.items:
            raise ValueError(f"method '{self.method}' needs at least one calibration item")
        if self.method == "contextual" and not self.items and self.k is None:
            raise ValueError("method 'contextual' needs items or k")
        ks = {it.k for it in self.items}
        if self.method in ("pride", "contextual") and len(ks | ({self.k} - {None})) > 1:
            raise ValueError(
                f"method '{self.method}' fits a letter prior for one K; the items have "
                f"{sorted(ks)} options"
            )
        if self.method.startswith("popdebias"):
            missing = [i for i, it in enumerate(self.items) if it.popularity is None]
            if missing:
                raise ValueError(
                    f"method '{self.method}' needs popularity on every item; missing on "
                    f"{missing[:5]}"
                )
        self._check_lambda_fit()
        edges = self.bin_edges
        if edges != sorted(edges) or any(not 0 < e < 1 for e in edges) or len(edges) > 20:
            raise ValueError("bin_edges must be increasing values in (0, 1), at most 20")
        return self

    def _check_lambda_fit(self) -> None:
        if self.lambda_fit != "grid":
            if self.answers is not None:
                raise ValueError("answers are read only by lambda_fit='grid'; drop them")
            return
        if self.method != "popdebias":
            raise ValueError(f"lambda_fit='grid' fits popdebias' lambda; method is {self.method!r}")
        if self.answers is None or len(self.answers) != len(self.items):
            raise ValueError(
                f"lambda_fit='grid' needs answers: one option index per item ({len(self.items)})"
            )
        bad = [
            i
            for i, (a, it) in enumerate(zip(self.answers, self.items, strict=True))
            if not 0 <= a < it.k
        ]
        if bad:
            raise ValueError(f"answers{bad[:5]} lie outside their items' options")

    @property
    def fitted_k(self) -> int | None:
        """The K a letter prior is fitted for (None: PopDebias works for any K)."""
        if self.method in ("pride", "contextual"):
            return self.k or self.items[0].k
        return None


class CalibrationCost(BaseModel):
    forward_passes: int
    tokens: int


class Calibration(BaseModel):
    """A fitted debiasing method, stored per tenant."""

    id: str
    name: str = ""
    method: CalibrationMethod
    model: str
    k: int | None = Field(description="The option count it applies to (None: any).")
    params: dict[str, Any]
    items: int
    cost: CalibrationCost
    created_at: float


class CalibrationResponse(Metered, Calibration):
    pass


class CalibrationList(BaseModel):
    data: list[Calibration]
