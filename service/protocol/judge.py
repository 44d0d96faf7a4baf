"""Wire models of the judging endpoints: outcome, split, process, score and rerank."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from service.protocol.base import (
    BudgetOptions,
    JudgeMode,
    Metered,
    QuestionResponse,
    ReferenceTexts,
    ServiceModel,
    Usage,
    _non_blank,
)
from service.protocol.calibrate import CalibratedFields, CalibrationChoice, check_outcome_method
from service.protocol.calibrated import CalibrationInfo
from service.protocol.code import CodeResult, CodeTests
from service.protocol.compare import CompareSpec, CompareSummary
from service.protocol.limits import (
    Documents,
    MaxSteps,
    ReasoningTokens,
    Samples,
    Text,
    Texts,
)
from service.scoring.answers import Reason


class JudgeOptions(BudgetOptions):
    """Options shared by every judging endpoint."""

    mode: JudgeMode = Field(
        default="direct",
        description="direct: read the verdict at once; reasoning: write a rationale first.",
    )
    reasoning_tokens: Annotated[int, ReasoningTokens] = Field(
        default=256, ge=1, description="Rationale budget per judgment (reasoning mode)."
    )
    samples: Annotated[int, Samples] = Field(
        default=1, ge=1, description="Sampled rationales per judgment; scores are averaged."
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Rationale sampling temperature; default 0 for one sample, 0.7 for several.",
    )
    seed: int | None = Field(default=None, description="Base seed; sample i uses seed + i.")
    cache: bool = Field(
        default=True,
        description="Answer identical judgments (greedy or seeded) from the judgment cache; "
        "false scores every judgment afresh.",
    )

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


VerifierKind = Literal["model", "rule", "hybrid"]


class ReferenceOptions(ReferenceTexts):
    """Verification against a reference (docs/methods.md E): rules first, the model for the rest."""

    verifier: VerifierKind | None = Field(
        default=None,
        description="model: the model judges (with the reference in its prompt, if given); "
        "rule: the answer is compared with the reference by rule, no engine call (undecided = "
        "score null); hybrid: the rule where it decides, else the model. Default: hybrid with "
        "a reference, model without.",
    )

    @model_validator(mode="after")
    def _rule_needs_reference(self) -> ReferenceOptions:
        tests = getattr(self, "tests", None)  # a request that takes code tests (CodeTests)
        if self.verifier in ("rule", "hybrid") and self.reference is None and not tests:
            takes_tests = "tests" in type(self).model_fields
            what = "a reference: send `reference`" + (" or `tests`" if takes_tests else "")
            raise ValueError(f"verifier={self.verifier!r} needs {what}")
        if tests and self.verifier == "model":
            raise ValueError(
                "tests run with verifier 'rule' (the tests alone) or 'hybrid' (the tests, and the "
                "model ordering responses the tests tie); verifier='model' takes no tests"
            )
        return self

    def resolved_verifier(self) -> VerifierKind:
        if self.verifier is not None:
            return self.verifier
        return "hybrid" if self.reference is not None or getattr(self, "tests", None) else "model"


class RuleInfo(BaseModel):
    """What the rule verifier saw: the answer it extracted, the reference answer, its decision."""

    extracted: str | None = Field(description="The response's final answer, as extracted.")
    reference: str | None = Field(description="The reference's answer, as read.")
    equivalent: bool | None = Field(description="null: the rule could not decide (see reason).")
    reason: Reason


DecidedBy = Literal["rule", "model", "code"]


class OutcomeRequest(
    JudgeOptions, ReferenceOptions, CodeTests, CalibrationChoice, QuestionResponse
):
    """POST /v1/judge/outcome."""

    return_rationale: bool = False


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


class _OutcomeFields(BaseModel):
    score: float | None = Field(
        description="P(correct) = sigmoid(logit), through the calibration when one applies "
        "(then raw_score holds sigmoid(logit)); a rule decision is 1 or 0; null when "
        "verifier=rule could not decide."
    )
    logit: float | None = Field(
        description="logp('1') - logp('0'); for several samples logit(score); null when no "
        "model judged."
    )
    verdict: int | None = Field(
        description="1 if score >= 0.5 else 0 (the calibrated score, when calibrated); null "
        "with the score."
    )
    reward: float | None = Field(
        default=None,
        description="A pooling reward model's reward (a one-logit head's value; with classes, "
        "the positive class's log-odds); null on a generative judge.",
    )
    mode: JudgeMode
    model: str
    decided_by: DecidedBy | None = Field(
        default=None,
        description="rule, code (the tests) or model; null when verifier=rule could not decide.",
    )
    rule: RuleInfo | None = Field(default=None, description="The rule check, when one ran.")
    code: CodeResult | None = Field(default=None, description="The tests' runs, when sent.")
    rationale: str | None = None
    samples: list[SampleJudgment] | None = None


class OutcomeResponse(Metered, CalibratedFields, _OutcomeFields):
    pass


# --- steps, process, score, rerank ---------------------------------------------------------

SplitMethod = Literal["heuristic", "model", "auto"]
ProcessMode = Literal["direct", "reasoning", "single_pass"]
Aggregation = Literal["min", "mean", "mean_logit", "last", "prod"]


class SplitRequest(BudgetOptions):
    """POST /v1/split."""

    response: Annotated[str, Text]
    method: SplitMethod = Field(
        default="heuristic",
        description="heuristic: blank lines and numbered steps; model: the model marks steps "
        "with [SPLIT] (checked against the original, else heuristic); auto: model only when the "
        "heuristic finds no structure.",
    )
    max_steps: Annotated[int, MaxSteps] = Field(
        default=64, ge=1, description="Above it, adjacent short steps merge."
    )

    @field_validator("response")
    @classmethod
    def _r(cls, v: str) -> str:
        return _non_blank(v, "response")


class _SplitFields(BaseModel):
    steps: list[str]
    method_used: Literal["heuristic", "model", "given"]
    fallback_reason: str | None = None


class SplitResponse(Metered, _SplitFields):
    # A heuristic split runs no model: its usage may be left out (zero).
    usage: Usage = Field(default_factory=Usage)


class ProcessOptions(ServiceModel):
    """Options of process judgments (shared by /v1/judge/process, /v1/score, /v1/rerank)."""

    aggregation: Aggregation = Field(
        default="mean_logit", description="mean_logit = sigmoid(mean step logit), the default."
    )
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0, description="First-error threshold.")
    split: SplitMethod = Field(default="heuristic", description="How `response` is split.")
    max_steps: Annotated[int, MaxSteps] = Field(default=64, ge=1)


class ProcessRequest(JudgeOptions, ProcessOptions, ReferenceOptions):
    """POST /v1/judge/process. Give `steps` (used as given) or `response` (split).

    A `reference` (a reference solution or the gold answer) is context for every step's
    judgment; steps are always judged by the model (a rule can check only a final answer).
    """

    mode: ProcessMode = Field(  # type: ignore[assignment]
        default="direct",
        description="direct/reasoning: one judgment per step (step k sees steps 1..k-1 as "
        "context); single_pass: one prefill with a verdict slot after every step.",
    )
    question: Annotated[str, Text]
    steps: Annotated[list[str] | None, Texts] = None
    response: Annotated[str | None, Text] = None
    early_stop: bool = Field(
        default=False, description="Judge steps in order and stop at the first below threshold."
    )
    return_rationale: bool = False

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @model_validator(mode="after")
    def _steps_or_response(self) -> ProcessRequest:
        if (self.steps is None) == (self.response is None):
            raise ValueError("give exactly one of `steps` (a list) or `response` (a text)")
        if self.steps is not None:
            if not self.steps:
                raise ValueError("steps must not be empty")
            # Refused here, before the quota is reserved and the job queued.
            if len(self.steps) > self.max_steps:
                raise ValueError(
                    f"{len(self.steps)} steps given, over max_steps={self.max_steps}; "
                    "merge steps or raise max_steps"
                )
            for i, step in enumerate(self.steps):
                _non_blank(step, f"steps[{i}]")
        if self.response is not None:
            _non_blank(self.response, "response")
        if self.mode == "single_pass" and self.samples > 1:
            raise ValueError("single_pass reads exact label probabilities; use samples=1")
        if self.verifier in ("rule", "hybrid"):
            raise ValueError(
                f"verifier={self.verifier!r}: process scores judge every step with the model, "
                "and a rule can check only the final answer; use verifier='model' (the "
                "reference is context for each step) or /v1/judge/outcome"
            )
        return self

    def resolved_verifier(self) -> VerifierKind:
        return "model"


class SplitInfo(BaseModel):
    method_used: Literal["heuristic", "model", "given"]
    fallback_reason: str | None = None


class _ProcessFields(BaseModel):
    steps: list[str]
    step_scores: list[float]
    step_logits: list[float]
    aggregate: float
    aggregation: Aggregation
    threshold: float
    first_error_step: int = Field(description="0-based first step below threshold; -1 if none.")
    early_stopped: bool = False
    mode: ProcessMode
    model: str
    split: SplitInfo
    exact_fallbacks: int | None = Field(
        default=None,
        description="single_pass: slots re-scored exactly because a label was outside top-k.",
    )
    step_samples: list[list[SampleJudgment]] | None = None


class ProcessResponse(Metered, _ProcessFields):
    pass


ScoreMethod = Literal["outcome", "process", "fused", "compare"]


class ScoreOptions(JudgeOptions, ProcessOptions, ReferenceOptions, CodeTests):
    mode: ProcessMode = Field(  # type: ignore[assignment]
        default="direct",
        description="Judging mode; with single_pass the outcome part runs direct.",
    )
    method: ScoreMethod = Field(
        default="fused",
        description="final = alpha*outcome + (1-alpha)*process; compare: the responses are "
        "compared with each other (docs/methods.md H) and final is each one's compare score.",
    )
    alpha: float = Field(default=0.5, ge=0.0, le=1.0)
    compare: CompareSpec | None = Field(
        default=None,
        description="method='compare': how (mode, aggregation, debias, ...); default pairwise "
        "with both orders and a Bradley-Terry fit. mode='reasoning' writes a comparison of "
        "reasoning_tokens before each read.",
    )

    @model_validator(mode="after")
    def _single_pass_samples(self) -> ScoreOptions:
        if self.method == "compare":
            if self.mode == "single_pass":
                raise ValueError(
                    "method='compare' reads direct or after reasoning, not single_pass"
                )
            if self.verifier in ("rule", "hybrid"):
                raise ValueError(
                    f"verifier={self.verifier!r} with method='compare': a comparison is read by "
                    "the model (the reference is shown to it); use verifier='model' or unset"
                )
            if self.tests:
                raise ValueError("tests with method='compare': use method='outcome'")
        elif self.compare is not None:
            raise ValueError("compare options apply to method='compare' only")
        if self.mode == "single_pass" and self.samples > 1:
            raise ValueError("single_pass reads exact label probabilities; use samples=1")
        if self.verifier == "rule" and self.method != "outcome":
            raise ValueError(
                f"verifier='rule' with method={self.method!r}: process scores need the model; "
                "use method='outcome' or verifier='hybrid'"
            )
        return self

    def compare_spec(self) -> CompareSpec:
        return self.compare or CompareSpec()

    def compare_samples(self) -> int:
        return self.samples if self.mode == "reasoning" else 1


class ScoreRequest(ScoreOptions, CalibrationChoice):
    """POST /v1/score: many responses to one question."""

    question: Annotated[str, Text]
    responses: Annotated[list[str], Texts, Documents] = Field(min_length=1)

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("responses")
    @classmethod
    def _rs(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            _non_blank(text, f"responses[{i}]")
        return v

    @model_validator(mode="after")
    def _compare_fits(self) -> ScoreRequest:
        check_outcome_method(self.method, self.calibration_id)
        if self.method == "compare":
            self.compare_spec().check_compare(len(self.responses), self.compare_samples())
        return self


class ScoreResult(BaseModel):
    index: int
    outcome: float | None = None
    raw_outcome: float | None = Field(
        default=None,
        description="The model's raw P(correct) when a calibration mapped `outcome` (and "
        "`final`); null otherwise.",
    )
    process: float | None = None
    compare: float | None = Field(
        default=None, description="method='compare': the response's compare reward."
    )
    final: float | None = Field(
        description="The fused score; null only when verifier=rule could not decide (ranked last)."
    )
    first_error_step: int | None = None
    n_steps: int | None = None
    decided_by: DecidedBy | None = Field(
        default=None, description="Who decided the outcome part: rule, code or model."
    )
    rule: RuleInfo | None = Field(default=None, description="The rule check, when one ran.")
    code: CodeResult | None = Field(default=None, description="The tests' runs, when sent.")
    tiebreak: float | None = Field(
        default=None,
        description="verifier 'hybrid' with tests: the model's P(correct), which orders the "
        "responses whose tests give the same final.",
    )


# Shared by the score and rerank responses (docs/methods.md I.3).
Ties = Annotated[
    list[list[int]],
    Field(
        description="Groups of indices, in ranking order, whose scores chain within "
        "tie_tolerance: the engine cannot order them (equal scores go by lowest index)."
    ),
]
TieTolerance = Annotated[
    float, Field(description="Scores closer than this are tied (the engine's precision).")
]


class _ScoreFields(BaseModel):
    method: ScoreMethod
    alpha: float
    model: str
    results: list[ScoreResult]
    ranking: list[int] = Field(description="Indices best first; ties by lowest index.")
    ties: Ties = []
    tie_tolerance: TieTolerance = 0.0
    comparison: CompareSummary | None = Field(
        default=None, description="method='compare': the comparison behind the finals."
    )
    calibration: CalibrationInfo | None = Field(
        default=None,
        description="The calibration the outcome scores went through (method='outcome'); "
        "the ranking is the raw one (the map is monotone).",
    )


class ScoreResponse(Metered, _ScoreFields):
    pass


class RerankDocument(BaseModel):
    text: Annotated[str, Text]


class RerankRequest(ScoreOptions, CalibrationChoice):
    """Cohere/Jina rerank shape plus verifier options (`query` is the question)."""

    model: str | None = None
    query: Annotated[str, Text]
    documents: Annotated[list[str | RerankDocument], Texts, Documents] = Field(min_length=1)
    top_n: int | None = None
    return_documents: bool = False

    @field_validator("query")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "query")

    @model_validator(mode="after")
    def _documents(self) -> RerankRequest:
        check_outcome_method(self.method, self.calibration_id)
        # Checked when parsed: the ScoreRequest the worker builds from it refused a blank
        # document there, as a 500.
        for i, text in enumerate(self.texts()):
            _non_blank(text, f"documents[{i}]")
        if self.method == "compare":
            self.compare_spec().check_compare(
                len(self.documents), self.compare_samples(), "documents"
            )
        return self

    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d.text for d in self.documents]


class RerankResult(BaseModel):
    index: int
    relevance_score: float = Field(
        description="The final score (0 when verifier=rule could not decide: ranked last)."
    )
    raw_score: float | None = Field(
        default=None,
        description="The model's raw P(correct) when a calibration mapped relevance_score "
        "(method='outcome'); absent otherwise.",
    )
    document: RerankDocument | None = None
    decided_by: DecidedBy | None = None
    rule: RuleInfo | None = None
    code: CodeResult | None = None
    tiebreak: float | None = Field(
        default=None,
        description="verifier 'hybrid' with tests: the model's P(correct), which orders "
        "documents of equal pass rate.",
    )


class RerankMeta(BaseModel):
    billed_units: dict[str, int]


class _RerankFields(BaseModel):
    id: str
    model: str
    results: list[RerankResult]
    ties: Ties = []
    tie_tolerance: TieTolerance = 0.0
    calibration: CalibrationInfo | None = Field(
        default=None,
        description="The calibration the relevance scores went through (method='outcome'); "
        "the order is the raw one (the map is monotone). Absent: raw.",
    )
    meta: RerankMeta


class RerankResponse(Metered, _RerankFields):
    pass
