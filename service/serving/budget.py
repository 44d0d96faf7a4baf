"""Token budgets: estimate what a request will cost before it runs, and plan around a limit.

Pure: no I/O, no engine, no tokenizer. The estimate follows the engine calls each endpoint
makes (see ``service/serving``):

- direct judgment: 1 call, the prompt plus 1 generated token (the verdict slot);
- reasoning judgment, per sample: a rationale call (the prompt, up to ``reasoning_tokens``
  generated) then a verdict call (prompt + rationale as prompt, 1 generated);
- process, direct/reasoning: one judgment per step k on a prompt holding steps 1..k;
- process, single_pass: one prefill of the whole conversation, 1 generated;
- model split: one copy call (the response as prompt, about 1.25x the response generated);
- decision: one label read per question and cyclic order, each on the input plus that
  question; in reasoning mode a thought call before each read, per sample;
- compare: one letter read per order shown (pairwise: every pair, in both orders by default;
  listwise: every cyclic order by default), each on the question and the responses shown; with
  reasoning_tokens a written comparison before each read, per sample.

It is an upper-ish bound for realistic text, not a guarantee: operators reconcile quotas with
the ``actual`` usage recorded after the run (``service.stores.auth.settle``).

Example:
    >>> from service.protocol import OutcomeRequest
    >>> req = OutcomeRequest(question="What is 2+2?", response="4")
    >>> estimate("outcome", req)
    Estimate(total=169, prompt=168, generated=1, calls=1)
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from service.errors import BudgetTooSmall
from service.protocol import (
    OutcomeRequest,
    ProcessRequest,
    RerankRequest,
    ScoreOptions,
    ScoreRequest,
    SplitRequest,
)
from service.protocol.audit import AuditRequest, PopMCQRequest
from service.protocol.compare import CompareRequest, CompareSpec
from service.protocol.decisions import DecisionRequest
from service.protocol.jobs import JOBS, JobKind, for_every_kind
from service.protocol.mcq import (
    CalibrationRequest,
    MCQAnswerRequest,
    MCQBatchRequest,
    MCQItem,
    MCQOptions,
)
from service.protocol.pooling import ClassifyRequest, PoolingRequest
from service.protocol.reward import RewardRequest
from service.scoring import splitting
from service.scoring.compare import read_orders
from service.scoring.decisions import QuestionSpec, content_free
from service.serving.decisions import THOUGHT_TAIL, input_blocks, passes, question_spec

__all__ = [
    "OUTCOME_OVERHEAD",
    "PROCESS_OVERHEAD",
    "PROCESS_STEP_OVERHEAD",
    "SINGLE_PASS_OVERHEAD",
    "MCQ_OVERHEAD",
    "MCQ_OPTION_OVERHEAD",
    "POPULARITY_OVERHEAD",
    "SINGLE_PASS_STEP_OVERHEAD",
    "SPLIT_COPY_EXTRA",
    "SPLIT_COPY_RATIO",
    "SPLIT_OVERHEAD",
    "POOLING_CHAT_OVERHEAD",
    "REFERENCE_OVERHEAD",
    "ZERO",
    "ESTIMATORS",
    "BudgetPlan",
    "Estimate",
    "estimate",
    "estimate_text_tokens",
    "plan",
    "split_copy_tokens",
]

# --- text -> tokens without a tokenizer ------------------------------------------------------
#
# Why not plain bytes/3: the default model (SmolLM2, Llama-style byte-level BPE) encodes every
# digit as its own token, and math text is dense in digits and symbols. Measured on the 7,914
# questions and solutions of gsm8k/example_model_solutions.jsonl it averages 2.5 bytes/token,
# so bytes/3 under-counts 80% of them. Counting by character class instead:
#   ASCII digit            1 token  (always a token of its own)
#   ASCII punctuation      1 token  (merges such as "..." only make the real count smaller)
#   non-ASCII              1 token per 2 UTF-8 bytes (CJK is about 1.5 tokens a character)
#   ASCII letters, spaces  1 token per 3 bytes (English words are about 4-5 bytes a token)
# On that data set the estimate is 1.21x the real count overall (0.91x .. 1.86x per text);
# the fixed overheads below absorb the few texts a little under. Adversarial text (random
# mixed-case letters) can still exceed it: only the byte count bounds byte-level BPE, and the
# `actual` usage recorded after the run settles the difference.
DIGIT_TOKENS_PER_CHAR: Final = 1
PUNCT_TOKENS_PER_CHAR: Final = 1
NON_ASCII_BYTES_PER_TOKEN: Final = 2
ASCII_TEXT_BYTES_PER_TOKEN: Final = 3

_DIGITS: Final = string.digits.encode()
_PUNCT: Final = string.punctuation.encode()

# --- fixed prompt overheads (system text, instructions, fences, chat template) -----------------
#
# Measured upper bounds for the default model's chat template (rendered with empty texts), with
# a little headroom. Operators running another template rely on the `actual` tokens recorded
# after the run; these only size the up-front estimate.
OUTCOME_OVERHEAD: Final = 160  # measured 148 direct, 157 reasoning (incl. "\nVerdict: ")
PROCESS_OVERHEAD: Final = 160  # without step blocks; measured 134 direct, 148 reasoning
PROCESS_STEP_OVERHEAD: Final = 16  # "<step k>\n...\n</step k>" per step; measured <= 15
SINGLE_PASS_OVERHEAD: Final = 150  # system + question fence; measured 112
MCQ_OVERHEAD: Final = 80  # system, "Question: ", task line, "Answer:"; measured 70
MCQ_OPTION_OVERHEAD: Final = 4  # "A. " and the newline; measured 4
POPULARITY_OVERHEAD: Final = 4  # "Answer:" before an option text; measured 2
CONTENT_FREE_INPUTS: Final = 3  # contextual calibration's content-free prompts
AUDIT_OVERHEAD: Final = 130  # system, C.2 instruction, "ANSWER:"; measured <= 107
TAG_OVERHEAD: Final = 150  # tagger system, trace tags, one label question, "Label: "; measured 128
SINGLE_PASS_STEP_OVERHEAD: Final = 40  # user turn + step fence + "Verdict: 1"; measured <= 30
SPLIT_OVERHEAD: Final = 100  # copy instructions + response fence; measured 92
# /classify and /pooling chats: the template's role markers per message (the default model's
# default system text counted once in the first); measured 5 per turn, 36 for the first.
POOLING_CHAT_OVERHEAD: Final = 40
DECISION_OVERHEAD: Final = 70  # system, input fence, chat template, "Answer:"; measured 58
DECISION_ITEM_OVERHEAD: Final = 8  # an input item's "[role]" header and blank line; measured 5
DECISION_QUESTION_OVERHEAD: Final = 40  # "Question:", task lines; measured <= 36
# /v1/judge/compare: system, question fence, task, chat template, "Answer:"; per response shown
# its lettered fence and blank line.
COMPARE_OVERHEAD: Final = 130  # measured 106 direct, 122 with reasoning_tokens
COMPARE_RESPONSE_OVERHEAD: Final = 14  # measured 12 (2 to 26 responses)
DECISION_OPTION_OVERHEAD: Final = 8  # "A. ", newline, " (...)" of a description; measured <= 7
# With a reference: the longer system text, the reference fence (and a criteria fence and
# note), on top of the text's own tokens.
REFERENCE_OVERHEAD: Final = 100  # measured 61, 86 with criteria (outcome and process)
# The copy call's max_tokens (serving/process.py): the copy, its markers and an echoed fence.
SPLIT_COPY_RATIO: Final = 1.25
SPLIT_COPY_EXTRA: Final = 64


def split_copy_tokens(response_tokens: int) -> int:
    """max_tokens of the model split's copy of a response of ``response_tokens`` tokens."""
    return int(response_tokens * SPLIT_COPY_RATIO) + SPLIT_COPY_EXTRA


