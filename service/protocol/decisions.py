"""Wire models of ``POST /v1/decisions``: OpenAI's Decisions API shapes (docs/methods.md F).

Request and response mirror the OpenAI Python SDK's ``decision_create_params`` and ``decision``
types field for field, so ``client.decisions.create(...)`` works unchanged; the fields after
``safety_identifier`` are this service's optional extensions. Images are part of the shape
and refused with a 422 (the served models read text).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag, model_validator

from service.protocol.base import BudgetOptions, JudgeMode, Metered, ServiceModel, Usage
from service.protocol.calibrated import DecisionCalibrationInfo, prior_part, probability_part
from service.protocol.limits import ReasoningTokens, Samples
from service.scoring.decisions import Block, QuestionSpec

# OpenAI allows 400 questions and 255 choices. Here every question is one engine request
# sharing the input's prefix: 64 keeps one decision from filling the engine's batch and the
# worker's in-flight jobs (64 by default). Choices are read as the letters A-Z, each one token
# in every tokenizer we serve; 26 letters with their " X" spellings are 52 token ids, inside
# vLLM's cap of 128 exactly-read ids per request. Levels are the digits 0-9.
MAX_QUESTIONS = 64
MIN_CHOICES, MAX_CHOICES = 2, 26
MIN_LEVELS, MAX_LEVELS = 2, 10
# Reads of one request (questions x cyclic orders x samples): vLLM's default batch of 256
# sequences, so that the extensions cannot multiply one decision into thousands of requests.
MAX_READS = 256
DecisionDebias = Literal["none", "pride", "contextual"]

ImageDetail = Literal["low", "high", "auto", "original"]
ItemStatus = Literal["in_progress", "completed", "incomplete"]


# --- input parts -------------------------------------------------------------------------------


class CacheBreakpoint(ServiceModel):
    """Accepted for compatibility; vLLM's prefix cache needs no breakpoints (it matches by
    content)."""

    mode: Literal["explicit"]


class InputText(ServiceModel):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputImage(ServiceModel):
    """Part of the shape so that an image is refused by name (422), never misread."""

    type: Literal["input_image"]
    image_url: str
    detail: ImageDetail | None = None
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputJSON(ServiceModel):
    """A JSON object or an array of objects, shown to the model as compact JSON text."""

    type: Literal["input_json"]
    data: dict[str, Any] | list[dict[str, Any]]


class OutputText(ServiceModel):
    type: Literal["output_text"]
    text: str


class RefusalPart(ServiceModel):
    type: Literal["refusal"]
    refusal: str


Part = Annotated[
    InputText | InputImage | InputJSON | OutputText | RefusalPart, Field(discriminator="type")
]
QuestionPart = Annotated[InputText | InputImage | InputJSON, Field(discriminator="type")]

# Which parts each role may hold (the SDK's per-role message types).
ROLE_PARTS: dict[str, frozenset[str]] = {
    "user": frozenset({"input_text", "input_image", "input_json"}),
    "developer": frozenset({"input_text"}),
    "system": frozenset({"input_text"}),
    "assistant": frozenset({"output_text", "refusal"}),
}


# --- input items -------------------------------------------------------------------------------


class Message(ServiceModel):
    """A user, developer, system or assistant message (one model: the role decides its parts)."""

    role: Literal["user", "developer", "system", "assistant"]
    content: str | list[Part]
    type: Literal["message"] = "message"
    phase: Literal["commentary", "final_answer"] | None = None

    @model_validator(mode="after")
    def _parts(self) -> Message:
        if self.phase is not None and self.role != "assistant":
            raise ValueError("phase is for assistant messages only")
        if isinstance(self.content, list):
            allowed = ROLE_PARTS[self.role]
            for i, part in enumerate(self.content):
                if part.type not in allowed:
                    raise ValueError(
                        f"content[{i}] is {part.type}; a {self.role} message holds "
                        f"{', '.join(sorted(allowed))}"
                    )
        return self


class FunctionCall(ServiceModel):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    namespace: str | None = None
    status: ItemStatus | None = None


class FunctionCallOutput(ServiceModel):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[Annotated[InputText | InputImage, Field(discriminator="type")]]
    id: str | None = None
    status: ItemStatus | None = None


class CustomToolCall(ServiceModel):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None
    status: ItemStatus | None = None


class CustomToolCallOutput(ServiceModel):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[Annotated[InputText | InputImage, Field(discriminator="type")]]
    id: str | None = None
    status: ItemStatus | None = None


def _item_tag(value: Any) -> str:
    """Messages may leave ``type`` out (it defaults to "message")."""
    if isinstance(value, dict):
        return str(value.get("type", "message"))
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[Message, Tag("message")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[CustomToolCall, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutput, Tag("custom_tool_call_output")],
    Discriminator(_item_tag),
]

# An output names the call it answers, and only an earlier call of its own kind.
CALL_OF_OUTPUT = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
}


# --- questions ---------------------------------------------------------------------------------


class _Question(ServiceModel):
    instructions: str | list[QuestionPart]
    name: str | None = Field(default=None, description="Echoed in the answer; unique if given.")

    def spec(self) -> QuestionSpec:
        """The question as the prompt shows it."""
        raise NotImplementedError


class PredicateQuestion(_Question):
    """Estimate how likely it is that a statement about the input is true."""

    type: Literal["predicate"]

    def spec(self) -> QuestionSpec:
        return QuestionSpec("predicate", parts_text(self.instructions))


class ChoiceOption(ServiceModel):
    # Typed: the string "true" and the boolean true are distinct values.
    value: str | bool
    description: str | None = None


class ChoiceQuestion(_Question):
    """Choose from the supplied options; read as the letters A, B, ... in the given order."""

    type: Literal["choice"]
    choices: list[ChoiceOption]

    def spec(self) -> QuestionSpec:
        options = tuple((value_text(c.value), c.description) for c in self.choices)
        return QuestionSpec("choice", parts_text(self.instructions), options)


class ScoreLevel(ServiceModel):
    label: str
    description: str | None = None


class ScoreQuestion(_Question):
    """Rate the input against ordered levels; level i is read as the digit i."""

    type: Literal["score"]
    levels: list[ScoreLevel]

    def spec(self) -> QuestionSpec:
        levels = tuple((level.label, level.description) for level in self.levels)
        return QuestionSpec("score", parts_text(self.instructions), levels)


Question = Annotated[
    PredicateQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")
]


class PromptCacheOptions(ServiceModel):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] = "30m"


# --- the request -------------------------------------------------------------------------------


def _images_in(parts: object) -> list[int]:
    if not isinstance(parts, list):
        return []
    return [i for i, p in enumerate(parts) if isinstance(p, InputImage)]


class DecisionRequest(BudgetOptions):
    """POST /v1/decisions (the SDK's ``DecisionCreateParams``, then this service's options)."""

    input: str | list[InputItem] = Field(
        description="A text, or an ordered list of messages, function calls and their outputs, "
        "custom tool calls and their outputs (an agent's trajectory)."
    )
    model: str = Field(description="Accepted as sent; the served model answers.")
    questions: list[Question] = Field(
        description=f"1-{MAX_QUESTIONS} predicate, choice or score questions; answers come back "
        "in the same order."
    )
    prompt_cache_key: str | None = Field(
        default=None, description="Accepted; vLLM's prefix cache matches by content."
    )
    prompt_cache_options: PromptCacheOptions | None = None
    safety_identifier: str | None = Field(default=None, description="Accepted, not used.")
    min_label_probability: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Extension: a question whose labels get less total probability than this "
        "at the answer slot (the model wanted to say something else) is answered with a "
        "refusal. 0: never.",
    )
    permutations: int = Field(
        default=1,
        ge=1,
        le=MAX_CHOICES,
        description="Extension, choice questions: read each under this many cyclic orders of "
        "its choices (at most one per choice) and average each value's probability over them "
        "(docs/methods.md F.3). Each answer's `passes` says how many reads it averages.",
    )
    debias: DecisionDebias = Field(
        default="none",
        description="Extension, choice questions: remove the letter-label prior from every "
        "read (docs/methods.md F.4). pride: with a PriDe calibration (calibration_id) fitted "
        "for the question's number of choices; contextual: divide by the letter probabilities "
        "of content-free reads in this prompt format (3 more reads per number of choices), or "
        "by a stored contextual calibration's.",
    )
    calibration_id: str | None = Field(
        default=None,
        description="Extension. An MCQ prior of this tenant (cal_..., POST "
        "/v1/mcq/calibrations) for debias 'pride' or 'contextual'; or a probability "
        "calibration (pcal_..., POST /v1/calibrations, target 'decisions') that maps every "
        "answer's probabilities through its question type's temperature; 'none' for the raw "
        "read. Unset: the tenant's default decisions calibration, when one is marked and was "
        "fitted for this mode and model.",
    )
    mode: JudgeMode = Field(
        default="direct",
        description="Extension. direct: read each question's labels at once; reasoning: the "
        "model first thinks within reasoning_tokens, then its labels are read after "
        "'Answer:' (docs/methods.md F.5).",
    )
    reasoning_tokens: Annotated[int, ReasoningTokens] = Field(
        default=256, ge=1, description="Extension: the thinking budget per read (reasoning)."
    )
    samples: Annotated[int, Samples] = Field(
        default=1,
        ge=1,
        description="Extension: sampled thoughts per read (reasoning); probabilities averaged.",
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Thinking temperature; default 0 for one sample, 0.7 for several.",
    )
    seed: int | None = Field(default=None, description="Base seed; sample i uses seed + i.")

    @model_validator(mode="after")
    def _check(self) -> DecisionRequest:
        self._check_input()
        self._check_questions()
        if self.debias == "pride" and self.prior_id is None:
            raise ValueError(
                "debias='pride' needs calibration_id naming an MCQ prior (cal_...): fit one "
                "with POST /v1/mcq/calibrations (method 'pride', k = the number of choices)"
            )
        if self.debias == "none" and self.prior_id is not None:
            raise ValueError(
                f"calibration_id {self.prior_id!r} is an MCQ prior, read only with debias "
                "'pride' or 'contextual' (a probability calibration's id starts with pcal_)"
            )
        if self.samples > 1 and self.mode != "reasoning":
            raise ValueError(
                "samples > 1 needs mode='reasoning': a direct read is exact, so repeating it "
                "adds nothing"
            )
        if self.reads > MAX_READS:
            raise ValueError(
                f"{len(self.questions)} questions with permutations={self.permutations} and "
                f"samples={self.samples} are {self.reads} reads, over {MAX_READS}; lower "
                "permutations or samples, or split the questions over several requests"
            )
        return self

    @property
    def prior_id(self) -> str | None:
        """``calibration_id`` when it names an MCQ prior (PriDe, contextual), else None."""
        return prior_part(self.calibration_id)

    @property
    def probability_calibration_id(self) -> str | None:
        """``calibration_id`` when it names a probability calibration (or ``"none"``)."""
        return probability_part(self.calibration_id)

    @property
    def reads(self) -> int:
        """Engine reads of the questions: per question, its cyclic orders times samples."""
        return sum(spec.passes(self.permutations) for spec in self.specs()) * self.samples

    def blocks(self) -> list[Block]:
        """The input as blocks: one headerless text, or one block per item, in order."""
        return input_blocks(self.input)

    def specs(self) -> list[QuestionSpec]:
        """Every question as the prompt shows it, in order."""
        return [q.spec() for q in self.questions]

    def resolved_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.samples == 1 else 0.7

    @property
    def choice_counts(self) -> list[int]:
        """The number of choices of every choice question, in order."""
        return [len(q.choices) for q in self.questions if isinstance(q, ChoiceQuestion)]

    def _check_input(self) -> None:
        check_input(self.input)

    def _check_questions(self) -> None:
        check_questions(self.questions)


def check_input(items: str | list[InputItem]) -> None:
    """An input is a non-blank text, or items whose outputs follow their calls; no images."""
    if isinstance(items, str):
        if not items.strip():
            raise ValueError("input must not be empty or whitespace only")
        return
    if not items:
        raise ValueError("input must hold at least one item")
    calls: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if isinstance(item, Message):
            _no_images(_images_in(item.content), f"{where}.content")
        elif isinstance(item, FunctionCall | CustomToolCall):
            calls.add((item.type, item.call_id))
        else:
            _no_images(_images_in(item.output), f"{where}.output")
            if (CALL_OF_OUTPUT[item.type], item.call_id) not in calls:
                raise ValueError(
                    f"{where}.call_id {item.call_id!r} matches no earlier "
                    f"{CALL_OF_OUTPUT[item.type]}; an output follows its call"
                )


def check_questions(questions: list[Question]) -> None:
    """1 to MAX_QUESTIONS questions: non-blank, unique names, valid choices and levels."""
    n = len(questions)
    if not 1 <= n <= MAX_QUESTIONS:
        raise ValueError(
            f"questions has {n} items; send 1 to {MAX_QUESTIONS} (each question is one "
            "engine read; split larger sets over several requests)"
        )
    names: dict[str, int] = {}
    for i, q in enumerate(questions):
        where = f"questions[{i}]"
        _no_images(_images_in(q.instructions), f"{where}.instructions")
        if _text_of(q.instructions).strip() == "":
            raise ValueError(f"{where}.instructions must not be empty")
        if q.name is not None:
            if q.name in names:
                raise ValueError(f"{where}.name {q.name!r} repeats questions[{names[q.name]}]")
            names[q.name] = i
        if isinstance(q, ChoiceQuestion):
            _check_choices(q, where)
        elif isinstance(q, ScoreQuestion):
            _check_levels(q, where)


def input_blocks(items: str | list[InputItem]) -> list[Block]:
    """An input as blocks: one headerless text, or one block per item, in order."""
    if isinstance(items, str):
        return [Block("", items)]
    return [item_block(item) for item in items]


def value_text(value: str | bool) -> str:
    """How a choice value is shown: booleans as JSON spells them."""
    return json.dumps(value) if isinstance(value, bool) else value


def parts_text(content: object) -> str:
    """Text of a string or of a list of text, JSON, output-text and refusal parts."""
    if isinstance(content, str):
        return content
    assert isinstance(content, list)  # the request model admits strings and part lists only
    out = []
    for part in content:
        if isinstance(part, InputText | OutputText):
            out.append(part.text)
        elif isinstance(part, InputJSON):
            out.append(json.dumps(part.data, ensure_ascii=False, separators=(",", ":")))
        elif isinstance(part, RefusalPart):
            out.append(f"(refused) {part.refusal}")
        # images never get here: the request model refuses them
    return "\n".join(out)


def item_block(item: InputItem) -> Block:
    """One input item as the prompt shows it: a header naming it, and its text."""
    if isinstance(item, Message):
        header = item.role if item.phase is None else f"{item.role}, {item.phase}"
        return Block(header, parts_text(item.content))
    if isinstance(item, FunctionCall):
        name = f"{item.namespace}.{item.name}" if item.namespace else item.name
        return Block(f"function_call {name}, call_id {item.call_id}", item.arguments)
    if item.type == "custom_tool_call":
        name = f"{item.namespace}.{item.name}" if item.namespace else item.name
        return Block(f"custom_tool_call {name}, call_id {item.call_id}", item.input)
    return Block(f"{item.type}, call_id {item.call_id}", parts_text(item.output))


def _text_of(instructions: str | list[Any]) -> str:
    if isinstance(instructions, str):
        return instructions
    return "".join(p.text if isinstance(p, InputText) else "x" for p in instructions)


def _no_images(indexes: list[int], where: str) -> None:
    if indexes:
        raise ValueError(
            f"{where}[{indexes[0]}] is an input_image; images are not supported (the served "
            "model reads text): describe the image in input_text or send input_json"
        )


def _check_choices(q: ChoiceQuestion, where: str) -> None:
    k = len(q.choices)
    if not MIN_CHOICES <= k <= MAX_CHOICES:
        raise ValueError(
            f"{where}.choices has {k} choices; send {MIN_CHOICES} to {MAX_CHOICES} (each is read "
            "as one letter label, A-Z)"
        )
    seen: dict[tuple[type, str | bool], int] = {}
    for j, c in enumerate(q.choices):
        key = (type(c.value), c.value)
        if key in seen:
            raise ValueError(
                f"{where}.choices[{j}].value {c.value!r} repeats choices[{seen[key]}]; "
                "each choice must be unique"
            )
        seen[key] = j
        if isinstance(c.value, str) and not c.value.strip():
            raise ValueError(f"{where}.choices[{j}].value must not be empty")


def _check_levels(q: ScoreQuestion, where: str) -> None:
    n = len(q.levels)
    if not MIN_LEVELS <= n <= MAX_LEVELS:
        raise ValueError(
            f"{where}.levels has {n} levels; send {MIN_LEVELS} to {MAX_LEVELS} (each is read as "
            "one digit label, 0-9)"
        )
    seen: dict[str, int] = {}
    for j, level in enumerate(q.levels):
        if not level.label.strip():
            raise ValueError(f"{where}.levels[{j}].label must not be empty")
        if level.label in seen:
            raise ValueError(
                f"{where}.levels[{j}].label {level.label!r} repeats levels[{seen[level.label]}]"
            )
        seen[level.label] = j


# --- the response ------------------------------------------------------------------------------


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


# --- a labelled decision (POST /v1/calibrations, target decisions) ------------------------------

Label = bool | int | str | None


class DecisionExample(ServiceModel):
    """One labelled decision: the input and questions a /v1/decisions request sends, and the
    correct value of each question (``null``: not labelled, read but not fitted)."""

    input: str | list[InputItem]
    questions: list[Question]
    answers: list[Label] = Field(
        description="One per question: a predicate's true or false; a choice's value (typed, as "
        "in `choices`); a score's level label or its index."
    )

    @model_validator(mode="after")
    def _check(self) -> DecisionExample:
        check_input(self.input)
        check_questions(self.questions)
        if len(self.answers) != len(self.questions):
            raise ValueError(
                f"{len(self.answers)} answers for {len(self.questions)} questions: give one per "
                "question (null for a question left unlabelled)"
            )
        for i, q in enumerate(self.questions):
            label_index(q, self.answers[i], f"answers[{i}]")
        return self

    def labelled(self) -> list[tuple[int, str, int]]:
        """``(question index, question type, index of the correct label)`` per labelled
        question."""
        out: list[tuple[int, str, int]] = []
        for i, (q, a) in enumerate(zip(self.questions, self.answers, strict=True)):
            index = label_index(q, a, f"answers[{i}]")
            if index is not None:
                out.append((i, q.type, index))
        return out

    def request(self, mode: JudgeMode, reasoning_tokens: int, model: str) -> DecisionRequest:
        """The /v1/decisions request a fit reads: one order of the choices, no debiasing."""
        return DecisionRequest.model_validate(
            {
                "input": self.input,
                "questions": self.questions,
                "model": model,
                "mode": mode,
                "reasoning_tokens": reasoning_tokens,
            }
        )


def label_index(q: Question, label: Label, where: str) -> int | None:
    """The index of ``label`` among ``q``'s labels as read (a predicate: 0 true, 1 false);
    None for ``null``. ValueError naming ``where`` for a label ``q`` cannot have."""
    if label is None:
        return None
    if isinstance(q, PredicateQuestion):
        if not isinstance(label, bool):
            raise ValueError(f"{where} is {label!r}: a predicate is labelled true or false")
        return 0 if label else 1
    if isinstance(q, ChoiceQuestion):
        return _choice_index(q, label, where)
    assert isinstance(q, ScoreQuestion)
    return _level_index(q, label, where)


def _choice_index(q: ChoiceQuestion, label: bool | int | str, where: str) -> int:
    for j, c in enumerate(q.choices):
        if type(c.value) is type(label) and c.value == label:
            return j
    raise ValueError(
        f'{where} is {label!r}, not one of the question\'s choice values (typed: "true" and '
        "true differ)"
    )


def _level_index(q: ScoreQuestion, label: bool | int | str, where: str) -> int:
    if isinstance(label, bool):
        raise ValueError(f"{where} is {label!r}: a score is labelled by a level label or index")
    if isinstance(label, int):
        if not 0 <= label < len(q.levels):
            raise ValueError(f"{where} is {label}: a level index is 0 to {len(q.levels) - 1}")
        return label
    for j, level in enumerate(q.levels):
        if level.label == label:
            return j
    raise ValueError(f"{where} is {label!r}, not one of the question's level labels")
