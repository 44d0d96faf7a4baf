"""The serving layer's planning over a scripted engine (tests/fakes.py): outcome, process,
split, score and rerank. Each number asserted is one the fake was told to return, or a hand
computation from those; prompts are checked by decoding what the engine received."""

from __future__ import annotations

from statistics import fmean
from typing import Any

import pytest
from pydantic import ValidationError

from service.errors import InvalidRequest
from service.protocol import (
    OutcomeRequest,
    ProcessRequest,
    RerankRequest,
    ScoreRequest,
    SplitRequest,
    Usage,
)
from service.scoring import prompts
from service.serving.outcome import OutcomeServing, judge_calls
from service.serving.process import ProcessServing, SplitServing
from service.serving.score import ScoreServing
from tests.support.fakes import FakeEngine, by_last_marker, sigmoid

Q = "What is 3 * (2 + 4)?"
RESPONSE = "2 + 4 = 6, and 3 * 6 = 18."
STEPS = ["First, 2 + 4 = 6.", "Then 3 * 6 = 19.", "The answer is 19."]
STEP_LOGITS = {STEPS[0]: 2.0, STEPS[1]: -1.0, STEPS[2]: 0.5}


def usage(prompt: int, generated: int, calls: int) -> Usage:
    return Usage(
        prompt_tokens=prompt,
        generated_tokens=generated,
        total_tokens=prompt + generated,
        engine_calls=calls,
    )


def process(engine: FakeEngine) -> ProcessServing:
    return ProcessServing(engine, SplitServing(engine), "fake-model")


# --- outcome -------------------------------------------------------------------------------


async def test_direct_outcome_is_one_label_read_of_the_rendered_prompt(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({RESPONSE: 1.5}))
    out = await OutcomeServing(engine, "fake-model").judge(
        OutcomeRequest(question=Q, response=RESPONSE)
    )
    ids = prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, Q, RESPONSE, False))
    assert engine.requests == [("verdict", ids)]
    assert (out.logit, out.verdict, out.mode) == (1.5, 1, "direct")
    assert out.score == pytest.approx(sigmoid(1.5))
    assert (out.rationale, out.samples) == (None, None)
    assert out.usage == usage(len(ids), 1, 1)


async def test_reasoning_stops_at_the_marker_and_reads_the_verdict_after_it(
    tokenizer: Any,
) -> None:
    rationale = "Check: 3 * 6 = 18, correct."
    engine = FakeEngine(
        tokenizer,
        verdicts=by_last_marker({RESPONSE: -3.0, rationale: 2.0}),
        write=lambda prompt: f"{rationale}\nVerdict: 1 and more text",
    )
    req = OutcomeRequest(
        question=Q,
        response=RESPONSE,
        mode="reasoning",
        reasoning_tokens=64,
        samples=2,
        seed=5,
        return_rationale=True,
    )
    out = await OutcomeServing(engine, "fake-model").judge(req)
    rendered = prompts.outcome_prompt(tokenizer, Q, RESPONSE, True)
    written = len(tokenizer.encode(rationale + "\n", add_special_tokens=False))
    verdict_ids = [
        *rendered.prompt_ids,
        *tokenizer.encode(rationale, add_special_tokens=False),
        *rendered.after_rationale_ids,
    ]
    # Per sample: the rationale call, then the verdict read after the re-encoded rationale.
    assert engine.requests == [("generate", rendered.prompt_ids), ("verdict", verdict_ids)] * 2
    assert out.samples is not None
    assert [s.rationale for s in out.samples] == [rationale, rationale]
    assert [s.rationale_finish for s in out.samples] == ["verdict", "verdict"]
    assert [s.logit for s in out.samples] == [2.0, 2.0]
    assert out.score == pytest.approx(sigmoid(2.0))
    assert out.rationale == rationale
    prompt = 2 * (len(rendered.prompt_ids) + len(verdict_ids))
    assert out.usage == usage(prompt, 2 * (written + 1), 4)