def estimate_text_tokens(text: str) -> int:
    """Upper-ish token count of `text` for the default model (see the ratios above).

    Monotone: appending text never lowers the estimate.

    Example:
        >>> estimate_text_tokens("12 + 30 = 42")
        10
    """
    ascii_bytes = text.encode("ascii", "ignore")
    non_ascii = len(text.encode()) - len(ascii_bytes)
    no_digits = ascii_bytes.translate(None, _DIGITS)
    plain = no_digits.translate(None, _PUNCT)
    digits = len(ascii_bytes) - len(no_digits)
    punct = len(no_digits) - len(plain)
    return (
        digits * DIGIT_TOKENS_PER_CHAR
        + punct * PUNCT_TOKENS_PER_CHAR
        + math.ceil(non_ascii / NON_ASCII_BYTES_PER_TOKEN)
        + math.ceil(len(plain) / ASCII_TEXT_BYTES_PER_TOKEN)
    )


# --- estimates -----------------------------------------------------------------------------


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
    # A rule check costs no tokens; hybrid is estimated as the model would cost (a bound: the
    # quota is settled with what ran).
    if req.resolved_verifier() == "rule":
        return ZERO
    return _outcome(_context(req, req.question), req.response, _judging(req))


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
    if opts.debias == "contextual" and opts.calibration_id is None:
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
    """Per item and condition: one letter read (base), or a rationale then a read (reason)."""
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
    """Popularity reads, then per question and strategy one read per method that needs one."""
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
    if "contextual" in req.methods:
        total += _content_free(4)
    return total


