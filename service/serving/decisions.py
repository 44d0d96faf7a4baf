"""POST /v1/decisions: request -> one prompt prefix -> one exact label read per question.

Each question's labels (Yes/No, letters, digits) are read with ``option_logprobs``: the
log-probability of every single-token spelling at the answer slot, exact (never from a top-k).
The first question is read alone so that it prefills the shared input; the others are read
together after it and find that prefix in vLLM's prefix cache. Extensions: a choice question
may be read under several cyclic orders of its choices (averaged per value), and its letter
probabilities debiased (PriDe, contextual calibration) before that; in reasoning mode every
read follows a thought generated within ``reasoning_tokens`` (sampled ``samples`` times).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.engine.adapters import served_id
from service.engine.base import Engine, GenerateCall, OptionCall, OptionResult, TokenUsage
from service.errors import InvalidRequest
from service.protocol.decision_results import (
    Answer,
    ChoiceAnswer,
    ChoiceProbability,
    DecisionResponse,
    DecisionUsage,
    PredicateAnswer,
    RefusalAnswer,
    ScoreAnswer,
    ScoreProbability,
)
from service.protocol.decisions import (
    ChoiceQuestion,
    DecisionRequest,
    PredicateQuestion,
    Question,
    ScoreQuestion,
)
from service.protocol.mcq import Calibration
from service.scoring import debias
from service.scoring import decisions as scoring
from service.serving.context import tenant_calibration
from service.stores.calibrations import CalibrationStore

# A choice read's letter probabilities -> debiased (identity without debias).
Unbias = Callable[[list[float]], list[float]]


class DecisionServing:
    """Serves /v1/decisions."""

    def __init__(self, engine: Engine, model_name: str, calibrations: CalibrationStore) -> None:
        self._engine = engine
        self._model = model_name
        self._calibrations = calibrations
        self._labels: dict[tuple[str, ...], list[list[int]]] = {}

    async def decide(self, req: DecisionRequest) -> DecisionResponse:
        cal = await self._calibration(req)
        specs = req.specs()
        reads = plan_reads(specs, req)
        option_ids = [self._label_ids(i, spec) for i, spec in enumerate(specs)]
        reasoning = req.mode == "reasoning"
        prompts = scoring.decision_prompts(
            self._engine.tokenizer,
            req.blocks(),
            [r.spec for r in reads],
            reasoning=reasoning,
        )
        # A question with a read that does not fit the model is refused; the others are read.
        # A thought may take its whole budget, then "\nAnswer:" and the label follow.
        room = self._engine.model_info().max_model_len - (
            req.reasoning_tokens + scoring.THOUGHT_TAIL if reasoning else 1
        )
        too_long = {r.question for n, r in enumerate(reads) if len(prompts.prompt_ids(n)) > room}
        live = [n for n, r in enumerate(reads) if r.question not in too_long]
        usage = TokenUsage()
        ids = {n: prompts.prompt_ids(n) for n in live}
        thought_tokens = 0
        if reasoning:
            ids, thought_tokens = await self._think(ids, reads, req, usage)
        calls = [(n, OptionCall(ids[n], option_ids[reads[n].question])) for n in live]
        got = await self._read(calls, usage)
        unbias = await self._letter_debias(req, cal, usage)
        answers = []
        for i, q in enumerate(req.questions):
            mine = [(r.shift, got[n]) for n, r in enumerate(reads) if r.question == i and n in got]
            answers.append(answer(q, mine or None, req.min_label_probability, unbias))
        return DecisionResponse(
            answers=answers,
            model=served_id(self._model),
            usage=DecisionUsage.of_counts(usage, reasoning_tokens=thought_tokens),
        )

    async def _think(
        self,
        prompt_ids: dict[int, list[int]],
        reads: Sequence[Read],
        req: DecisionRequest,
        usage: TokenUsage,
    ) -> tuple[dict[int, list[int]], int]:
        """Per read, its prompt + thought + ``Answer:``, and the thought tokens generated."""
        order = list(prompt_ids)
        temperature = req.resolved_temperature()
        calls = [
            GenerateCall(
                prompt_ids=prompt_ids[n],
                max_tokens=req.reasoning_tokens,
                temperature=temperature,
                seed=None if req.seed is None else req.seed + reads[n].sample,
                stop=(scoring.ANSWER_PREFIX,),
            )
            for n in order
        ]
        if not calls:
            return {}, 0
        # As with the reads: the first prefills the shared input, the rest find it cached.
        results = await self._engine.generate(calls[:1])
        if len(calls) > 1:
            results += await self._engine.generate(calls[1:])
        out, thought = {}, 0
        tokenizer = self._engine.tokenizer
        for n, r in zip(order, results, strict=True):
            usage.add(r.usage)
            thought += r.usage.generated_tokens
            out[n] = [*prompt_ids[n], *scoring.after_thought_ids(tokenizer, r.text)]
        return out, thought

    async def _calibration(self, req: DecisionRequest) -> Calibration | None:
        """The request's calibration, checked against its method, K and this model (422)."""
        return await tenant_calibration(
            self._calibrations, req.prior_id, req.debias, req.choice_counts, served_id(self._model)
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
        return {n: r.logprobs for (n, _), r in zip(calls, results, strict=True)}

    async def _letter_debias(
        self, req: DecisionRequest, cal: Calibration | None, usage: TokenUsage
    ) -> Unbias:
        """How a choice read's letter probabilities are debiased (docs/methods.md F.4)."""
        if req.debias == "pride":
            assert cal is not None  # the request model requires a calibration for pride
            prior = list(cal.params["prior"])
            return lambda probs: debias.pride(probs, prior)
        if req.debias == "contextual":
            p_cf = await self._content_free(req, cal, usage)
            return lambda probs: debias.contextual(probs, p_cf[len(probs)])
        return list

    async def _content_free(
        self, req: DecisionRequest, cal: Calibration | None, usage: TokenUsage
    ) -> dict[int, list[float]]:
        """p_cf per number of choices: the stored calibration's, else read in this format."""
        ks = sorted(set(req.choice_counts))
        if cal is not None:
            return {k: list(cal.params["p_cf"]) for k in ks}
        tokenizer = self._engine.tokenizer
        calls, owners = [], []
        for k in ks:
            for block, spec in scoring.content_free(k):
                prompt = scoring.decision_prompts(tokenizer, [block], [spec]).prompt_ids(0)
                calls.append(OptionCall(prompt, scoring.label_ids(tokenizer, spec)))
                owners.append(k)
        results = await self._engine.option_logprobs(calls) if calls else []
        runs: dict[int, list[list[float]]] = {k: [] for k in ks}
        for k, r in zip(owners, results, strict=True):
            usage.add(r.usage)
            runs[k].append(debias.softmax(r.logprobs))
        return {k: debias.mean_probs(runs[k]) for k in ks}


@dataclass(frozen=True, slots=True)
class Read:
    """One label read: its question, the shift of its choices, its sample, as shown."""

    question: int
    shift: int
    sample: int
    spec: scoring.QuestionSpec


def plan_reads(specs: Sequence[scoring.QuestionSpec], req: DecisionRequest) -> list[Read]:
    """Every read of a request: per question, per cyclic order, per sampled thought."""
    samples = req.samples if req.mode == "reasoning" else 1
    return [
        Read(i, shift, sample, scoring.rotated(spec, shift))
        for i, spec in enumerate(specs)
        for shift in range(spec.passes(req.permutations))
        for sample in range(samples)
    ]


def answer(
    q: Question,
    reads: list[tuple[int, list[float]]] | None,
    min_mass: float,
    unbias: Unbias = list,
) -> Answer:
    """The typed answer from a question's label log-probabilities, one list per read with the
    shift of its choices (None: not read)."""
    if reads is None:
        return RefusalAnswer(name=q.name)
    got = [(shift, scoring.read(lp)) for shift, lp in reads]
    if sum(r.mass for _, r in got) / len(got) < min_mass:
        return RefusalAnswer(name=q.name)
    if isinstance(q, ChoiceQuestion):
        probs = scoring.by_value([(shift, unbias(r.probs)) for shift, r in got])
        top = scoring.best(probs)
        return ChoiceAnswer(
            name=q.name,
            choice=q.choices[top].value,
            probabilities=[
                ChoiceProbability(value=c.value, probability=p)
                for c, p in zip(q.choices, probs, strict=True)
            ],
            confidence=probs[top],
            passes=len(got),
        )
    # several reads are sampled thoughts: their probabilities are averaged
    probs = debias.mean_probs([r.probs for _, r in got])
    if isinstance(q, PredicateQuestion):
        return PredicateAnswer(name=q.name, probability=probs[0])
    assert isinstance(q, ScoreQuestion)
    top = scoring.best(probs)
    return ScoreAnswer(
        name=q.name,
        score=scoring.expected_level(probs),
        probabilities=[
            ScoreProbability(label=level.label, value=i, probability=p)
            for i, (level, p) in enumerate(zip(q.levels, probs, strict=True))
        ],
        confidence=probs[top],
    )