async def test_a_rationale_cut_by_its_budget_is_still_judged(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=lambda text: -0.5, write=lambda p: "word " * 50)
    req = OutcomeRequest(question=Q, response=RESPONSE, mode="reasoning", reasoning_tokens=3)
    out = await OutcomeServing(engine, "fake-model").judge(req)
    assert out.rationale is None  # not asked for
    assert out.logit == -0.5
    assert out.verdict == 0
    assert out.usage.generated_tokens == 3 + 1
    assert out.usage.engine_calls == 2


def test_samples_are_seeded_seed_plus_i_and_stop_at_the_verdict_marker(tokenizer: Any) -> None:
    rendered = prompts.outcome_prompt(tokenizer, Q, RESPONSE, True)
    calls = judge_calls(rendered, samples=3, reasoning_tokens=8, temperature=0.7, seed=10)
    assert [c.seed for c in calls] == [10, 11, 12]
    assert all(c.stop == ("Verdict:",) and c.temperature == 0.7 for c in calls)
    assert [c.seed for c in judge_calls(rendered, samples=2)] == [None, None]


# --- process -------------------------------------------------------------------------------


async def test_step_k_is_judged_with_steps_1_to_k_only(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(STEP_LOGITS))
    out = await process(engine).judge(ProcessRequest(question=Q, steps=STEPS))
    assert engine.kinds() == ["verdict"] * 3
    for k, (_, ids) in enumerate(engine.requests):
        text = engine.decode(ids)
        assert all(step in text for step in STEPS[: k + 1]), k
        assert not any(step in text for step in STEPS[k + 1 :]), k
    # Each prompt extends the previous one up to the end of the previous step (prefix reuse).
    first, second = engine.requests[0][1], engine.requests[1][1]
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert engine.decode(first[:shared]).count(STEPS[0]) == 1
    assert out.step_logits == [2.0, -1.0, 0.5]
    assert out.step_scores == pytest.approx([sigmoid(2.0), sigmoid(-1.0), sigmoid(0.5)])
    assert out.first_error_step == 1
    assert out.aggregate == pytest.approx(sigmoid(0.5))  # mean_logit: sigmoid((2 - 1 + 0.5) / 3)
    assert out.early_stopped is False
    assert out.split.method_used == "given"
    lengths = [len(ids) for _, ids in engine.requests]
    assert out.usage == usage(sum(lengths), 3, 3)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("min", sigmoid(-1.0)),
        ("mean", fmean([sigmoid(2.0), sigmoid(-1.0), sigmoid(0.5)])),
        ("last", sigmoid(0.5)),
        ("prod", sigmoid(2.0) * sigmoid(-1.0) * sigmoid(0.5)),
    ],
)
async def test_aggregations_of_the_scripted_steps(
    tokenizer: Any, how: str, expected: float
) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(STEP_LOGITS))
    req = ProcessRequest(question=Q, steps=STEPS, aggregation=how)
    assert (await process(engine).judge(req)).aggregate == pytest.approx(expected)


async def test_early_stop_judges_up_to_the_first_error(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(STEP_LOGITS))
    out = await process(engine).judge(ProcessRequest(question=Q, steps=STEPS, early_stop=True))
    assert engine.kinds() == ["verdict", "verdict"]
    assert out.step_logits == [2.0, -1.0]
    assert (out.first_error_step, out.early_stopped) == (1, True)
    assert out.aggregate == pytest.approx(sigmoid(0.5))  # over the judged steps: (2 - 1) / 2
    assert out.usage.engine_calls == 2


async def test_early_stop_at_the_last_step_is_not_an_early_stop(tokenizer: Any) -> None:
    logits = {STEPS[0]: 1.0, STEPS[1]: 1.0, STEPS[2]: -4.0}
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(logits))
    out = await process(engine).judge(ProcessRequest(question=Q, steps=STEPS, early_stop=True))
    assert out.step_logits == [1.0, 1.0, -4.0]
    assert (out.first_error_step, out.early_stopped) == (2, False)


