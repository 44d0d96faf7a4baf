"""Wire models of ``POST /v1/rewards``: a mixed RL batch, a verifier per sample (docs/api.md).

Every item carries its own verification spec (``verifier``), or several named ones
(``components``) combined by their weights or a ``formula``. The answer gives each item its
``reward``, what decided it, and its ``reward_components`` (the values per component name, for
trainers that normalize per component, as GDPO does).

Every spec is checked here, before any engine work: a bad one is a 422 naming the item and the
field (``items.3.components.fmt.string.pattern: ...``).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Final, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from service.protocol.base import JudgeMode, ModelChoice, ServiceModel, _non_blank
from service.protocol.code import CodeTests
from service.protocol.decisions import DecisionRequest
from service.protocol.limits import Documents, ReasoningTokens, Reference, Samples, Text, Texts
from service.scoring.rewards import (
    FUNCTIONS,
    LETTERS,
    Formula,
    FormulaError,
    RubricAggregation,
    StringOperation,
    compile_pattern,
    gold_letter,
    pattern_search,
    string_input,
)

MAX_COMPONENTS: Final = 16
# A rubric's criteria are read over one prefill, one short read each: the decisions path's cap.
MAX_CRITERIA: Final = 64
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number")
    return value


class _Spec(ServiceModel):
    weight: float = Field(
        default=1.0,
        description="As a component without a formula: its weight in the item's reward "
        "(Σ weight·value / Σ positive weights). Not allowed with a formula.",
    )

    @field_validator("weight")
    @classmethod
    def _w(cls, v: float) -> float:
        return _finite(v, "weight")


class _Judged(_Spec):
    """A spec the model reads; unset options take the request's, then the settings'."""

    mode: JudgeMode | None = Field(default=None, description="Default: the request's mode.")
    reasoning_tokens: Annotated[int | None, ReasoningTokens] = Field(
        default=None, ge=1, description="Default: the request's reasoning_tokens."
    )
    samples: Annotated[int, Samples] = Field(
        default=1,
        ge=1,
        description="Sampled rationales, probabilities averaged (needs mode 'reasoning' here).",
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Rationale temperature; default 0 for one sample, 0.7 for several.",
    )

    @model_validator(mode="after")
    def _samples(self) -> _Judged:
        if self.samples > 1 and self.mode != "reasoning":
            raise ValueError("samples > 1 needs mode 'reasoning' on the same spec")
        return self


class MathSpec(_Judged):
    """The response's final answer against ``reference`` by rule (math-verify), the model
    where the rule cannot decide (docs/methods.md E)."""

    type: Literal["math"]
    reference: Annotated[str, Reference] = Field(
        description="The gold answer, or a reference solution (its final answer is compared)."
    )
    model_fallback: bool = Field(
        default=True,
        description="false: rule only (an undecided check is 0, reason given), no engine call.",
    )

    @field_validator("reference")
    @classmethod
    def _ref(cls, v: str) -> str:
        return _non_blank(v, "reference")


class ChoiceSpec(_Spec):
    """Multiple choice: the gold letter against the letter the response ends on (its last
    ``ANSWER: X`` line, a response that is only a letter, or "the answer is (X)")."""

    type: Literal["choice"]
    answer: Annotated[str, Reference] = Field(
        description="The gold letter, or the gold option's text (then send `options`, or the "
        "response's final answer text is compared with it)."
    )
    options: Annotated[list[str] | None, Texts] = Field(
        default=None, description="The options in letter order, to map gold text to a letter."
    )

    @model_validator(mode="after")
    def _gold(self) -> ChoiceSpec:
        _non_blank(self.answer, "answer")
        if self.options is not None:
            if not 2 <= len(self.options) <= len(LETTERS):
                raise ValueError(f"options has {len(self.options)} items; send 2 to {len(LETTERS)}")
            if gold_letter(self.answer, self.options) is None:
                raise ValueError(
                    f"answer {self.answer!r} is neither a letter within the {len(self.options)} "
                    "options nor the text of one"
                )
        return self


class StringSpec(_Spec):
    """A string check with OpenAI's ``string_check`` semantics (plus ``contains`` and
    ``regex``); 1 or 0."""

    type: Literal["string"]
    operation: StringOperation = Field(
        description="eq / ne: the text equals / differs from reference; like (= contains): "
        "reference is a substring; ilike: a substring ignoring case; regex: `pattern` matches "
        "somewhere in the text."
    )
    reference: Annotated[str | None, Reference] = Field(
        default=None, description="For eq, ne, like, contains, ilike."
    )
    pattern: Annotated[str | None, Reference] = Field(
        default=None,
        description="For regex (Python syntax, the `regex` module), run with a time bound.",
    )
    input: Literal["response", "answer"] = Field(
        default="response",
        description="response: the whole response, stripped; answer: its final answer as the "
        "rule verifier extracts it (\\boxed{}, ####, ANSWER:, ...; '' when none).",
    )

    @model_validator(mode="after")
    def _operands(self) -> StringSpec:
        if self.operation == "regex":
            if self.pattern is None or self.reference is not None:
                raise ValueError("operation 'regex' takes `pattern` (and no reference)")
            compile_pattern(self.pattern)
        elif self.reference is None or self.pattern is not None:
            raise ValueError(f"operation {self.operation!r} takes `reference` (and no pattern)")
        return self

    def operand(self) -> str:
        value = self.pattern if self.operation == "regex" else self.reference
        assert value is not None  # checked by _operands
        return value


class ModelSpec(_Judged):
    """The served judge's P(correct) (an outcome judgment), with optional criteria and
    reference in its prompt."""

    type: Literal["model"]
    criteria: Annotated[str | None, Reference] = Field(default=None)
    reference: Annotated[str | None, Reference] = Field(default=None)


class RubricCriterion(ServiceModel):
    text: Annotated[str, Reference] = Field(
        description="A statement about the response, read as a yes/no question."
    )
    weight: float = Field(
        default=1.0,
        description="Its weight; negative for a fault (e.g. -2 for 'contradicts the "
        "reference'), which costs reward when present.",
    )
    required: bool = Field(
        default=False, description="The reward is 0 when this criterion does not hold."
    )

    @field_validator("text")
    @classmethod
    def _t(cls, v: str) -> str:
        return _non_blank(v, "text")

    @field_validator("weight")
    @classmethod
    def _w(cls, v: float) -> float:
        return _finite(v, "weight")


class RubricSpec(_Judged):
    """Weighted criteria, each read as P(yes) over one shared prefill of the prompt, the
    response and the reference (docs/methods.md K.3)."""

    type: Literal["rubric"]
    criteria: list[RubricCriterion] = Field(description=f"1 to {MAX_CRITERIA} criteria.")
    aggregation: RubricAggregation = Field(
        default="weighted",
        description="weighted: Σ weight·P(yes) / Σ positive weights, clipped to [0, 1]; "
        "all_required: 1 when every required criterion holds (every criterion when none is "
        "marked), else 0; min: the least satisfied criterion. A required criterion that does "
        "not hold makes any of them 0.",
    )
    reference: Annotated[str | None, Reference] = Field(
        default=None, description="Shown to the judge with the response."
    )

    @model_validator(mode="after")
    def _weights(self) -> RubricSpec:
        n = len(self.criteria)
        if not 1 <= n <= MAX_CRITERIA:
            raise ValueError(f"criteria has {n} items; send 1 to {MAX_CRITERIA}")
        if self.aggregation != "all_required" and not any(c.weight > 0 for c in self.criteria):
            raise ValueError(
                "no criterion has a positive weight: the reward is normalized by the positive "
                "weights; give at least one criterion a weight > 0"
            )
        return self


class CodeSpec(_Spec, CodeTests):
    """The response's code run against ``tests`` in the sandbox (needs code execution on):
    ``language``, ``test_timeout_s`` and ``code_reward`` as a judgment's code fields."""

    type: Literal["code"]

    @model_validator(mode="after")
    def _has_tests(self) -> CodeSpec:
        if not self.tests:
            raise ValueError("a code spec needs tests: [{input, output} or {assert}, ...]")
        return self


