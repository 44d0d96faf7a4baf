"""Wire models of probability calibrations: fit on labelled examples, store per tenant, apply
to later answers (docs/methods.md J, docs/api.md "Probability calibrations").

A calibration maps the judge's raw read (the verdict logit ``z``) to a calibrated probability:
``sigmoid(z / T)`` (temperature) or ``sigmoid(a * z + b)`` (Platt, ``a > 0``). Both are
monotone, so rankings never change; the raw value is always reported beside the calibrated one.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from service.protocol.audit import AuditItem
from service.protocol.base import (
    JudgeMode,
    Metered,
    ModelChoice,
    QuestionResponse,
    ReferenceTexts,
    ServiceModel,
    _non_blank,
)
from service.protocol.calibrated import (
    NO_CALIBRATION,
    CalibrationInfo,
    ScalingMethod,
)
from service.protocol.decision_labels import DecisionExample
from service.protocol.limits import Documents, ReasoningTokens, Text, Texts
from service.scoring.calibration import MIN_EXAMPLES, pair_labels
from service.scoring.calibration_multiclass import group_folds

CalibrationTarget = Literal["outcome", "compare", "decisions", "mcq"]
"""What a calibration applies to: ``outcome`` (an outcome judgment's score), ``compare``
(the pairwise preferences of ``/v1/judge/compare``, read in both orders), ``decisions`` (the
label probabilities of ``/v1/decisions``, one temperature per question type) or ``mcq`` (the
option probabilities of ``/v1/mcq/answer``)."""


class OutcomeExample(ReferenceTexts, QuestionResponse):
    """One labelled judgment: the request an outcome call would send, and whether the response
    is correct (1) or not (0)."""

    label: int = Field(description="1: the response is correct; 0: it is not.")

    @field_validator("label")
    @classmethod
    def _label(cls, v: int) -> int:
        if v not in (0, 1):
            raise ValueError(f"label must be 0 or 1, got {v}")
        return v


class CompareExample(ReferenceTexts):
    """One labelled pair: the question, two responses and which of them is preferred."""

    question: Annotated[str, Text] = Field(description="The problem both responses answer.")
    responses: Annotated[list[str], Texts] = Field(
        min_length=2, max_length=2, description="The two responses, in any order."
    )
    preferred: int = Field(description="0 or 1: the index of the preferred response.")

    @field_validator("question")
    @classmethod
    def _q(cls, v: str) -> str:
        return _non_blank(v, "question")

    @field_validator("responses")
    @classmethod
    def _rs(cls, v: list[str]) -> list[str]:
        return [_non_blank(r, f"responses[{i}]") for i, r in enumerate(v)]

    @field_validator("preferred")
    @classmethod
    def _preferred(cls, v: int) -> int:
        if v not in (0, 1):
            raise ValueError(f"preferred must be 0 or 1 (an index into responses), got {v}")
        return v


class MCQExample(AuditItem):
    """One labelled multiple-choice question: its options and the index of the right one."""


Example = OutcomeExample | CompareExample | DecisionExample | MCQExample
EXAMPLE_OF: dict[str, type[Example]] = {
    "outcome": OutcomeExample,
    "compare": CompareExample,
    "decisions": DecisionExample,
    "mcq": MCQExample,
}
EXAMPLE_SHAPE = {
    "outcome": "{question, response, label}",
    "compare": "{question, responses: [two texts], preferred}",
    "decisions": "{input, questions, answers}",
    "mcq": "{question, options, answer_index}",
}


class ProbabilityCalibrationRequest(ModelChoice):
    """POST /v1/calibrations: read the judge on labelled examples through the ordinary serving
    path (the prompts a later request with the same mode and budget uses), fit, store."""

    target: CalibrationTarget = Field(description="What the calibration applies to.")
    examples: Annotated[list[Example], Documents] = Field(
        min_length=MIN_EXAMPLES,
        description=f"Labelled examples, at least {MIN_EXAMPLES}. outcome: {{question, "
        "response, label}, both labels present (each fold of the cross-validation needs both "
        "too); compare: {question, responses: [a, b], preferred}; decisions: {input, "
        f"questions, answers}}, at least {MIN_EXAMPLES} labelled questions of each type "
        "fitted (a temperature per type); mcq: {question, options, answer_index}.",
    )
    method: ScalingMethod = Field(
        default="temperature",
        description="temperature: sigmoid(logit / T), or softmax(log p / T) over a decision's "
        "labels; platt: sigmoid(a * logit + b), a > 0 (outcome only: a preference's two "
        "sides must still sum to 1, and a decision's labels and a question's options vary in "
        "number).",
    )
    mode: JudgeMode = Field(
        default="direct", description="The judging mode the calibration is fitted and used in."
    )
    reasoning_tokens: Annotated[int, ReasoningTokens] = Field(
        default=256, ge=1, description="Rationale budget per judgment (reasoning mode)."
    )
    folds: int = Field(default=5, ge=2, le=20, description="k of the k-fold cross-validation.")
    bins: int = Field(default=10, ge=2, le=50, description="Equal-mass bins of the ECE.")
    seed: int = Field(default=0, description="Seed of the stratified fold assignment.")
    name: str = Field(default="", max_length=200)
    default: bool = Field(
        default=False,
        description="Make it this tenant's default for its target: applied to every answer "
        "of that target that names no calibration_id.",
    )
    cache: bool = Field(default=True, description="Read through the judgment cache.")

    @model_validator(mode="after")
    def _fittable(self) -> ProbabilityCalibrationRequest:
        """Refused before any engine call: examples of another target, Platt on preferences,
        and a set whose folds would miss a label or train on fewer than MIN_EXAMPLES."""
        kind = EXAMPLE_OF[self.target]
        for i, ex in enumerate(self.examples):
            if not isinstance(ex, kind):
                raise ValueError(
                    f"examples[{i}] is not a {self.target} example: target={self.target!r} "
                    f"takes {EXAMPLE_SHAPE[self.target]}"
                )
        if self.target == "compare" and self.method == "platt":
            raise ValueError(
                "target 'compare' is fitted by temperature only: Platt's bias would break "
                "P(a over b) + P(b over a) = 1 and favour one side of every pair"
            )
        if self.target == "decisions":
            self._check_decisions()
            return self
        if self.target == "mcq":
            self._check_mcq()
            return self
        n = len(self.examples)
        labels = self.labels()
        positives = sum(labels)
        fewest = min(positives, n - positives)
        if fewest == 0:
            label = 1 if positives else 0
            raise ValueError(
                f"all {n} examples are labelled {label}: a calibration needs both labels"
            )
        if fewest < self.folds:
            raise ValueError(
                f"{self.folds} folds need at least {self.folds} examples of each label; the "
                f"smaller label has {fewest} (send more examples or lower `folds`)"
            )
        train = n - -(-n // self.folds)  # the smallest training split of the k folds
        if train < MIN_EXAMPLES:
            raise ValueError(
                f"{n} examples in {self.folds} folds leave {train} to fit a fold on; need "
                f"{MIN_EXAMPLES} (send more examples or lower `folds`)"
            )
        return self

    def _check_decisions(self) -> None:
        """Temperature only; per question type fitted: at least MIN_EXAMPLES labelled
        questions in the whole set and in every training split of the folds (held out by
        example), and both labels of a predicate."""
        if self.method == "platt":
            raise ValueError(
                "target 'decisions' is fitted by temperature only: a question's labels vary "
                "in number, and a softmax over them has no Platt scaling"
            )
        rows = self.decision_rows()
        if not rows:
            raise ValueError("no example labels any question: give each question's answer")
        groups = [example for example, _, _, _ in rows]
        if len(set(groups)) < self.folds:
            raise ValueError(
                f"{self.folds} folds need at least {self.folds} examples with a labelled "
                f"question; {len(set(groups))} have one (send more examples or lower `folds`)"
            )
        fold_of = group_folds(groups, self.folds, self.seed)
        for kind in sorted({kind for _, _, kind, _ in rows}):
            mine = [(fold_of[n], r) for n, r in enumerate(rows) if r[2] == kind]
            if len(mine) < MIN_EXAMPLES:
                raise ValueError(
                    f"{len(mine)} labelled {kind} questions: a temperature per question type "
                    f"needs at least {MIN_EXAMPLES} (send more, or leave that type's answers "
                    "null)"
                )
            if kind == "predicate" and len({r[3] for _, r in mine}) == 1:
                value = "true" if mine[0][1][3] == 0 else "false"
                raise ValueError(
                    f"every labelled predicate is {value}: a calibration needs both labels"
                )
            for f in range(self.folds):
                train = sum(1 for fold, _ in mine if fold != f)
                if train < MIN_EXAMPLES:
                    raise ValueError(
                        f"fold {f} of {self.folds} leaves {train} labelled {kind} questions "
                        f"to fit on; need {MIN_EXAMPLES} (send more examples or lower `folds`)"
                    )

    def _check_mcq(self) -> None:
        """Temperature only; every training split of the folds at least MIN_EXAMPLES."""
        if self.method == "platt":
            raise ValueError(
                "target 'mcq' is fitted by temperature only: questions have different numbers "
                "of options, and a softmax over them has no Platt scaling"
            )
        if self.mode != "direct":
            raise ValueError(
                "target 'mcq' is read as /v1/mcq/answer reads it, the option letters at once: "
                "mode must be 'direct'"
            )
        n = len(self.examples)
        if n < self.folds:
            raise ValueError(f"{self.folds} folds need at least {self.folds} examples, got {n}")
        train = n - -(-n // self.folds)  # the smallest training split of the k folds
        if train < MIN_EXAMPLES:
            raise ValueError(
                f"{n} examples in {self.folds} folds leave {train} to fit a fold on; need "
                f"{MIN_EXAMPLES} (send more examples or lower `folds`)"
            )

    def mcq_examples(self) -> list[MCQExample]:
        return [ex for ex in self.examples if isinstance(ex, MCQExample)]

    def decision_rows(self) -> list[tuple[int, int, str, int]]:
        """``(example, question, question type, correct label index)`` per labelled
        question, in order."""
        return [
            (e, q, kind, answer)
            for e, ex in enumerate(self.decision_examples())
            for q, kind, answer in ex.labelled()
        ]

    def decision_examples(self) -> list[DecisionExample]:
        return [ex for ex in self.examples if isinstance(ex, DecisionExample)]

    def labels(self) -> list[int]:
        """The binary label of each example as fitted (compare: ``pair_labels``)."""
        if self.target == "compare":
            return pair_labels(len(self.examples))
        return [ex.label for ex in self.examples if isinstance(ex, OutcomeExample)]

    def outcome_examples(self) -> list[OutcomeExample]:
        return [ex for ex in self.examples if isinstance(ex, OutcomeExample)]

    def compare_examples(self) -> list[CompareExample]:
        return [ex for ex in self.examples if isinstance(ex, CompareExample)]


class ReliabilityBin(BaseModel):
    """One equal-mass bin: its size, mean predicted probability, observed frequency of label 1,
    and its smallest and largest prediction."""

    count: int
    mean_predicted: float
    observed: float
    lower: float
    upper: float


class CalibrationMetrics(BaseModel):
    """Binary calibration figures of one set of probabilities against labels."""

    n: int
    base_rate: float
    mean_probability: float
    nll: float | None
    brier: float | None
    ece: float | None = Field(description="Expected calibration error over the equal-mass bins.")
    auroc: float | None
    bins: list[ReliabilityBin] = Field(description="The reliability bins the ECE is read from.")


class CalibrationFit(BaseModel):
    """The fitted map's figures beside the raw read's."""

    raw: CalibrationMetrics
    calibrated: CalibrationMetrics


class TypeFit(BaseModel):
    """A decisions calibration's fit of one question type."""

    questions: int = Field(description="Labelled questions of this type.")
    temperature: float
    at_bound: bool
    fit_set: CalibrationFit
    held_out: CalibrationFit


class ProbabilityCalibration(BaseModel):
    """A fitted probability calibration, stored per tenant with the model it was read on."""

    id: str
    object: Literal["calibration"] = "calibration"
    name: str = ""
    target: CalibrationTarget
    method: ScalingMethod
    parameters: dict[str, float | bool] = Field(
        description="temperature: {temperature}; platt: {a, b}; decisions: a temperature per "
        "question type fitted, {predicate, choice, score}; at_bound when a fit stopped at a "
        "bound of its range."
    )
    model: str
    mode: JudgeMode
    reasoning_tokens: int | None = Field(description="The rationale budget (reasoning mode).")
    examples: int = Field(description="Reads fitted: examples, pairs or labelled questions.")
    positives: int = Field(
        description="outcome: examples labelled 1; compare: pairs fitted in the label-1 "
        "orientation; decisions and mcq: questions whose raw read puts its largest "
        "probability on the correct label."
    )
    folds: int
    bins: int
    binning: Literal["equal_mass"] = "equal_mass"
    seed: int
    fit_set: CalibrationFit = Field(description="Fitted and scored on every example.")
    held_out: CalibrationFit = Field(
        description="k-fold cross-validation: each fold scored by a map fitted on the others. "
        "decisions: top-label (each read's confidence against whether its choice is right), "
        "folds held out by example, every type pooled."
    )
    types: dict[str, TypeFit] | None = Field(
        default=None, description="decisions: the fit of each question type."
    )
    created_at: float
    default: bool = Field(default=False, description="This tenant's default for its target.")


class ProbabilityCalibrationResponse(Metered, ProbabilityCalibration):
    pass


class ProbabilityCalibrationList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ProbabilityCalibration]