async def test_single_pass_is_one_prefill_and_rescores_missing_slots_exactly(
    tokenizer: Any,
) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(STEP_LOGITS), missing_slots={1})
    req = ProcessRequest(question=Q, steps=STEPS, mode="single_pass")
    out = await process(engine).judge(req)
    conv = prompts.single_pass_prompt(tokenizer, Q, STEPS)
    assert engine.requests == [("slots", conv.ids), ("verdict", conv.ids[: conv.slots[1]])]
    assert out.step_logits == [2.0, -1.0, 0.5]
    assert out.exact_fallbacks == 1
    assert out.usage == usage(len(conv.ids) + conv.slots[1], 2, 2)


async def test_more_given_steps_than_max_steps_is_refused(tokenizer: Any) -> None:
    message = r"3 steps given, over max_steps=2; merge steps or raise max_steps"
    with pytest.raises(ValidationError, match=message):
        ProcessRequest(question=Q, steps=STEPS, max_steps=2)
    # The serving layer refuses too, should an unvalidated request ever reach it.
    engine = FakeEngine(tokenizer)
    req = ProcessRequest.model_construct(**{**ProcessRequest(question=Q, steps=STEPS).__dict__})
    req.max_steps = 2
    with pytest.raises(InvalidRequest, match=f"^{message}$"):
        await process(engine).judge(req)
    assert engine.requests == []


async def test_a_response_is_split_by_the_heuristic_first(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(STEP_LOGITS))
    out = await process(engine).judge(ProcessRequest(question=Q, response="\n\n".join(STEPS)))
    assert out.steps == STEPS
    assert out.split.model_dump() == {"method_used": "heuristic", "fallback_reason": None}
    assert out.step_logits == [2.0, -1.0, 0.5]


# --- split ---------------------------------------------------------------------------------

FLAT = "Add two and two to get four then multiply by three to get twelve."


async def test_an_exact_model_copy_gives_the_model_steps(tokenizer: Any) -> None:
    copy = "<response>Add two and two to get four [SPLIT] then multiply by three to get twelve."
    engine = FakeEngine(tokenizer, write=lambda prompt: copy + "</response>")
    out = await SplitServing(engine).handle(SplitRequest(response=FLAT, method="model"))
    assert engine.requests == [("generate", prompts.split_prompt_ids(tokenizer, FLAT, "[SPLIT]"))]
    assert out.steps == ["Add two and two to get four", "then multiply by three to get twelve."]
    assert (out.method_used, out.fallback_reason) == ("model", None)
    assert out.usage.engine_calls == 1


async def test_an_altered_model_copy_falls_back_to_the_heuristic(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, write=lambda prompt: "Add 2 and 2 [SPLIT] then times 3.")
    out = await SplitServing(engine).handle(SplitRequest(response=FLAT, method="model"))
    assert out.steps == [FLAT]
    # "Add " matches, then "2" is not "two": the copy is refused where it first differs.
    assert (out.method_used, out.fallback_reason) == (
        "heuristic",
        "model copy differs from the original at char 4",
    )


async def test_a_truncated_model_copy_falls_back_with_its_reason(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, write=lambda prompt: FLAT * 20)  # past the copy budget
    out = await SplitServing(engine).handle(SplitRequest(response=FLAT, method="model"))
    assert out.steps == [FLAT]
    assert (out.method_used, out.fallback_reason) == (
        "heuristic",
        "model output had no split markers",
    )
    # The budget: 1.25 x the text's tokens + 64.
    n = len(tokenizer.encode(FLAT, add_special_tokens=False))
    assert out.usage.generated_tokens == int(n * 1.25) + 64