class RewardModelSpec(_Spec):
    """The served reward model's score (a sequence RM or PRM on vLLM's pooling runner)."""

    type: Literal["reward_model"]


Spec = Annotated[
    MathSpec | ChoiceSpec | StringSpec | ModelSpec | RubricSpec | CodeSpec | RewardModelSpec,
    Field(discriminator="type"),
]
SPEC_TYPES: Final = ("math", "choice", "string", "model", "rubric", "code", "reward_model")


class RewardItem(ServiceModel):
    """One sample: its prompt and response, and how to verify it."""

    id: str | None = Field(default=None, description="Echoed in its result.")
    prompt: Annotated[str, Text] = Field(description="The task the response answers.")
    response: Annotated[str, Text] = Field(
        description="The response under verification (an empty one gets 0 from a model read)."
    )
    verifier: Spec | None = Field(
        default=None, description="One spec for the whole reward; or send `components`."
    )
    components: dict[str, Spec] | None = Field(
        default=None,
        description=f"1-{MAX_COMPONENTS} named specs (names are identifiers); the reward is "
        "their weighted mean, or `formula`'s value.",
    )
    formula: str | None = Field(
        default=None,
        description="With components: an expression over their names, e.g. "
        "'0.8 * correct + 0.2 * format'; + - * / ** ^ (a power), parentheses, and "
        + ", ".join(FUNCTIONS)
        + ". Nothing else is allowed.",
    )
    # The formula as checked at validation, so it is parsed once per process.
    _parsed: Formula | None = PrivateAttr(default=None)

    @field_validator("prompt")
    @classmethod
    def _p(cls, v: str) -> str:
        return _non_blank(v, "prompt")

    @model_validator(mode="after")
    def _shape(self) -> RewardItem:
        if (self.verifier is None) == (self.components is None):
            raise ValueError("send exactly one of `verifier` (one spec) or `components`")
        if self.components is None:
            if self.formula is not None:
                raise ValueError("formula combines components; send `components` with it")
            return self
        self._check_components(self.components)
        return self

    def _check_components(self, components: dict[str, Any]) -> None:
        n = len(components)
        if not 1 <= n <= MAX_COMPONENTS:
            raise ValueError(f"components has {n} entries; send 1 to {MAX_COMPONENTS}")
        for name in components:
            if not re.match(_IDENTIFIER, name) or name in FUNCTIONS:
                raise ValueError(
                    f"component name {name!r}: use an identifier (letters, digits, _) that is "
                    "not a function name of the formula"
                )
        if self.formula is None:
            if not any(spec.weight > 0 for spec in components.values()):
                raise ValueError(
                    "no component has a positive weight: without a formula the reward is "
                    "Σ weight·value / Σ positive weights"
                )
            return
        heavy = [name for name, spec in components.items() if spec.weight != 1.0]
        if heavy:
            raise ValueError(
                f"components[{heavy[0]!r}].weight is set and so is formula; write the weights "
                "into the formula"
            )
        try:
            self._parsed = Formula.parse(self.formula, set(components))
        except FormulaError as exc:
            raise ValueError(f"formula {exc}") from exc

    def parsed_formula(self) -> Formula | None:
        """The formula as validated (None without one)."""
        if self.formula is not None and self._parsed is None:  # built without validation
            self._parsed = Formula.parse(self.formula, set(self.components or ()))
        return self._parsed

    def specs(self) -> dict[str, Spec]:
        """The item's specs by component name ('' for a single verifier)."""
        if self.components is not None:
            return dict(self.components)
        assert self.verifier is not None  # checked by _shape
        return {"": self.verifier}

    def check_patterns(self, where: str) -> None:
        """Run each regex on the text it will read, under its time bound: a catastrophic
        pattern is refused here, at admission, instead of failing later."""
        for name, spec in self.specs().items():
            if isinstance(spec, StringSpec) and spec.operation == "regex":
                field = f"{where}.components.{name}" if name else f"{where}.verifier"
                try:
                    pattern_search(spec.operand(), string_input(self.response, spec.input))
                except ValueError as exc:
                    raise ValueError(f"{field}.pattern: {exc}") from exc


