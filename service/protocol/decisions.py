"""Wire models of ``POST /v1/decisions``: OpenAI's Decisions API shapes (docs/methods.md F).

Request and response mirror the OpenAI Python SDK's ``decision_create_params`` and ``decision``
types field for field, so ``client.decisions.create(...)`` works unchanged; the fields after
``safety_identifier`` are this service's optional extensions. Images are part of the shape
and refused with a 422 (the served models read text).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from service.protocol.base import BudgetOptions, JudgeMode, ServiceModel
from service.protocol.calibrated import prior_part, probability_part
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
    model: str = Field(  # required here, as OpenAI's SDK sends it
        max_length=256,
        description="Any name without ':': the served model answers. '<served name>:<adapter>': "
        "that LoRA adapter of it; another name with ':' is a 404 model_not_found.",
    )
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
