"""Estimates: the tokens and engine calls a request of each job kind is expected to use.

Every estimator follows the engine calls its family makes (the list in ``budget/__init__``) and
reads only the request: its texts through ``text.estimate_text_tokens``, its orders and passes
through the pure scoring and protocol code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from service.kinds import JobKind
from service.protocol import (
    OutcomeRequest,
    ProcessRequest,
    RerankRequest,
    ScoreOptions,
    ScoreRequest,
    SplitRequest,
)
from service.protocol.audit import AuditRequest, PopMCQRequest
from service.protocol.base import JudgeMode
from service.protocol.calibrate import ProbabilityCalibrationRequest
from service.protocol.compare import CompareRequest, CompareSpec
from service.protocol.decisions import DecisionRequest
from service.protocol.jobs import JOBS, for_every_kind
from service.protocol.mcq import (
    CalibrationRequest,
    MCQAnswerRequest,
    MCQBatchRequest,
    MCQItem,
    MCQOptions,
)
from service.protocol.pooling import ClassifyRequest, PoolingRequest
from service.protocol.reward import RewardRequest
from service.protocol.rewards import (
    MathSpec,
    ModelSpec,
    RewardItem,
    RewardModelSpec,
    RewardsRequest,
    RubricSpec,
    rubric_decision,
)
from service.scoring import splitting
from service.scoring.compare import read_orders
from service.scoring.decisions import THOUGHT_TAIL, QuestionSpec, content_free
from service.scoring.inferred import INFER_TOKENS
from service.serving.budget.text import (
    AUDIT_OVERHEAD,
    COMPARE_OVERHEAD,
    COMPARE_RESPONSE_OVERHEAD,
    DECISION_ITEM_OVERHEAD,
    DECISION_OPTION_OVERHEAD,
    DECISION_OVERHEAD,
    DECISION_QUESTION_OVERHEAD,
    INFER_OVERHEAD,
    MATCH_OVERHEAD,
    MCQ_OPTION_OVERHEAD,
    MCQ_OVERHEAD,
    OUTCOME_OVERHEAD,
    POOLING_CHAT_OVERHEAD,
    POPULARITY_OVERHEAD,
    PREDICT_OVERHEAD,
    PROCESS_OVERHEAD,
    PROCESS_STEP_OVERHEAD,
    RECALL_OVERHEAD,
    REFERENCE_OVERHEAD,
    SINGLE_PASS_OVERHEAD,
    SINGLE_PASS_STEP_OVERHEAD,
    SPLIT_OVERHEAD,
    TAG_OVERHEAD,
    estimate_text_tokens,
    split_copy_tokens,
)


@dataclass(frozen=True)
class Estimate:
    """Tokens and engine calls a request is expected to use; ``total = prompt + generated``."""

    total: int
    prompt: int
    generated: int
    calls: int

    @classmethod
    def of(cls, prompt: int, generated: int, calls: int) -> Estimate:
        return cls(total=prompt + generated, prompt=prompt, generated=generated, calls=calls)

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate.of(
            self.prompt + other.prompt, self.generated + other.generated, self.calls + other.calls
        )

    def times(self, n: int) -> Estimate:
        return Estimate.of(self.prompt * n, self.generated * n, self.calls * n)


ZERO: Final = Estimate.of(0, 0, 0)


@dataclass(frozen=True)
class _Judging:
    """The options that decide how many calls and tokens one judgment costs."""

    mode: str
    samples: int
    reasoning_tokens: int


def _judgment(prompt: int, j: _Judging) -> Estimate:
    """One judgment of a `prompt`-token prompt in direct or reasoning mode."""
    if j.mode != "reasoning":
        return Estimate.of(prompt, 1, 1)
    # Rationale call, then the verdict call re-reads prompt + rationale (+1 verdict token).
    r = j.reasoning_tokens
    return Estimate.of(prompt + (prompt + r), r + 1, 2).times(j.samples)


def _outcome(question: int, response: str, j: _Judging) -> Estimate:
    prompt = OUTCOME_OVERHEAD + question + estimate_text_tokens(response)
    return _judgment(prompt, j)


def _steps(question: int, steps: Sequence[str], j: _Judging) -> Estimate:
    """Process judgments of given steps; with early_stop every step still counts (a bound)."""
    sizes = [estimate_text_tokens(s) for s in steps]
    if j.mode == "single_pass":
        prompt = SINGLE_PASS_OVERHEAD + question + sum(sizes)
        return Estimate.of(prompt + SINGLE_PASS_STEP_OVERHEAD * len(sizes), 1, 1)
    total = ZERO
    prefix = PROCESS_OVERHEAD + question
    for size in sizes:
        prefix += size + PROCESS_STEP_OVERHEAD  # prompt k holds steps 1..k
        total += _judgment(prefix, j)
    return total


def _split_cost(response: str, method: splitting.SplitMethod) -> Estimate:
    """The model copy call, when the split policy would run one (else nothing)."""
    if not splitting.needs_model(response, method):
        return ZERO
    size = estimate_text_tokens(response)
    return Estimate.of(SPLIT_OVERHEAD + size, split_copy_tokens(size), 1)


def _process_response(
    question: int, response: str, method: splitting.SplitMethod, max_steps: int, j: _Judging
) -> Estimate:
    # The heuristic split stands in for a model split too: the model's steps are unknown until
    # it runs, and their count can differ (the recorded actual usage settles that).
    steps = splitting.heuristic_split(response, max_steps)
    return _split_cost(response, method) + _steps(question, steps, j)


def _judging(req: OutcomeRequest | ProcessRequest | ScoreOptions) -> _Judging:
    return _Judging(mode=req.mode, samples=req.samples, reasoning_tokens=req.reasoning_tokens)


def _reference(reference: str | None, criteria: str | None) -> int:
    """What a reference adds to every prompt that shows it."""
    if reference is None:
        return 0
    extra = estimate_text_tokens(criteria) if criteria is not None else 0
    return REFERENCE_OVERHEAD + estimate_text_tokens(reference) + extra


def _context(req: OutcomeRequest | ProcessRequest | ScoreOptions, question: str) -> int:
    """Question and reference: the text every prompt of a request holds before its own."""
    return estimate_text_tokens(question) + _reference(req.reference, req.criteria)


def _outcome_request(req: OutcomeRequest) -> Estimate:
    # A rule check and tests cost no tokens (an outcome with tests is decided by them); hybrid
    # is estimated as the model would cost (a bound: the quota is settled with what ran).
    if req.resolved_verifier() == "rule" or req.tests:
        return ZERO
    return _outcome(_context(req, req.question), req.response, _judging(req))


# How a compare calibration reads each pair: pairwise, both orders (serving/calibrate.py).
_PAIR_READS = CompareSpec.model_validate({"mode": "pairwise", "debias": "swap"})


def _calibration_fit(req: ProbabilityCalibrationRequest) -> Estimate:
    """One model judgment per labelled example (never by rule), one pairwise comparison in
    both orders per labelled pair, one decision per labelled input, or one letter read per
    multiple-choice question (serving/calibrate.py)."""
    j = _Judging(mode=req.mode, samples=1, reasoning_tokens=req.reasoning_tokens)
    reasoning = req.reasoning_tokens if req.mode == "reasoning" else None
    total = ZERO
    for ex in req.outcome_examples():
        context = estimate_text_tokens(ex.question) + _reference(ex.reference, ex.criteria)
        total += _outcome(context, ex.response, j)
    for pair in req.compare_examples():
        context = estimate_text_tokens(pair.question) + _reference(pair.reference, pair.criteria)
        if pair.reference is None and pair.criteria is not None:
            context += REFERENCE_OVERHEAD + estimate_text_tokens(pair.criteria)
        total += _comparison(context, pair.responses, _PAIR_READS, reasoning, 1)
    for item in req.mcq_examples():
        total += _mcq_item(item.question, item.options)
    for decision in req.decision_examples():
        total += _decision(decision.request(req.mode, req.reasoning_tokens, ""))
    return total


def _process_request(req: ProcessRequest) -> Estimate:
    question = _context(req, req.question)
    if req.steps is not None:
        return _steps(question, req.steps, _judging(req))
    assert req.response is not None  # the request model guarantees one of them
    return _process_response(question, req.response, req.split, req.max_steps, _judging(req))


def _split_request(req: SplitRequest) -> Estimate:
    return _split_cost(req.response, req.method)


def _documents(opts: ScoreOptions, question: str, texts: Sequence[str]) -> Estimate:
    """/v1/score and rerank: outcome and/or process per document, as ``method`` says."""
    q = _context(opts, question)
    if opts.method == "compare":
        if opts.reference is None and opts.criteria is not None:
            q += REFERENCE_OVERHEAD + estimate_text_tokens(opts.criteria)
        reasoning = opts.reasoning_tokens if opts.mode == "reasoning" else None
        return _comparison(q, texts, opts.compare_spec(), reasoning, opts.compare_samples())
    j = _judging(opts)
    # With single_pass the outcome half runs direct (serving/score.py).
    outcome_j = _Judging("direct", 1, 0) if j.mode == "single_pass" else j
    total = ZERO
    for text in texts:
        if opts.method in ("outcome", "fused") and opts.resolved_verifier() != "rule":
            total += _outcome(q, text, outcome_j)
        if opts.method in ("process", "fused"):
            total += _process_response(q, text, opts.split, opts.max_steps, j)
    return total


def _score_request(req: ScoreRequest) -> Estimate:
    return _documents(req, req.question, req.responses)


def _rerank_request(req: RerankRequest) -> Estimate:
    return _documents(req, req.query, req.texts())


def _mcq_item(question: str, options: Sequence[str]) -> Estimate:
    """One letter read: the prompt and one generated token."""
    prompt = MCQ_OVERHEAD + estimate_text_tokens(question)
    prompt += sum(MCQ_OPTION_OVERHEAD + estimate_text_tokens(o) for o in options)
    return Estimate.of(prompt, 1, 1)


def _mcq_popularity(item: MCQItem) -> Estimate:
    """The 'model' popularity proxy: one read per option text."""
    if item.popularity != "model":
        return ZERO
    return sum(
        (Estimate.of(POPULARITY_OVERHEAD + estimate_text_tokens(o), 1, 1) for o in item.options),
        ZERO,
    )


def _content_free(k: int) -> Estimate:
    return sum((_mcq_item(text, [text] * k) for text in ("N/A", "", "[MASK]")), ZERO)


def _mcq_items(items: Sequence[MCQItem], opts: MCQOptions) -> Estimate:
    total = ZERO
    for item in items:
        total += _mcq_item(item.question, item.options)
        if opts.debias == "popdebias":
            total += _mcq_popularity(item)
    if opts.debias == "contextual" and opts.prior_id is None:
        for k in sorted({it.k for it in items}):
            total += _content_free(k)
    return total


def _mcq_calibration(req: CalibrationRequest) -> Estimate:
    if req.method == "contextual":
        k = req.fitted_k
        return _content_free(k) if k is not None else ZERO
    if req.method == "pride":  # K cyclic permutations of every item
        return sum((_mcq_item(it.question, it.options).times(it.k) for it in req.items), ZERO)
    return sum((_mcq_item(it.question, it.options) + _mcq_popularity(it) for it in req.items), ZERO)


def _audit_read(question: str | None, options: Sequence[str], rationale: int = 0) -> Estimate:
    prompt = AUDIT_OVERHEAD + rationale + (estimate_text_tokens(question) if question else 0)
    prompt += sum(MCQ_OPTION_OVERHEAD + estimate_text_tokens(o) for o in options)
    return Estimate.of(prompt, 1, 1)


def _audit(req: AuditRequest) -> Estimate:
    """Per item and condition: one letter read (base), or a rationale then a read (reason),
    with predictability one judge read of the trace, with inferred_question a written
    question and a match read per choices-only trace."""
    total = ZERO
    r = req.reasoning_tokens
    extra = ["I don't know"] if req.idk else []
    for item in req.items:
        options = [*item.options, *extra]
        longest = max(options, key=estimate_text_tokens)
        for cond in req.conditions:
            question = item.question if cond.startswith("full") else None
            read = _audit_read(question, options)
            if cond.endswith("_reason"):
                total += Estimate.of(read.prompt, r, 1) + _audit_read(question, options, r)
                if req.predictability:  # a judge reads the trace (at most r) and the options
                    total += _audit_read(None, options, PREDICT_OVERHEAD - AUDIT_OVERHEAD + r)
                if req.inferred_question and cond == "choices_only_reason":
                    shown = sum(MCQ_OPTION_OVERHEAD + estimate_text_tokens(o) for o in options)
                    total += Estimate.of(INFER_OVERHEAD + r + shown, INFER_TOKENS, 1)
                    asked = estimate_text_tokens(item.question)
                    total += Estimate.of(MATCH_OVERHEAD + asked + INFER_TOKENS, 1, 1)
            else:
                total += read
                if req.perturbations:  # three reads, each with one more option
                    total += _audit_read(question, [*options, longest]).times(3)
        if req.tag_strategies:
            tag = TAG_OVERHEAD + r + sum(estimate_text_tokens(o) + 4 for o in item.options)
            total += Estimate.of(tag, 1, 1).times(6)
            total += Estimate.of(tag + 4, req.evidence_tokens, 1).times(6)
    return total


def _popmcq(req: PopMCQRequest) -> Estimate:
    """Popularity reads, then per question and strategy one read per method that needs one;
    with open_recall a free-form answer per question."""
    total = ZERO
    per_item_reads = 1.0 + ("popdebias" in req.methods)
    per_item_reads += 4 * ("pride" in req.methods) * min(1.0, req.calibration_ratio * 2)
    for item in req.items:
        texts = [item.answer.text, *(c.text for c in item.candidates)]
        if req.popularity == "model":
            total += sum(
                (Estimate.of(POPULARITY_OVERHEAD + estimate_text_tokens(t), 1, 1) for t in texts),
                ZERO,
            )
        longest = sorted(texts, key=estimate_text_tokens)[-4:]
        read = _mcq_item(item.question, longest).times(math.ceil(per_item_reads))
        total += read.times(len(req.strategies))
        if req.open_recall:
            asked = RECALL_OVERHEAD + estimate_text_tokens(item.question)
            total += Estimate.of(asked, req.open_recall_tokens, 1)
    if "contextual" in req.methods:
        total += _content_free(4)
    return total


def _reward_request(req: RewardRequest) -> Estimate:
    """One outcome judgment per query (the query holds question and response); an unset mode
    counts as direct (the worker's setting may say reasoning: then this is low)."""
    j = _Judging(req.mode or "direct", 1, req.reasoning_tokens or 256)
    if req.method == "compare":
        return _reward_comparisons(req, j)
    specs = req.spec_items()
    # a query with its own spec: as that spec reads the whole query (prompt and response)
    total = sum(
        (
            _reward_item(
                item.model_copy(update={"prompt": req.query[i]}), req.mode, j.reasoning_tokens
            )
            for i, item in specs.items()
        ),
        ZERO,
    )
    if req.verifier == "rule":
        return total
    refs = req.references()
    return total + sum(
        (
            _judgment(OUTCOME_OVERHEAD + estimate_text_tokens(q) + _reference(r, req.criteria), j)
            for i, (q, r) in enumerate(zip(req.query, refs, strict=True))
            if i not in specs
        ),
        ZERO,
    )


def _rewards(req: RewardsRequest) -> Estimate:
    """Per item and spec: a model read (math's fallback counted as a bound), a rubric's
    decision, a reward model's one pooling read; rule, string and choice checks cost nothing.
    An unset mode counts as direct (as for /get_reward)."""
    return sum((_reward_item(item, req.mode, req.reasoning_tokens) for item in req.items), ZERO)


def _reward_item(item: RewardItem, mode: JudgeMode | None, reasoning: int | None) -> Estimate:
    total = ZERO
    text = estimate_text_tokens(item.prompt) + estimate_text_tokens(item.response)
    for spec in item.specs().values():
        if isinstance(spec, RewardModelSpec):
            total += Estimate.of(text + POOLING_CHAT_OVERHEAD, 0, 1)
            continue
        if not isinstance(spec, MathSpec | ModelSpec | RubricSpec):
            continue
        spec_mode = spec.mode or mode or "direct"
        j = _Judging(spec_mode, spec.samples, spec.reasoning_tokens or reasoning or 256)
        if isinstance(spec, RubricSpec):
            total += _decision(
                rubric_decision(spec, item.prompt, item.response, spec_mode, j.reasoning_tokens)
            )
        elif not isinstance(spec, MathSpec) or spec.model_fallback:
            criteria = spec.criteria if isinstance(spec, ModelSpec) else None
            total += _judgment(OUTCOME_OVERHEAD + text + _reference(spec.reference, criteria), j)
    return total


def _reward_comparisons(req: RewardRequest, j: _Judging) -> Estimate:
    """method='compare': the queries grouped by their prompt (when sent; else by the text
    before the separator, when sent; else each alone, a bound the recorded usage settles),
    each group one comparison of the queries as responses."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for i, (query, ref) in enumerate(zip(req.query, req.references(), strict=True)):
        if req.prompts:
            key = req.prompts[i]
        elif req.separator and req.separator in query:
            key = query[: query.rfind(req.separator)]
        else:
            key = query
        groups.setdefault((key, ref), []).append(query)
    reasoning = j.reasoning_tokens if j.mode == "reasoning" else None
    total = ZERO
    for (_, ref), queries in groups.items():
        context = _reference(ref, req.criteria)
        if len(queries) == 1:
            total += _judgment(OUTCOME_OVERHEAD + context + estimate_text_tokens(queries[0]), j)
        else:
            total += _comparison(context, queries, req.compare_spec(), reasoning, 1)
    return total


def _decision_prompt(shared: int, spec: QuestionSpec) -> int:
    prompt = shared + DECISION_QUESTION_OVERHEAD + estimate_text_tokens(spec.instructions)
    return prompt + sum(
        DECISION_OPTION_OVERHEAD + estimate_text_tokens(f"{text} {desc or ''}")
        for text, desc in spec.options
    )


def _decision(req: DecisionRequest) -> Estimate:
    """One read per question and cyclic order, each prompt the shared input plus the question
    (reasoning: per sample a thought, then the read); contextual debiasing without a
    calibration adds its content-free reads per K."""
    blocks = req.blocks()
    shared = DECISION_OVERHEAD + sum(
        DECISION_ITEM_OVERHEAD * bool(b.header) + estimate_text_tokens(f"{b.header} {b.text}")
        for b in blocks
    )
    total = ZERO
    for q in req.questions:
        spec = q.spec()
        prompt = _decision_prompt(shared, spec)
        read = Estimate.of(prompt, 1, 1)
        if req.mode == "reasoning":  # a thought, then the read re-reads prompt + thought
            r = req.reasoning_tokens
            read = Estimate.of(prompt + prompt + r + THOUGHT_TAIL, r + 1, 2).times(req.samples)
        total += read.times(spec.passes(req.permutations))
    if req.debias == "contextual" and req.prior_id is None:
        for k in sorted(set(req.choice_counts)):
            for block, spec in content_free(k):
                prompt = DECISION_OVERHEAD + estimate_text_tokens(block.text)
                total += Estimate.of(_decision_prompt(prompt, spec), 1, 1)
    return total


def _comparison(
    context: int,
    texts: Sequence[str],
    spec: CompareSpec,
    reasoning_tokens: int | None,
    samples: int,
) -> Estimate:
    """One read per order (samples each); a read holds the context and the responses shown."""
    n = len(texts)
    sizes = [estimate_text_tokens(t) + COMPARE_RESPONSE_OVERHEAD for t in texts]
    orders = read_orders(n, spec.mode, spec.resolved_debias(), spec.permutations or n)
    total = ZERO
    for order in orders:
        prompt = COMPARE_OVERHEAD + context + sum(sizes[i] for i in order)
        read = Estimate.of(prompt, 1, 1)
        if reasoning_tokens is not None:  # a written comparison, then the read re-reads it
            r = reasoning_tokens
            read = Estimate.of(prompt + prompt + r + THOUGHT_TAIL, r + 1, 2).times(samples)
        total += read
    return total


def _compare(req: CompareRequest) -> Estimate:
    context = estimate_text_tokens(req.question) + _reference(req.reference, req.criteria)
    if req.reference is None and req.criteria is not None:
        context += REFERENCE_OVERHEAD + estimate_text_tokens(req.criteria)
    return _comparison(context, req.responses, req, req.reasoning_tokens, req.samples)


def _mcq_answer(req: MCQAnswerRequest) -> Estimate:
    return _mcq_items([req], req)


def _mcq_batch(req: MCQBatchRequest) -> Estimate:
    return _mcq_items(req.items, req)


def _pooling_request(req: ClassifyRequest | PoolingRequest) -> Estimate:
    """Pooling reads prompt tokens only: the texts (or ids) as given, a chat with its template."""
    if req.messages is not None:
        text = sum(estimate_text_tokens(str(m.get("content") or "")) for m in req.messages)
        return Estimate.of(POOLING_CHAT_OVERHEAD * len(req.messages) + text, 0, 1)
    sizes = [
        estimate_text_tokens(item) + 1 if isinstance(item, str) else len(item)
        for item in req.inputs()
    ]
    return Estimate.of(sum(sizes), 0, len(sizes))


def _run_code(_req: BaseModel) -> Estimate:
    """A sandbox run: no engine token (the pool's concurrency cap bounds it, not the budget)."""
    return ZERO


# kind -> its estimator, which takes that kind's JobSpec.request (checked in `estimate`).
ESTIMATORS: Final[Mapping[JobKind, Callable[[Any], Estimate]]] = for_every_kind(
    {
        "outcome": _outcome_request,
        "process": _process_request,
        "split": _split_request,
        "score": _score_request,
        "rerank": _rerank_request,
        "mcq_answer": _mcq_answer,
        "mcq_batch": _mcq_batch,
        "mcq_calibrate": _mcq_calibration,
        "calibrate": _calibration_fit,
        "mcq_audit": _audit,
        "mcq_popmcq": _popmcq,
        "reward": _reward_request,
        "classify": _pooling_request,
        "pooling": _pooling_request,
        "decision": _decision,
        "compare": _compare,
        "rewards": _rewards,
        "run_code": _run_code,
    },
    "estimator",
)


def estimate(kind: JobKind, req: BaseModel) -> Estimate:
    """Estimated tokens and engine calls of a request of `kind`.

    `kind` is a job kind ("outcome", "process", ..., "mcq_popmcq") and `req` its request model
    (``JOBS[kind].request``); another model is a ``TypeError``.
    """
    spec = JOBS.get(kind)
    if spec is None:
        raise ValueError(f"unknown request kind {kind!r}; expected one of {', '.join(JOBS)}")
    cls = spec.request
    if not isinstance(req, cls):
        raise TypeError(f"a {kind!r} estimate needs a {cls.__name__}, got {type(req).__name__}")
    return ESTIMATORS[kind](req)