def _reward_request(req: RewardRequest) -> Estimate:
    """One outcome judgment per query (the query holds question and response); an unset mode
    counts as direct (the worker's setting may say reasoning: then this is low)."""
    j = _Judging(req.mode or "direct", 1, req.reasoning_tokens or 256)
    if req.method == "compare":
        return _reward_comparisons(req, j)
    if req.verifier == "rule":
        return ZERO
    refs = req.references()
    return sum(
        (
            _judgment(OUTCOME_OVERHEAD + estimate_text_tokens(q) + _reference(r, req.criteria), j)
            for q, r in zip(req.query, refs, strict=True)
        ),
        ZERO,
    )


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
    blocks = input_blocks(req.input)
    shared = DECISION_OVERHEAD + sum(
        DECISION_ITEM_OVERHEAD * bool(b.header) + estimate_text_tokens(f"{b.header} {b.text}")
        for b in blocks
    )
    total = ZERO
    for q in req.questions:
        spec = question_spec(q)
        prompt = _decision_prompt(shared, spec)
        read = Estimate.of(prompt, 1, 1)
        if req.mode == "reasoning":  # a thought, then the read re-reads prompt + thought
            r = req.reasoning_tokens
            read = Estimate.of(prompt + prompt + r + THOUGHT_TAIL, r + 1, 2).times(req.samples)
        total += read.times(passes(spec, req.permutations))
    if req.debias == "contextual" and req.calibration_id is None:
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
        "mcq_audit": _audit,
        "mcq_popmcq": _popmcq,
        "reward": _reward_request,
        "classify": _pooling_request,
        "pooling": _pooling_request,
        "decision": _decision,
        "compare": _compare,
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


# --- budget policy -------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetPlan:
    """What to run: `request` (the original or a degraded copy) and its estimate."""

    request: BaseModel
    estimate: Estimate
    degraded: bool
    note: str | None


def _degradable(req: BaseModel) -> bool:
    """Whether lowering to direct with one sample would change (and cheapen) the request."""
    if isinstance(req, CompareRequest):
        return req.reasoning
    return getattr(req, "mode", None) == "reasoning" or getattr(req, "samples", 1) > 1


def _degrade(req: BaseModel) -> BaseModel:
    if isinstance(req, CompareRequest):
        return req.degraded()
    # Re-validated (not model_copy) so the model validators check the lowered request too.
    return type(req).model_validate({**req.model_dump(), "mode": "direct", "samples": 1})


def _refusal(kind: JobKind, req: BaseModel, est: int, limit: int) -> BudgetTooSmall:
    fixes = [f"raise max_eval_tokens to at least {est}"]
    if _degradable(req):
        fixes += ["set budget_policy='degrade' (reasoning lowered to direct, one sample)"]
        fixes += ["lower reasoning_tokens or samples"]
    else:
        fixes += ["shorten the texts"]
        if kind in ("score", "rerank"):
            fixes += ["send fewer documents"]
        compare = kind == "compare" or getattr(req, "method", None) == "compare"
        if getattr(req, "mode", None) == "direct" and kind != "outcome" and not compare:
            fixes += ["use mode='single_pass' for the process part (one call per response)"]
    return BudgetTooSmall(
        f"estimated {est} tokens for this {kind} request, over max_eval_tokens={limit}; "
        + ", or ".join(fixes),
        estimate=est,
        limit=limit,
    )


def _degraded_plan(kind: JobKind, req: BaseModel, before: int, limit: int) -> BudgetPlan:
    lowered = _degrade(req)
    after = estimate(kind, lowered)
    if after.total > limit:
        raise BudgetTooSmall(
            f"estimated {before} tokens for this {kind} request, still {after.total} with "
            f"reasoning lowered to direct, over max_eval_tokens={limit}; raise max_eval_tokens "
            f"to at least {after.total} or shorten the texts",
            estimate=after.total,
            limit=limit,
        )
    note = (
        f"reasoning lowered to direct to fit max_eval_tokens={limit} "
        f"(estimate {before} -> {after.total})"
    )
    return BudgetPlan(request=lowered, estimate=after, degraded=True, note=note)


def plan(kind: JobKind, req: BaseModel) -> BudgetPlan:
    """Check `req` against its ``max_eval_tokens``; degrade it or raise ``BudgetTooSmall``.

    - no limit, or the estimate fits: the request as is;
    - over, ``budget_policy='degrade'`` and reasoning (or samples > 1): a copy in direct mode
      with one sample, if that fits (else ``BudgetTooSmall``);
    - over otherwise: ``BudgetTooSmall`` (422 budget_too_small).
    """
    est = estimate(kind, req)
    # getattr: the fields live on the request models' BudgetOptions; tolerate models without.
    limit: int | None = getattr(req, "max_eval_tokens", None)
    if limit is None or est.total <= limit:
        return BudgetPlan(request=req, estimate=est, degraded=False, note=None)
    if getattr(req, "budget_policy", "refuse") == "degrade" and _degradable(req):
        return _degraded_plan(kind, req, est.total, limit)
    raise _refusal(kind, req, est.total, limit)
