"""Wire models of the MCQ audits: PopMCQ stress tests and choices-only / reasoning audits.

Figures that are undefined (a Spearman rho over constant values, a rate over no items) are
``null``, never a number made up.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from service.protocol.base import BudgetOptions, Metered, ServiceModel, _non_blank
from service.protocol.limits import Documents, ReasoningTokens, Text, Texts
from service.protocol.mcq import MAX_OPTIONS, DebiasMethod, MCQQuestion, PhiKind
from service.scoring.popprior import LambdaFit

Strategy = Literal["S1", "S2", "S3", "S4", "S5", "S6"]
AuditCondition = Literal["full_base", "full_reason", "choices_only_base", "choices_only_reason"]
MAX_POOL = 64  # wrong candidates per PopMCQ question
MAX_ALIASES = 16  # other accepted spellings of a PopMCQ answer (open recall)


# --- choices-only / reasoning audit (docs/methods.md C) -------------------------------------------


class AuditItem(MCQQuestion):
    """A question, its options and the index of the right one."""

    id: str = Field(default="", max_length=200)
    answer_index: int = Field(ge=0)

    @model_validator(mode="after")
    def _gold(self) -> AuditItem:
        if self.answer_index >= len(self.options):
            raise ValueError(
                f"answer_index {self.answer_index} is outside the {len(self.options)} options"
            )
        return self


class AuditRequest(BudgetOptions):
    """POST /v1/mcq/audit: every item under full vs choices-only x base vs reason."""

    items: Annotated[list[AuditItem], Documents] = Field(min_length=1)
    conditions: list[AuditCondition] = Field(
        default=["full_base", "full_reason", "choices_only_base", "choices_only_reason"],
        min_length=1,
    )
    reasoning_tokens: Annotated[int, ReasoningTokens] = Field(
        default=256, ge=1, description="Rationale budget of the reason conditions."
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = Field(default=None, description="Sampling seed (temperature > 0).")
    idk: bool = Field(
        default=False,
        description="Append an 'I don't know' option (choosing it counts as wrong); items "
        "with 10 options are refused.",
    )
    perturbations: bool = Field(
        default=False,
        description="Also answer (base conditions) with an injected duplicate, nonsense or "
        "false option, and report how often the answer changes.",
    )
    tag_strategies: bool = Field(
        default=False,
        description="Tag the choices_only_reason rationales with the six strategy labels and "
        "regress correctness on them.",
    )
    predictability: bool = Field(
        default=False,
        description="Reason conditions: a judge reads each trace with the lettered options, "
        "without the question, its ANSWER line and a last paragraph naming a letter, and "
        "predicts the letter; agreement with the letter read (docs/methods.md C.3).",
    )
    inferred_question: bool = Field(
        default=False,
        description="choices_only_reason: a judge writes the question each trace reconstructs "
        "(or none) and reads whether it asks what the real question asks; the match rate of "
        "correct and incorrect traces (docs/methods.md C.3).",
    )
    trace_judge: Literal["served", "remote"] = Field(
        default="served",
        description="Who reads the traces (predictability, inferred_question): the served "
        "model, or the remote judge the service was started with "
        "(VERIFIER_AUDIT__REMOTE_JUDGE), e.g. a stronger model.",
    )
    evidence_tokens: int = Field(default=24, ge=1, le=256)
    artifact_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    return_rationales: bool = True

    @model_validator(mode="after")
    def _check(self) -> AuditRequest:
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError("conditions must not repeat")
        if self.predictability and not any(c.endswith("_reason") for c in self.conditions):
            raise ValueError(
                "predictability needs a reason condition (full_reason or choices_only_reason): "
                "the base conditions write no trace"
            )
        if self.trace_judge != "served" and not (self.predictability or self.inferred_question):
            raise ValueError("trace_judge applies with predictability or inferred_question")
        if self.inferred_question and "choices_only_reason" not in self.conditions:
            raise ValueError(
                "inferred_question needs the choices_only_reason condition: only a trace "
                "written without the question can infer it"
            )
        if self.tag_strategies and "choices_only_reason" not in self.conditions:
            raise ValueError("tag_strategies needs the choices_only_reason condition")
        if self.perturbations and not {"full_base", "choices_only_base"} & set(self.conditions):
            raise ValueError("perturbations need a base condition (full_base or choices_only_base)")
        extra = int(self.idk) + int(self.perturbations)
        full = [i for i, it in enumerate(self.items) if len(it.options) + extra > MAX_OPTIONS]
        if full:
            raise ValueError(
                f"items {full[:5]} have too many options for the idk/perturbation extras "
                f"(at most {MAX_OPTIONS} options in all)"
            )
        return self


class AuditConditionResult(BaseModel):
    answer_index: int = Field(description="Read from the letter logprobs at the answer slot.")
    answer_letter: str
    probs: list[float]
    correct: bool
    idk: bool = False
    parsed_index: int | None = Field(
        default=None, description="reason: the 'ANSWER: X' letter; null on a parse failure."
    )
    parse_ok: bool | None = None
    rationale: str | None = None
    prediction: TracePrediction | None = Field(
        default=None, description="reason, with predictability: the judge's read of the trace."
    )
    inferred_question: InferredQuestion | None = Field(
        default=None,
        description="choices_only_reason, with inferred_question: the question the trace "
        "reconstructs and whether it matches the real one.",
    )


class InferredQuestion(BaseModel):
    question: str | None = Field(description="As the judge wrote it; null: the trace infers none.")
    match_probability: float | None = Field(
        description="P(yes) that it asks what the real question asks (null without a question)."
    )
    matches: bool | None = Field(description="match_probability >= 0.5.")


class TracePrediction(BaseModel):
    """What a judge predicts from the stripped trace alone."""

    trace_empty: bool = Field(description="Nothing was left after stripping: not read.")
    predicted_index: int | None
    predicted_letter: str | None
    probability: float | None = Field(description="The predicted letter's probability.")
    agrees: bool | None = Field(description="The prediction is the letter read at the slot.")


class PerturbationResult(BaseModel):
    inserted_at: int
    answer_index: int = Field(
        description="Chosen option as its original index (a duplicate counts as the option it "
        "copies); -1: an injected new text."
    )
    chose_injected: bool
    changed: bool


class StrategyTag(BaseModel):
    value: bool
    prob: float
    evidence: str | None = None


class AuditItemResult(BaseModel):
    id: str
    k: int
    answer_index: int
    conditions: dict[str, AuditConditionResult]
    perturbations: dict[str, dict[str, PerturbationResult]] = Field(default_factory=dict)
    tags: dict[str, StrategyTag] | None = None


class ConditionSummary(BaseModel):
    n: int
    accuracy: float | None
    chance: float | None
    idk_rate: float | None
    mean_prob_gold: float | None
    parse_failure_rate: float | None = None
    accuracy_parsed: float | None = None
    disagreement_rate: float | None = None
    predictability: Predictability | None = None


class Predictability(BaseModel):
    """Trace-to-answer predictability of one reason condition (docs/methods.md C.3)."""

    n: int = Field(description="Traces read (an empty stripped trace is not).")
    n_empty: int
    agreement: float | None = Field(description="Predicted letter = the letter read.")
    chance: float | None = Field(description="mean 1/K over the traces read.")
    ci_low: float | None = Field(description="95% Wilson interval of the agreement.")
    ci_high: float | None


class ReasoningEffect(BaseModel):
    n: int
    delta: float | None = Field(description="Acc(reason) - Acc(base) on the same items.")
    only_reason_right: int
    only_base_right: int
    p_value: float | None = Field(description="Exact McNemar (two-sided).")
    significant: bool
    retention: float | None = Field(description="Share of items where base letter = reason letter.")


class Artifact(BaseModel):
    position: int
    id: str
    prob: float


class PerturbationSummary(BaseModel):
    n: int
    answer_change_rate: float | None
    injected_chosen_rate: float | None


class Regression(BaseModel):
    n: int
    coefficients: dict[str, dict[str, float | None]]
    dropped: list[str]
    error: str | None = None
    converged: bool | None = None
    warnings: list[str] = Field(default_factory=list)


class TaggingSummary(BaseModel):
    n: int
    label_rates: dict[str, float | None]
    regression: Regression
    note: str


class AuditSummary(BaseModel):
    n_items: int
    conditions: dict[str, ConditionSummary]
    reasoning_effect: dict[str, ReasoningEffect]
    artifacts: list[Artifact]
    artifact_threshold: float
    perturbations: dict[str, dict[str, PerturbationSummary]]
    tagging: TaggingSummary | None = None
    inferred_question: InferredSummary | None = None


class MatchRate(BaseModel):
    n: int = Field(description="Traces of this kind that infer a question.")
    match_rate: float | None = Field(description="Share whose question matches the real one.")
    ci_low: float | None = Field(description="95% Wilson interval.")
    ci_high: float | None


class InferredSummary(BaseModel):
    """The inferred-question match over the choices_only_reason traces (docs/methods.md C.3)."""

    n: int = Field(description="Traces read.")
    n_inferred: int = Field(description="Traces that infer a question.")
    inferred_rate: float
    correct: MatchRate = Field(description="Among traces whose answer is right.")
    incorrect: MatchRate = Field(description="Among traces whose answer is wrong.")


class _AuditFields(BaseModel):
    model: str
    items: list[AuditItemResult]
    summary: AuditSummary
    tokens_by_condition: dict[str, int]
    trace_judge: str | None = Field(
        default=None,
        description="With predictability or inferred_question: the model that read the traces.",
    )


class AuditResponse(Metered, _AuditFields):
    pass


# --- PopMCQ (docs/methods.md B.1-B.3) -------------------------------------------------------------


class PoolOption(ServiceModel):
    text: Annotated[str, Text]
    popularity: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("text")
    @classmethod
    def _t(cls, v: str) -> str:
        return _non_blank(v, "text")


class PoolItem(ServiceModel):
    id: str = Field(default="", max_length=200)
    question: Annotated[str, Text]
    answer: PoolOption
    candidates: list[PoolOption] = Field(min_length=1, max_length=MAX_POOL)
    aliases: Annotated[list[str], Texts] = Field(
        default=[],
        max_length=MAX_ALIASES,
        description="Other names of the answer that open recall accepts (e.g. 'Van Gogh').",
    )

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("aliases")
    @classmethod
    def _a(cls, v: list[str]) -> list[str]:
        return [_non_blank(a, f"aliases[{i}]") for i, a in enumerate(v)]


class PopMCQRequest(BudgetOptions):
    """POST /v1/mcq/popmcq: build S1-S6 from candidate pools, answer, debias, measure."""

    items: Annotated[list[PoolItem], Documents] = Field(min_length=2)
    popularity: Literal["given", "model"] = Field(
        default="model",
        description="given: every answer and candidate carries its popularity in [0, 1]; "
        "model: the question-free mean log-probability of each text, min-max normalised over "
        "the question's pool (a proxy the service computes, not page views).",
    )
    strategies: list[Strategy] = Field(default=["S1", "S2", "S3", "S4", "S5", "S6"], min_length=1)
    methods: list[DebiasMethod] = Field(
        default=["none", "popdebias", "pride", "contextual"], min_length=1
    )
    seed: int = 0
    calibration_ratio: float = Field(
        default=0.2,
        gt=0.0,
        lt=1.0,
        description="Share of the kept questions that fit popdebias and pride; they are "
        "excluded from the scored items.",
    )
    phi: PhiKind = "pop"
    lambda_fit: LambdaFit = Field(
        default="question_free",
        description="How popdebias fits lambda on the calibration split (docs/methods.md B.5). "
        "question_free (label-free): S1-S5 items with their question hidden, so knowing the "
        "answer cannot bend the fit; items (label-free): the S1 items as asked, whose "
        "distractors are drawn independently of popularity; grid: the lambda in [0, 10] with "
        "the best accuracy on the calibration items (uses their labels). A fitted lambda "
        "below 0 is applied as 0 and reported (lambda_raw, clipped).",
    )
    paper_filter: bool = Field(
        default=True,
        description="Keep only questions with >= 4 distinct wrong candidates on which S1, S2 "
        "and S6 can all be built (docs/methods.md B.1).",
    )
    return_items: bool = False
    open_recall: bool = Field(
        default=False,
        description="First ask every question without options (free form, greedy) and mark "
        "it known when the answer or an alias appears in the reply and no wrong candidate "
        "does (docs/methods.md B.8); table_known repeats the table on the known questions.",
    )
    open_recall_tokens: int = Field(
        default=24, ge=4, le=128, description="Token budget of each open-recall answer."
    )

    @model_validator(mode="after")
    def _check(self) -> PopMCQRequest:
        if self.popularity == "given":
            for i, it in enumerate(self.items):
                opts = [it.answer, *it.candidates]
                if any(o.popularity is None for o in opts):
                    raise ValueError(
                        f"items[{i}]: popularity='given' needs a popularity on the answer and "
                        "on every candidate"
                    )
        ids = [it.id for it in self.items if it.id]
        if len(set(ids)) != len(ids):
            raise ValueError("item ids must be unique")
        return self


class PopMCQCell(BaseModel):
    n: int
    accuracy: float | None
    accuracy_se: float | None = Field(description="Binomial standard error of the accuracy.")
    rho: float | None
    rho_relative: float | None
    hpsr: float | None
    pop_gap: float | None
    confidence: float | None
    overconfidence: dict[str, float | None]


class PopMCQBuiltItem(BaseModel):
    item_id: str
    strategy: Strategy
    options: list[str]
    popularity: list[float]
    answer_index: int
    probs: list[float] = Field(description="The raw letter probabilities (before any method).")
    chosen: dict[str, int] = Field(description="Chosen option per debiasing method.")


class OpenRecallItem(BaseModel):
    item_id: str
    answer: str = Field(description="The free-form answer as generated.")
    read: str = Field(description="Its first sentence, normalised: what is matched.")
    matched: str | None = Field(description="The gold answer or alias found in it.")
    distractor: str | None = Field(description="A wrong candidate found in it (not known).")
    known: bool


class OpenRecall(BaseModel):
    n: int = Field(description="Questions asked (every item of the request).")
    n_known: int
    known_rate: float | None
    known_rate_se: float | None
    n_scored_known: int = Field(description="Known questions among the scored ones.")
    max_tokens: int
    items: list[OpenRecallItem]


class _PopMCQFields(BaseModel):
    model: str
    n_items: int
    n_kept: int
    n_calibration: int
    n_scored: int
    calibration_ids: list[str] = Field(description="Questions held out to fit the methods.")
    dropped: list[dict[str, str]]
    built: dict[str, int]
    skipped: dict[str, int]
    calibration: dict[str, dict[str, Any]]
    table: dict[str, dict[str, PopMCQCell]] = Field(description="method -> strategy -> metrics")
    items: list[PopMCQBuiltItem] | None = None
    open_recall: OpenRecall | None = None
    table_known: dict[str, dict[str, PopMCQCell]] | None = Field(
        default=None, description="The table on the questions open recall found known."
    )


class PopMCQResponse(Metered, _PopMCQFields):
    pass
