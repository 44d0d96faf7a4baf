"""Token budget estimates, the refuse/degrade plan and the quota helpers (serving/budget/)."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from service.errors import BudgetTooSmall, InvalidRequest
from service.protocol import (
    OutcomeRequest,
    ProcessMode,
    ProcessRequest,
    RerankDocument,
    RerankRequest,
    ScoreMethod,
    ScoreRequest,
    SplitRequest,
)
from service.protocol.mcq import CalibrationRequest, MCQAnswerRequest, MCQBatchRequest
from service.scoring import prompts, splitting
from service.serving.budget import Estimate, estimate, estimate_text_tokens, plan

Q = "Janet has 16 eggs. She eats 3 and bakes with 4. How many eggs are left?"
A = "She uses 3 + 4 = 7 eggs.\n\nSo 16 - 7 = 9 eggs are left.\n\nA: 9"
STEPS = ["She uses 3 + 4 = 7 eggs.", "So 16 - 7 = 9 eggs are left.", "A: 9"]

# codec="utf-8" leaves out lone surrogates, which no request text can hold.
words = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=80)
non_blank = st.builds(lambda a, b: a + "x" + b, words, words)


def with_budget(cls: type[BaseModel], data: dict[str, Any], limit: int | None, policy: str) -> Any:
    """A request carrying max_eval_tokens/budget_policy, whether or not the model declares them.

    Before the fields exist the attributes are set directly; budget.plan reads them with getattr.
    """
    if "max_eval_tokens" in cls.model_fields:
        return cls.model_validate({**data, "max_eval_tokens": limit, "budget_policy": policy})
    req = cls.model_validate(data)
    object.__setattr__(req, "max_eval_tokens", limit)
    object.__setattr__(req, "budget_policy", policy)
    return req


# --- text estimate -------------------------------------------------------------------------


def test_text_estimate_counts_by_character_class() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("1234567890") == 10  # one token per digit (SmolLM2)
    assert estimate_text_tokens("+-*/") == 4
    assert estimate_text_tokens("abcdef") == 2  # 3 bytes of letters a token
    assert estimate_text_tokens("这是") == 3  # 6 UTF-8 bytes, 2 a token


@given(words, words)
def test_text_estimate_grows_with_text_and_stays_under_bytes(a: str, b: str) -> None:
    assert estimate_text_tokens(a + b) >= estimate_text_tokens(a)
    assert estimate_text_tokens(a + b) >= estimate_text_tokens(b)
    # Byte-level BPE never needs more than one token a byte: the estimate stays below that.
    assert estimate_text_tokens(a) <= len(a.encode())


# --- estimate structure --------------------------------------------------------------------


# Hand counts of the fixed texts (digits + punctuation + other ASCII bytes / 3, rounded up):
#   Q      4 digits, 3 punct, 64 other -> 4 + 3 + 22 = 29
#   A      8 digits, 7 punct, 45 other -> 8 + 7 + 15 = 30
#   STEPS  3 + 3 + 6 = 12,  4 + 3 + 7 = 14,  1 + 1 + 1 = 3
#   FLAT   6 digits, 5 punct, 34 other -> 6 + 5 + 12 = 23
FLAT = "She uses 7 eggs, so 16 - 7 = 9 are left. A: 9"  # no structure: one heuristic step


def test_the_fixed_texts_have_their_hand_counted_estimates() -> None:
    assert [estimate_text_tokens(t) for t in (Q, A, *STEPS, FLAT)] == [29, 30, 12, 14, 3, 23]


def test_direct_outcome_is_one_call_and_one_generated_token() -> None:
    est = estimate("outcome", OutcomeRequest(question=Q, response=A))
    # 160 overhead + 29 + 30 prompt tokens, one verdict token.
    assert est == Estimate(total=220, prompt=219, generated=1, calls=1)


def test_reasoning_counts_rationale_and_verdict_call_per_sample() -> None:
    req = OutcomeRequest(question=Q, response=A, mode="reasoning", reasoning_tokens=100, samples=3)
    # Per sample: the rationale call reads 219 and writes up to 100, the verdict call reads
    # 219 + 100 and writes 1; three samples.
    assert estimate("outcome", req) == Estimate(total=1917, prompt=1614, generated=303, calls=6)


@given(non_blank, words)
def test_outcome_estimate_grows_with_response(response: str, more: str) -> None:
    small = estimate("outcome", OutcomeRequest(question=Q, response=response))
    big = estimate("outcome", OutcomeRequest(question=Q, response=response + more))
    assert big.total >= small.total


@given(st.integers(1, 4096), st.integers(0, 4096), st.integers(1, 8), st.integers(0, 8))
def test_outcome_estimate_grows_with_reasoning_tokens_and_samples(
    tokens: int, more_tokens: int, samples: int, more_samples: int
) -> None:
    def total(r: int, s: int) -> int:
        req = OutcomeRequest(
            question=Q, response=A, mode="reasoning", reasoning_tokens=r, samples=s
        )
        return estimate("outcome", req).total

    base = total(tokens, samples)
    assert total(tokens + more_tokens, samples) >= base
    assert total(tokens, samples + more_samples) >= base
    assert base > estimate("outcome", OutcomeRequest(question=Q, response=A)).total


@given(st.lists(non_blank, min_size=1, max_size=12), non_blank)
def test_process_estimate_grows_with_steps(steps: list[str], extra: str) -> None:
    for mode in ("direct", "reasoning", "single_pass"):
        small = estimate("process", ProcessRequest(question=Q, steps=steps, mode=mode))
        big = estimate("process", ProcessRequest(question=Q, steps=[*steps, extra], mode=mode))
        assert big.total > small.total


def test_multi_step_process_reads_each_prefix() -> None:
    est = estimate("process", ProcessRequest(question=Q, steps=STEPS))
    # 160 overhead + 29 question, then each step adds its size and a 16-token block:
    # 217 (step 1), 247 (steps 1-2), 266 (steps 1-3).
    assert est == Estimate(total=733, prompt=730, generated=3, calls=3)


def test_single_pass_is_one_call_and_cheaper_than_multi_step() -> None:
    steps = [f"Step {i}: add {i} apples to the basket." for i in range(12)]
    single = estimate("process", ProcessRequest(question=Q, steps=steps, mode="single_pass"))
    multi = estimate("process", ProcessRequest(question=Q, steps=steps))
    assert (single.generated, single.calls) == (1, 1)
    assert single.total < multi.total


def test_early_stop_still_counts_every_step() -> None:
    plain = estimate("process", ProcessRequest(question=Q, steps=STEPS))
    early = estimate("process", ProcessRequest(question=Q, steps=STEPS, early_stop=True))
    assert early == plain


def test_process_response_uses_the_heuristic_split() -> None:
    from_response = estimate("process", ProcessRequest(question=Q, response=A))
    from_steps = estimate("process", ProcessRequest(question=Q, steps=splitting.heuristic_split(A)))
    assert from_response == from_steps


def test_model_split_adds_the_copy_call() -> None:
    flat = FLAT
    # The copy call reads 100 + 23 and may write int(23 * 1.25) + 64 = 92 tokens.
    copy = Estimate(total=215, prompt=123, generated=92, calls=1)
    heuristic = estimate("process", ProcessRequest(question=Q, response=flat))
    assert heuristic == Estimate(total=229, prompt=228, generated=1, calls=1)  # 160 + 29 + 23 + 16
    for method in ("model", "auto"):
        req = ProcessRequest(question=Q, response=flat, split=method)
        assert estimate("process", req) == heuristic + copy
    # auto with structure keeps the heuristic split: no copy call
    structured = ProcessRequest(question=Q, response=A, split="auto")
    assert estimate("process", structured) == estimate(
        "process", ProcessRequest(question=Q, response=A)
    )
    assert estimate("split", SplitRequest(response=flat, method="model")) == copy
    assert estimate("split", SplitRequest(response=flat)) == Estimate.of(0, 0, 0)


def test_score_sums_outcome_and_process_per_method() -> None:
    def score(method: ScoreMethod, mode: ProcessMode = "direct") -> Estimate:
        req = ScoreRequest(question=Q, responses=[A, A + " done"], method=method, mode=mode)
        return estimate("score", req)

    assert score("fused") == score("outcome") + score("process")
    # single_pass: the outcome half runs direct
    assert score("outcome", "single_pass") == score("outcome")
    process_sp = ProcessRequest(question=Q, response=A, mode="single_pass")
    assert score("process", "single_pass").calls == 2 * estimate("process", process_sp).calls


@given(st.lists(non_blank, min_size=1, max_size=6), non_blank)
def test_score_and_rerank_grow_with_documents(docs: list[str], extra: str) -> None:
    for method in ("outcome", "process", "fused"):
        small = estimate("score", ScoreRequest(question=Q, responses=docs, method=method))
        big = estimate("score", ScoreRequest(question=Q, responses=[*docs, extra], method=method))
        assert big.total > small.total
        rerank = RerankRequest(
            query=Q, documents=[RerankDocument(text=d) for d in docs], method=method
        )
        assert estimate("rerank", rerank) == small  # query = question, documents = responses


def test_estimate_rejects_unknown_kind_and_wrong_model() -> None:
    with pytest.raises(ValueError, match="unknown request kind"):
        estimate("bogus", OutcomeRequest(question=Q, response=A))
    with pytest.raises(TypeError, match="ProcessRequest"):
        estimate("process", OutcomeRequest(question=Q, response=A))


# --- against the real tokenizer ------------------------------------------------------------


@pytest.fixture(scope="module")
def gsm8k_pairs(data_dir: Path) -> list[tuple[str, str]]:
    """(question, solution) pairs: model solutions of the first GSM8K rows."""
    pairs: list[tuple[str, str]] = []
    with (data_dir / "gsm8k" / "example_model_solutions.jsonl").open() as fh:
        for line in islice(fh, 6):
            row = json.loads(line)
            pairs += [(row["question"], v["solution"]) for v in row.values() if "solution" in v]
    assert len(pairs) >= 12
    return pairs


def lines_of(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def assert_bound(est: int, real: int) -> None:
    assert real <= est < 2 * real, (est, real)


def test_outcome_estimate_bounds_real_prompt(tokenizer: Any, gsm8k_pairs: list[Any]) -> None:
    for q, a in gsm8k_pairs:
        real = len(prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, q, a, False)))
        assert_bound(estimate("outcome", OutcomeRequest(question=q, response=a)).prompt, real)
        # reasoning, 1 rationale token: prompt, then prompt + rationale + "\nVerdict: "
        r = prompts.outcome_prompt(tokenizer, q, a, True)
        real = 2 * len(r.prompt_ids) + 1 + len(r.after_rationale_ids)
        req = OutcomeRequest(question=q, response=a, mode="reasoning", reasoning_tokens=1)
        assert_bound(estimate("outcome", req).prompt, real)


def test_process_estimate_bounds_real_prompts(tokenizer: Any, gsm8k_pairs: list[Any]) -> None:
    for q, a in gsm8k_pairs:
        steps = lines_of(a)
        rendered = prompts.process_prompts(tokenizer, q, steps, False)
        real = sum(len(prompts.direct_prompt_ids(r)) for r in rendered)
        assert_bound(estimate("process", ProcessRequest(question=q, steps=steps)).prompt, real)
        single = prompts.single_pass_prompt(tokenizer, q, steps)
        req = ProcessRequest(question=q, steps=steps, mode="single_pass")
        assert_bound(estimate("process", req).prompt, len(single.ids))


def test_split_estimate_bounds_real_prompt(tokenizer: Any, gsm8k_pairs: list[Any]) -> None:
    for _, a in gsm8k_pairs:
        real = len(prompts.split_prompt_ids(tokenizer, a, splitting.SPLIT_MARKER))
        assert_bound(estimate("split", SplitRequest(response=a, method="model")).prompt, real)


@pytest.fixture(scope="module")
def arc_items(data_dir: Path) -> list[tuple[str, list[str]]]:
    items = []
    with (data_dir / "arc" / "ARC-Challenge-Dev.jsonl").open() as fh:
        for line in islice(fh, 12):
            row = json.loads(line)["question"]
            items.append((row["stem"], [c["text"] for c in row["choices"]]))
    return items


def test_mcq_estimates_bound_real_prompts(tokenizer: Any, arc_items: list[Any]) -> None:
    for q, options in arc_items:
        real = len(prompts.mcq_prompt(tokenizer, q, options).prompt_ids)
        item = {"question": q, "options": options}
        assert_bound(estimate("mcq_answer", MCQAnswerRequest(**item)).prompt, real)
        pops = sum(len(prompts.popularity_ids(tokenizer, o)[0]) for o in options)
        req = MCQAnswerRequest(**item, popularity="model", debias="popdebias", popdebias_lambda=1)
        assert_bound(estimate("mcq_answer", req).prompt, real + pops)
        # PriDe's calibration reads K cyclic permutations: K prompts of about the same length.
        cal = CalibrationRequest(method="pride", items=[item])
        assert estimate("mcq_calibrate", cal).calls == len(options)
        assert_bound(estimate("mcq_calibrate", cal).prompt, real * len(options))
    batch = MCQBatchRequest(items=[{"question": q, "options": o} for q, o in arc_items])
    one = sum(
        estimate("mcq_answer", MCQAnswerRequest(question=q, options=o)).total for q, o in arc_items
    )
    assert estimate("mcq_batch", batch).total == one
    contextual = MCQBatchRequest(items=batch.items, debias="contextual")
    assert estimate("mcq_batch", contextual).calls == len(arc_items) + 3 * len(
        {len(o) for _, o in arc_items}
    )


# --- plan ----------------------------------------------------------------------------------

REASONING = {"question": Q, "response": A, "mode": "reasoning", "reasoning_tokens": 512}


def test_no_limit_or_enough_budget_keeps_the_request() -> None:
    req = with_budget(OutcomeRequest, REASONING, None, "refuse")
    p = plan("outcome", req)
    assert p.request is req
    assert (p.degraded, p.note) == (False, None)
    assert p.estimate == estimate("outcome", req)
    roomy = with_budget(OutcomeRequest, REASONING, p.estimate.total, "refuse")
    assert plan("outcome", roomy).request is roomy


def test_refuse_raises_budget_too_small() -> None:
    req = with_budget(OutcomeRequest, REASONING, 300, "refuse")
    total = estimate("outcome", req).total
    with pytest.raises(BudgetTooSmall) as info:
        plan("outcome", req)
    err = info.value
    assert isinstance(err, InvalidRequest)
    assert (err.status, err.type) == (422, "budget_too_small")
    assert err.estimate == total
    assert str(total) in err.message
    assert "max_eval_tokens=300" in err.message
    assert "budget_policy='degrade'" in err.message
    assert "reasoning_tokens" in err.message


def test_degrade_lowers_reasoning_to_direct() -> None:
    data = {**REASONING, "samples": 4, "seed": 7}
    req = with_budget(ProcessRequest, {**data, "steps": STEPS, "response": None}, 2000, "degrade")
    before = estimate("process", req).total
    p = plan("process", req)
    assert p.degraded
    assert isinstance(p.request, ProcessRequest)
    assert (p.request.mode, p.request.samples) == ("direct", 1)
    assert p.request.steps == STEPS
    assert p.request.seed == 7
    assert p.estimate == estimate("process", p.request)
    assert p.estimate.total <= 2000 < before
    assert p.note is not None
    assert "max_eval_tokens=2000" in p.note
    assert f"{before} -> {p.estimate.total}" in p.note
    assert req.mode == "reasoning"  # the original is left alone


def test_degrade_that_still_does_not_fit_refuses() -> None:
    req = with_budget(OutcomeRequest, REASONING, 50, "degrade")
    direct = estimate("outcome", OutcomeRequest(question=Q, response=A)).total
    with pytest.raises(BudgetTooSmall) as info:
        plan("outcome", req)
    assert info.value.estimate == direct
    assert str(direct) in info.value.message


def test_degrade_on_a_direct_request_still_refuses() -> None:
    data = {"question": Q, "responses": [A] * 5}
    req = with_budget(ScoreRequest, data, 100, "degrade")
    with pytest.raises(BudgetTooSmall) as info:
        plan("score", req)
    assert info.value.estimate == estimate("score", req).total
    assert "fewer documents" in info.value.message
    split = with_budget(
        SplitRequest, {"response": "one long line", "method": "model"}, 10, "degrade"
    )
    with pytest.raises(BudgetTooSmall):
        plan("split", split)
