"""Verification against a reference over a scripted engine (docs/methods.md E): which judge
decides, what the model's prompt shows, what is charged, and what is refused.

The rule checks run in a real rule-check process pool; only the engine is scripted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from service.protocol import OutcomeRequest, ProcessRequest, ScoreRequest
from service.protocol.reward import RewardRequest
from service.scoring import prompts
from service.serving import budget
from service.serving.budget.text import REFERENCE_OVERHEAD
from service.serving.outcome import OutcomeServing
from service.serving.process import ProcessServing, SplitServing
from service.serving.rules import RuleVerifier
from service.serving.score import ScoreServing
from tests.support.fakes import FakeEngine, by_last_marker, sigmoid

Q = "Natalia sold 48 clips in April and half as many in May. How many in all?"
RIGHT = "In May she sold 48 / 2 = 24.\nIn all 48 + 24 = 72.\nThe answer is 72."
WRONG = "In May she sold 48 * 2 = 96.\nIn all 48 + 96 = 144.\nThe answer is 144."
# No number, no stated answer: the rule cannot decide, the model judges.
VAGUE = "She sold quite a lot of clips over the two months."
REF = "72"
SOLUTION = "Natalia sold 48/2 = 24 clips in May.\nAltogether 48 + 24 = 72 clips.\n#### 72"


@pytest.fixture(scope="module")
def rules() -> Iterator[RuleVerifier]:
    with RuleVerifier(workers=1, timeout_s=10.0) as verifier:
        yield verifier


def engine_for(tokenizer: Any) -> FakeEngine:
    return FakeEngine(tokenizer, verdicts=by_last_marker({RIGHT: 2.0, WRONG: -2.0, VAGUE: 0.5}))


async def test_hybrid_decides_by_rule_with_no_engine_call(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    serving = OutcomeServing(engine, "fake-model", rules)
    right = await serving.judge(OutcomeRequest(question=Q, response=RIGHT, reference=REF))
    wrong = await serving.judge(OutcomeRequest(question=Q, response=WRONG, reference=SOLUTION))
    assert engine.requests == []
    assert (right.score, right.verdict, right.logit, right.decided_by) == (1.0, 1, None, "rule")
    assert right.rule is not None
    assert right.rule.model_dump() == {
        "extracted": "72",
        "reference": "72",
        "equivalent": True,
        "reason": "equivalent",
    }
    assert (wrong.score, wrong.verdict, wrong.decided_by) == (0.0, 0, "rule")
    assert wrong.rule is not None
    assert wrong.rule.reason == "not_equivalent"
    assert wrong.rule.reference == "72"  # the final answer of the reference solution
    assert right.usage.total_tokens == wrong.usage.total_tokens == 0
    assert right.usage.engine_calls == 0


async def test_hybrid_falls_back_to_the_model_with_the_reference_in_its_prompt(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    req = OutcomeRequest(question=Q, response=VAGUE, reference=REF, criteria="Exact count.")
    out = await OutcomeServing(engine, "fake-model", rules).judge(req)
    ref = prompts.Reference(REF, "Exact count.")
    ids = prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, Q, VAGUE, False, ref))
    assert engine.requests == [("verdict", ids)]
    text = engine.decode(ids)
    assert "<reference>\n72\n</reference>" in text
    assert "<criteria>\nExact count.\n</criteria>" in text
    # The response comes last: candidates of one question share question and reference.
    assert text.index("</reference>") < text.index("<response>\n")
    assert (out.decided_by, out.logit) == ("model", 0.5)
    assert out.score == pytest.approx(sigmoid(0.5))
    assert out.rule is not None
    assert (out.rule.equivalent, out.rule.reason) == (None, "no_answer")
    assert out.usage.engine_calls == 1


async def test_rule_alone_leaves_an_undecided_answer_null(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    req = OutcomeRequest(question=Q, response=VAGUE, reference=REF, verifier="rule")
    out = await OutcomeServing(engine, "fake-model", rules).judge(req)
    assert (out.score, out.verdict, out.logit, out.decided_by) == (None, None, None, None)
    assert out.rule is not None
    assert out.rule.reason == "no_answer"
    assert engine.requests == []
    assert out.usage.total_tokens == 0


async def test_model_verifier_judges_even_what_the_rule_could_decide(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    req = OutcomeRequest(question=Q, response=RIGHT, reference=REF, verifier="model")
    out = await OutcomeServing(engine, "fake-model", rules).judge(req)
    assert (out.decided_by, out.logit, out.rule) == ("model", 2.0, None)
    assert len(engine.requests) == 1


async def test_a_pathological_answer_times_out_as_undecided_and_the_model_judges(
    tokenizer: Any,
) -> None:
    engine = engine_for(tokenizer)
    with RuleVerifier(workers=1, timeout_s=0.5) as slow:
        serving = OutcomeServing(engine, "fake-model", slow)
        req = OutcomeRequest(
            question=Q, response=r"\boxed{9^{9^{9^{9}}}}", reference="9^{9^{9^{10}}}"
        )
        out = await serving.judge(req)
    assert out.rule is not None
    assert out.rule.reason == "timeout"
    assert out.decided_by == "model"
    assert len(engine.requests) == 1


async def test_process_judges_each_step_with_the_reference_as_context(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    steps = RIGHT.splitlines()
    req = ProcessRequest(question=Q, steps=steps, reference=SOLUTION)
    out = await ProcessServing(engine, SplitServing(engine), "fake-model").judge(req)
    assert len(engine.requests) == len(steps) == len(out.step_scores)
    for _, ids in engine.requests:
        text = engine.decode(ids)
        assert "<reference>" in text
        assert "#### 72" in text
        assert text.index("</reference>") < text.index("<step 1>")
    single = ProcessRequest(question=Q, steps=steps, reference=SOLUTION, mode="single_pass")
    engine.requests.clear()
    await ProcessServing(engine, SplitServing(engine), "fake-model").judge(single)
    [(_, ids)] = engine.requests
    assert engine.decode(ids).count("<reference>\n") == 1


async def test_score_takes_the_rule_for_the_outcome_and_the_model_for_the_steps(
    tokenizer: Any, rules: RuleVerifier
) -> None:
    engine = engine_for(tokenizer)
    outcome = OutcomeServing(engine, "fake-model", rules)
    scorer = ScoreServing(outcome, ProcessServing(engine, SplitServing(engine), "fake-model"), "m")
    req = ScoreRequest(question=Q, responses=[WRONG, RIGHT, VAGUE], reference=REF, alpha=1.0)
    out = await scorer.score(req)
    assert [r.decided_by for r in out.results] == ["rule", "rule", "model"]
    assert [r.outcome for r in out.results] == [0.0, 1.0, pytest.approx(sigmoid(0.5))]
    assert out.ranking == [1, 2, 0]
    # Only the steps and the vague response's outcome reached the engine.
    step_prompts = [engine.decode(ids) for kind, ids in engine.requests]
    assert all("<reference>" in t for t in step_prompts)
    only_rule = ScoreRequest(
        question=Q, responses=[VAGUE, RIGHT], reference=REF, verifier="rule", method="outcome"
    )
    res = await scorer.score(only_rule)
    assert [r.final for r in res.results] == [None, 1.0]
    assert res.ranking == [1, 0]  # the undecided one last


def test_the_budget_charges_the_rule_nothing_and_bounds_hybrid_by_the_model() -> None:
    rule = OutcomeRequest(question=Q, response=RIGHT, reference=REF, verifier="rule")
    hybrid = OutcomeRequest(question=Q, response=RIGHT, reference=REF)
    model = OutcomeRequest(question=Q, response=RIGHT, reference=REF, verifier="model")
    plain = OutcomeRequest(question=Q, response=RIGHT)
    assert budget.estimate("outcome", rule).total == 0
    assert budget.estimate("outcome", hybrid) == budget.estimate("outcome", model)
    extra = budget.estimate("outcome", model).total - budget.estimate("outcome", plain).total
    assert extra == REFERENCE_OVERHEAD + budget.estimate_text_tokens(REF)
    reward = RewardRequest(query=["q\n###\na"], labels=["72"], verifier="rule")
    assert budget.estimate("reward", reward).total == 0


# --- what is refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reference": "  "}, "reference must not be empty"),
        ({"reference": 72}, "reference"),
        ({"criteria": ""}, "criteria must not be empty"),
        ({"verifier": "rule"}, "needs a reference"),
        ({"verifier": "hybrid"}, "needs a reference"),
        ({"verifier": "oracle", "reference": "1"}, "verifier"),
    ],
)
def test_a_bad_reference_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        OutcomeRequest.model_validate({"question": Q, "response": RIGHT, **fields})


def test_process_refuses_a_rule_verifier_and_score_a_rule_with_steps() -> None:
    with pytest.raises(ValidationError, match="a rule can check only the final answer"):
        ProcessRequest(question=Q, steps=["1"], reference=REF, verifier="hybrid")
    with pytest.raises(ValidationError, match="process scores need the model"):
        ScoreRequest(question=Q, responses=[RIGHT], reference=REF, verifier="rule")


@pytest.mark.parametrize(
    ("labels", "verifier", "message"),
    [
        (["72"], None, "labels has 1 items for 2 queries"),
        ([{"answer": 72}, "1"], None, r"labels\[0\] is an object without `type`"),
        ([True, "1"], None, r"labels\[0\] is bool"),
        (["72", ""], "rule", r"labels\[1\] is missing or empty"),
    ],
)
def test_reward_labels_are_checked(labels: list[Any], verifier: str | None, message: str) -> None:
    body = {"query": ["q1 a", "q2 b"], "labels": labels, "verifier": verifier}
    with pytest.raises(ValidationError, match=message):
        RewardRequest.model_validate(body)


def test_reward_labels_empty_or_null_mean_no_reference() -> None:
    req = RewardRequest(query=["a", "b", "c", "d"], labels=["", None, 72, "3/4"])
    assert req.references() == [None, None, "72", "3/4"]