async def test_auto_calls_no_model_when_the_text_has_structure(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    text = "\n\n".join(STEPS)
    out = await SplitServing(engine).handle(SplitRequest(response=text, method="auto"))
    assert (out.steps, out.method_used, engine.requests) == (STEPS, "heuristic", [])


# --- score and rerank ----------------------------------------------------------------------

RIGHT = "2 + 4 = 6.\n\n3 * 6 = 18."
WRONG = "2 + 4 = 6.\n\n3 * 6 = 20."
OUTCOME_LOGITS = {"= 18.": 1.0, "= 20.": -1.0}
PROCESS_LOGITS = {"2 + 4 = 6.": 0.5, "= 18.": 1.5, "= 20.": -2.0}


def outcome_or_process(text: str) -> float:
    """Process prompts carry the process instructions; everything else is an outcome read."""
    table = PROCESS_LOGITS if "Judge only the LAST step" in text else OUTCOME_LOGITS
    return by_last_marker(table)(text)


def scorer(engine: FakeEngine) -> ScoreServing:
    return ScoreServing(OutcomeServing(engine, "fake-model"), process(engine), "fake-model")


async def test_fused_score_is_alpha_outcome_plus_the_rest_process(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=outcome_or_process)
    req = ScoreRequest(question=Q, responses=[WRONG, RIGHT], alpha=0.25)
    out = await scorer(engine).score(req)
    wrong, right = out.results
    # Outcome sigmoid(-1) / sigmoid(1); process mean_logit of [0.5, -2] / [0.5, 1.5].
    assert (wrong.outcome, right.outcome) == pytest.approx((sigmoid(-1.0), sigmoid(1.0)))
    assert (wrong.process, right.process) == pytest.approx((sigmoid(-0.75), sigmoid(1.0)))
    assert wrong.final == pytest.approx(0.25 * sigmoid(-1.0) + 0.75 * sigmoid(-0.75))
    assert right.final == pytest.approx(0.25 * sigmoid(1.0) + 0.75 * sigmoid(1.0))
    assert (wrong.first_error_step, right.first_error_step) == (1, -1)
    assert (wrong.n_steps, right.n_steps) == (2, 2)
    assert out.ranking == [1, 0]
    assert out.usage.engine_calls == 2 + 4  # one outcome read and two steps per response


async def test_outcome_only_and_single_pass_scores(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=outcome_or_process)
    only = await scorer(engine).score(
        ScoreRequest(question=Q, responses=[WRONG, RIGHT], method="outcome")
    )
    assert [r.final for r in only.results] == pytest.approx([sigmoid(-1.0), sigmoid(1.0)])
    assert [r.process for r in only.results] == [None, None]
    assert engine.kinds() == ["verdict", "verdict"]
    engine.requests.clear()
    single = await scorer(engine).score(
        ScoreRequest(question=Q, responses=[RIGHT], mode="single_pass")
    )
    # The outcome half runs direct; the process half is one prefill.
    assert sorted(engine.kinds()) == ["slots", "verdict"]
    assert single.results[0].outcome == pytest.approx(sigmoid(1.0))


async def test_ties_rank_by_the_lowest_index(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=lambda text: 0.0)
    out = await scorer(engine).score(ScoreRequest(question=Q, responses=[RIGHT, WRONG, RIGHT]))
    assert out.ranking == [0, 1, 2]


async def test_rerank_returns_the_top_n_best_first(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=outcome_or_process)
    req = RerankRequest.model_validate(
        {
            "query": Q,
            "documents": [WRONG, {"text": RIGHT}, WRONG],
            "top_n": 2,
            "return_documents": True,
        }
    )
    out = await scorer(engine).rerank(req)
    wrong_final = 0.5 * sigmoid(-1.0) + 0.5 * sigmoid(-0.75)
    assert [r.index for r in out.results] == [1, 0]
    assert [r.relevance_score for r in out.results] == pytest.approx([sigmoid(1.0), wrong_final])
    assert [r.document.text if r.document else None for r in out.results] == [RIGHT, WRONG]
    assert out.meta.billed_units == {"search_units": 1}
    assert out.usage.engine_calls == 3 * 3  # all three documents are scored