class CalibrationChoice(ServiceModel):
    """A request whose answer is a probability names the calibration it goes through."""

    calibration_id: str | None = Field(
        default=None,
        description="A probability calibration of this tenant (POST /v1/calibrations) to map "
        "the score through; 'none' for the raw read. Unset: the tenant's default for this "
        "target, when one is marked and was fitted for this mode and model.",
    )


def check_outcome_method(method: str, calibration_id: str | None) -> None:
    """A calibration of target ``outcome`` maps outcome scores only: a fused, process or
    compare score is another quantity (and fusing a mapped outcome would reorder responses)."""
    if calibration_id not in (None, NO_CALIBRATION) and method != "outcome":
        raise ValueError(
            f"calibration_id applies to method='outcome' (its target), not {method!r}; use "
            "method='outcome' or drop calibration_id"
        )


class CalibratedFields(BaseModel):
    """What a calibrated answer adds: the raw value beside the calibrated one."""

    raw_score: float | None = Field(
        default=None,
        description="The model's raw probability, sigmoid(logit), when a calibration mapped "
        "`score`; null otherwise (then `score` is the raw read).",
    )
    calibration: CalibrationInfo | None = Field(
        default=None, description="The calibration `score` went through; null: none."
    )


class CalibrationDefault(ServiceModel):
    """PUT /v1/calibrations/defaults/{target}."""

    calibration_id: str


class CalibrationDefaults(BaseModel):
    object: Literal["calibration.defaults"] = "calibration.defaults"
    defaults: dict[str, str] = Field(description="target -> the tenant's default calibration id.")
