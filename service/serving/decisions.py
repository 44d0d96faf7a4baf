"""POST /v1/decisions: request -> one prompt prefix -> one exact label read per question.

Each question's labels (Yes/No, letters, digits) are read with ``option_logprobs``: the
log-probability of every single-token spelling at the answer slot, exact (never from a top-k).
The first question is read alone so that it prefills the shared input; the others are read
together after it and find that prefix in vLLM's prefix cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from service.engine.base import Engine, OptionCall, OptionResult, TokenUsage
from service.errors import InvalidRequest
from service.protocol.decisions import (
    Answer,
    ChoiceAnswer,
    ChoiceProbability,
    ChoiceQuestion,
    DecisionRequest,
    DecisionResponse,
    DecisionUsage,
    FunctionCall,
    InputItem,
    InputJSON,
    InputText,
    Message,
    OutputText,
    PredicateAnswer,
    PredicateQuestion,
    Question,
    RefusalAnswer,
    RefusalPart,
    ScoreAnswer,
    ScoreProbability,
    ScoreQuestion,
)
from service.scoring import decisions as scoring


class DecisionServing:
    """Serves /v1/decisions."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self._engine = engine
        self._model = model_name
        self._labels: dict[tuple[str, ...], list[list[int]]] = {}

    async def decide(self, req: DecisionRequest) -> DecisionResponse:
        specs = [question_spec(q) for q in req.questions]
        option_ids = [self._label_ids(i, spec) for i, spec in enumerate(specs)]
        prompts = scoring.decision_prompts(self._engine.tokenizer, input_blocks(req.input), specs)
        limit = self._engine.model_info().max_model_len
        # A question whose prompt does not fit the model is refused; the others are answered.
        calls = [
            (i, OptionCall(prompts.prompt_ids(i), option_ids[i]))
            for i in range(len(specs))
            if len(prompts.prompt_ids(i)) + 1 <= limit
        ]
        usage = TokenUsage()
        reads = await self._read(calls, usage)
        answers = [
            answer(q, reads.get(i), req.min_label_probability) for i, q in enumerate(req.questions)
        ]
        return DecisionResponse(
            answers=answers, model=self._model, usage=DecisionUsage.of_counts(usage)
        )

    def _label_ids(self, index: int, spec: scoring.QuestionSpec) -> list[list[int]]:
        key = scoring.labels(spec)
        if key not in self._labels:
            try:
                self._labels[key] = scoring.label_ids(self._engine.tokenizer, spec)
            except ValueError as exc:
                raise InvalidRequest(
                    f"questions[{index}]: {exc}; this model cannot read that question's labels "
                    f"({', '.join(key)}) as single tokens"
                ) from exc
        return self._labels[key]

    async def _read(
        self, calls: Sequence[tuple[int, OptionCall]], usage: TokenUsage
    ) -> dict[int, list[float]]:
        if not calls:
            return {}
        # The first read prefills the input alone: read together, every question would prefill
        # it again (vLLM caches a block only once it has been computed).
        results: list[OptionResult] = await self._engine.option_logprobs([calls[0][1]])
        if len(calls) > 1:
            results += await self._engine.option_logprobs([c for _, c in calls[1:]])
        for r in results:
            usage.add(r.usage)
        return {i: r.logprobs for (i, _), r in zip(calls, results, strict=True)}


def question_spec(q: Question) -> scoring.QuestionSpec:
    instructions = parts_text(q.instructions)
    if isinstance(q, PredicateQuestion):
        return scoring.QuestionSpec("predicate", instructions)
    if isinstance(q, ChoiceQuestion):
        options = tuple((value_text(c.value), c.description) for c in q.choices)
        return scoring.QuestionSpec("choice", instructions, options)
    levels = tuple((level.label, level.description) for level in q.levels)
    return scoring.QuestionSpec("score", instructions, levels)


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


def _item_block(item: InputItem) -> scoring.Block:
    if isinstance(item, Message):
        header = item.role if item.phase is None else f"{item.role}, {item.phase}"
        return scoring.Block(header, parts_text(item.content))
    if isinstance(item, FunctionCall):
        name = f"{item.namespace}.{item.name}" if item.namespace else item.name
        return scoring.Block(f"function_call {name}, call_id {item.call_id}", item.arguments)
    if item.type == "custom_tool_call":
        name = f"{item.namespace}.{item.name}" if item.namespace else item.name
        return scoring.Block(f"custom_tool_call {name}, call_id {item.call_id}", item.input)
    return scoring.Block(f"{item.type}, call_id {item.call_id}", parts_text(item.output))


def input_blocks(value: str | Sequence[InputItem]) -> list[scoring.Block]:
    """The input as blocks: one headerless text, or one block per item, in order."""
    if isinstance(value, str):
        return [scoring.Block("", value)]
    return [_item_block(item) for item in value]


def answer(q: Question, logprobs: list[float] | None, min_mass: float) -> Answer:
    """The typed answer from a question's label log-probabilities (None: not read)."""
    if logprobs is None:
        return RefusalAnswer(name=q.name)
    got = scoring.read(logprobs)
    if got.mass < min_mass:
        return RefusalAnswer(name=q.name)
    probs = got.probs
    top = scoring.best(probs)
    if isinstance(q, PredicateQuestion):
        return PredicateAnswer(name=q.name, probability=probs[0])
    if isinstance(q, ChoiceQuestion):
        return ChoiceAnswer(
            name=q.name,
            choice=q.choices[top].value,
            probabilities=[
                ChoiceProbability(value=c.value, probability=p)
                for c, p in zip(q.choices, probs, strict=True)
            ],
            confidence=probs[top],
        )
    assert isinstance(q, ScoreQuestion)
    return ScoreAnswer(
        name=q.name,
        score=scoring.expected_level(probs),
        probabilities=[
            ScoreProbability(label=level.label, value=i, probability=p)
            for i, (level, p) in enumerate(zip(q.levels, probs, strict=True))
        ],
        confidence=probs[top],
    )