class RewardsRequest(ModelChoice):
    """POST /v1/rewards."""

    items: Annotated[list[RewardItem], Documents] = Field(
        description="The samples, each with its own verifier; results come back in order."
    )
    mode: JudgeMode | None = Field(
        default=None, description="How model-read specs judge; default VERIFIER_REWARD__MODE."
    )
    reasoning_tokens: Annotated[int | None, ReasoningTokens] = Field(
        default=None, ge=1, description="Default VERIFIER_REWARD__REASONING_TOKENS."
    )
    cache: bool = Field(default=True, description="Answer repeated judgments from the cache.")
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        description="Answer within this many seconds of arrival: what is not decided by then "
        "gets `fallback_reward` and `timed_out: true`, and its work is cancelled. Unset: wait "
        "for every item (up to VERIFIER_LIMITS__REQUEST_TIMEOUT_S).",
    )
    fallback_reward: float = Field(
        default=0.0,
        description="The reward of an item that timed out or failed (always flagged).",
    )

    @model_validator(mode="after")
    def _check(self) -> RewardsRequest:
        if not self.items:
            raise ValueError("items must hold at least one item")
        _finite(self.fallback_reward, "fallback_reward")
        return self

    def check_patterns(self) -> None:
        """Every regex against its item's text, under the time bound (see RewardItem)."""
        for i, item in enumerate(self.items):
            item.check_patterns(f"items.{i}")


# --- conversions ------------------------------------------------------------------------------

RUBRIC_STATEMENT: Final = "The assistant's response satisfies this criterion: {text}"
REFERENCE_NOTE: Final = "A reference answer, for grading only: {reference}"


def rubric_decision(
    spec: RubricSpec, prompt: str, response: str, mode: JudgeMode, reasoning_tokens: int
) -> DecisionRequest:
    """A rubric as one decision: the prompt, the response (and the reference) as its input,
    one predicate per criterion, so every criterion is read over one shared prefill."""
    items: list[dict[str, str]] = [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": response or "(empty)"},
    ]
    if spec.reference is not None:
        items.append(
            {"role": "developer", "content": REFERENCE_NOTE.format(reference=spec.reference)}
        )
    return DecisionRequest.model_validate(
        {
            "input": items,
            "model": "rubric",
            "questions": [
                {"type": "predicate", "instructions": RUBRIC_STATEMENT.format(text=c.text)}
                for c in spec.criteria
            ],
            "mode": mode,
            "reasoning_tokens": reasoning_tokens,
            "samples": spec.samples,
            "temperature": spec.temperature,
        }
    )
