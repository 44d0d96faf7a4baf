"""Choices-only / reasoning audit logic: prompts, answer extraction, summaries, perturbations,
and the logistic regression of correctness on strategy labels."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from service.protocol.audit import AuditRequest
from service.scoring import audit, prompts, tagging
from service.scoring.audit import ConditionRun, ItemRun

# --- prompts ---------------------------------------------------------------------------------

# Question words from letters the options and the template never use together.
q_words = st.lists(
    st.text("qxzj", min_size=5, max_size=9).map(lambda w: "zq" + w), min_size=1, max_size=8
)
opt_texts = st.lists(
    st.text("abcdefgh ", min_size=1, max_size=12).filter(str.strip), min_size=2, max_size=10
)


def _contains(seq: list[int], sub: list[int]) -> bool:
    return any(seq[i : i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


@given(q_words, opt_texts, st.sampled_from(["base", "reason"]))
def test_choices_only_prompt_holds_no_token_of_the_question(
    tokenizer: Any, words: list[str], options: list[str], mode: str
) -> None:
    question = " ".join(words)
    full = prompts.render_chat(tokenizer, "s", audit.audit_user(question, options, mode))  # type: ignore[arg-type]
    hidden = prompts.render_chat(tokenizer, "s", audit.audit_user(None, options, mode))  # type: ignore[arg-type]
    assert all(w in full for w in words)  # the check below could see them
    assert not any(w in hidden for w in words)
    full_ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    hidden_ids = tokenizer(hidden, add_special_tokens=False)["input_ids"]
    for word in words[1:]:  # inside the question each is preceded by a space
        sub = tokenizer(" " + word, add_special_tokens=False)["input_ids"]
        assert _contains(full_ids, sub)
        assert not _contains(hidden_ids, sub)
    letters = ",".join(audit.LETTERS[: len(options)])
    assert f"LETTER is one of {letters}." in hidden
    assert f"{audit.LETTERS[len(options) - 1]}) " in hidden
    if len(options) < len(audit.LETTERS):
        assert f"{audit.LETTERS[len(options)]}) " not in hidden


def test_prompt_wording_per_condition() -> None:
    base = audit.audit_user("Q?", ["x", "y"], "base")
    reason = audit.audit_user("Q?", ["x", "y"], "reason")
    hidden = audit.audit_user(None, ["x", "y"], "reason")
    assert "entire content of your response" in base
    assert "step by step" not in base
    assert "last line of your response" in reason
    assert "Think step by step" in reason
    assert "use any strategy necessary" in hidden
    assert "Q?" not in hidden
    assert base.endswith("Q?\n\nA) x\nB) y")


# --- answer extraction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "k", "expected"),
    [
        ("ANSWER: B", 4, 1),
        ("answer : (c)", 4, 2),
        ("Answer:D", 4, 3),
        ("ANSWER: A\nthinking more\nANSWER: C", 4, 2),  # the last matching line decides
        ("ANSWER: E", 4, None),  # outside the K letters: a parse failure
        ("ANSWER: C\nANSWER: Z", 4, None),
        ("The answer is B", 4, None),
        ("", 4, None),
        ("ANSWER: J", 10, 9),
    ],
)
def test_extract_answer(text: str, k: int, expected: int | None) -> None:
    assert audit.extract_answer(text, k) == expected


def test_answer_slot_cuts_at_the_last_answer() -> None:
    assert audit.answer_slot_prefix("Because x.\nANSWER: B") == "Because x.\nANSWER:"
    assert audit.answer_slot_prefix("a ANSWER: A then ANSWER: (C)") == "a ANSWER: A then ANSWER:"
    assert audit.answer_slot_prefix("no answer here  ") == "no answer here\nANSWER:"


# --- perturbations ----------------------------------------------------------------------------


@given(st.integers(2, 9), st.integers(0, 8), st.sampled_from(audit.PERTURBATIONS), st.integers())
def test_perturb_maps_back_to_the_original(k: int, gold: int, kind: str, seed: int) -> None:
    gold %= k
    options = [f"opt {i}" for i in range(k)]
    p = audit.perturb(options, gold, kind, random.Random(seed))  # type: ignore[arg-type]
    assert len(p.options) == k + 1
    kept = [j for j in range(k + 1) if j != p.inserted_at]
    assert [p.options[j] for j in kept] == options
    assert [p.source[j] for j in kept] == list(range(k))
    injected = p.options[p.inserted_at]
    assert injected != options[gold]
    if kind == "duplicate":
        assert p.source[p.inserted_at] != gold
        assert injected == options[p.source[p.inserted_at]]
    else:
        assert p.source[p.inserted_at] == -1
        assert injected not in options


# --- the summary -------------------------------------------------------------------------------


def _run(index: int, probs: list[float], parsed: int | None = None) -> ConditionRun:
    return ConditionRun(index=index, probs=probs, parsed=parsed, rationale="r")


def _fixture() -> list[ItemRun]:
    """4 items; gold index 0 everywhere; hand-checked figures below."""
    p = [0.9, 0.05, 0.05]  # only used for prob reads
    items = []
    # (full_base, full_reason, co_base, co_reason, parsed for reasons)
    spec = [
        (0, 0, 0, 1, (0, 1)),
        (1, 0, 0, 0, (0, None)),
        (1, 0, 2, 0, (2, 0)),
        (0, 1, 1, 1, (1, 1)),
    ]
    for i, (fb, fr, cb, cr, (pf, pc)) in enumerate(spec):
        k = 3 if i < 2 else 4
        item = ItemRun(k=k, answer_index=0, item_id=f"i{i}")
        probs_cb = (
            [0.85, 0.1, 0.05] + [0.0] * (k - 3) if cb == 0 else [0.2, 0.5, 0.3] + [0.0] * (k - 3)
        )
        item.runs = {
            "full_base": _run(fb, p + [0.0] * (k - 3)),
            "full_reason": _run(fr, p + [0.0] * (k - 3), pf),
            "choices_only_base": _run(cb, probs_cb),
            "choices_only_reason": _run(cr, p + [0.0] * (k - 3), pc),
        }
        items.append(item)
    items[1].runs["choices_only_base"].probs = [0.7, 0.2, 0.1]  # right, but under 0.8
    return items


def test_summary_on_a_hand_checked_fixture() -> None:
    s = audit.summarize(_fixture())
    c = s["conditions"]
    assert c["full_base"]["accuracy"] == 0.5
    assert c["full_reason"]["accuracy"] == 0.75
    assert c["choices_only_base"]["accuracy"] == 0.5
    assert c["choices_only_reason"]["accuracy"] == 0.5
    assert c["full_base"]["chance"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 4 + 1 / 4) / 4)
    # full_reason parsed (0, 0, 2, 1): no failure; disagreement where parsed != index: items 2, 3
    assert c["full_reason"]["parse_failure_rate"] == 0.0
    assert c["full_reason"]["accuracy_parsed"] == 0.5
    assert c["full_reason"]["disagreement_rate"] == 0.25
    # choices_only_reason parsed (1, None, 0, 1): one failure; the 3 parsed agree
    assert c["choices_only_reason"]["parse_failure_rate"] == 0.25
    assert c["choices_only_reason"]["disagreement_rate"] == pytest.approx(0.0)
    assert "parse_failure_rate" not in c["full_base"]
    full = s["reasoning_effect"]["full"]
    # reason right only: items 1, 2; base right only: item 3
    assert (full["only_reason_right"], full["only_base_right"]) == (2, 1)
    assert full["delta"] == pytest.approx(0.25)
    assert full["p_value"] == pytest.approx(1.0)
    assert full["retention"] == 0.25  # only item 0 keeps its letter
    co = s["reasoning_effect"]["choices_only"]
    assert (co["only_reason_right"], co["only_base_right"]) == (1, 1)
    assert co["retention"] == 0.5  # base (0, 0, 2, 1) vs reason (1, 0, 0, 1)
    assert [a["id"] for a in s["artifacts"]] == ["i0"]
    assert s["perturbations"] == {}


def test_summary_counts_idk_and_perturbations() -> None:
    items = _fixture()
    items[0].runs["full_base"].idk = True
    run = audit.PerturbedRun
    items[0].perturbed = {
        "full_base": {
            "duplicate": run(0, False, 1),
            "nonsense": run(-1, True, 0),
            "false": run(2, False, 3),
        }
    }
    items[1].perturbed = {"full_base": {k: run(1, False, 0) for k in audit.PERTURBATIONS}}
    s = audit.summarize(items)
    assert s["conditions"]["full_base"]["idk_rate"] == 0.25
    per = s["perturbations"]["full_base"]
    # item 0 chose 0: changes under nonsense (-1) and false (2); item 1 chose 1: no change
    assert per["duplicate"] == {"n": 2, "answer_change_rate": 0.0, "injected_chosen_rate": 0.0}
    assert per["nonsense"]["answer_change_rate"] == 0.5
    assert per["nonsense"]["injected_chosen_rate"] == 0.5
    assert per["false"]["answer_change_rate"] == 0.5


def test_summary_of_one_condition_has_no_paired_test() -> None:
    items = [ItemRun(k=4, answer_index=1, runs={"full_base": _run(1, [0.1, 0.7, 0.1, 0.1])})]
    s = audit.summarize(items)
    assert s["reasoning_effect"] == {}
    assert s["conditions"]["full_base"]["accuracy"] == 1.0
    empty = audit.summarize([])
    assert empty["n_items"] == 0
    assert empty["conditions"] == {}


# --- the regression ---------------------------------------------------------------------------


def test_logit_regression_recovers_planted_coefficients() -> None:
    rng = np.random.default_rng(0)
    n = 6000
    x = rng.integers(0, 2, size=(n, 3)).astype(bool)
    planted = {"const": 0.4, "ELIM": 1.2, "SHALLOW": -0.9, "FACT": 0.0}
    z = planted["const"] + planted["ELIM"] * x[:, 0] + planted["SHALLOW"] * x[:, 1]
    y = rng.random(n) < 1 / (1 + np.exp(-z))
    labels = [{"ELIM": bool(a), "SHALLOW": bool(b), "FACT": bool(c)} for a, b, c in x]
    fit = tagging.logit_regression(labels, [bool(v) for v in y])
    assert fit["error"] is None
    coefs = fit["coefficients"]
    for name, value in planted.items():
        assert coefs[name]["coef"] == pytest.approx(value, abs=0.15), name
    assert coefs["ELIM"]["p_value"] < 1e-10
    assert coefs["SHALLOW"]["p_value"] < 1e-10
    assert coefs["FACT"]["p_value"] > 0.001


def test_logit_regression_says_why_it_cannot_fit() -> None:
    labels = [{"ELIM": True, "FACT": bool(i % 2)} for i in range(10)]
    one_outcome = tagging.logit_regression(labels, [True] * 10)
    assert one_outcome["error"] is not None
    assert one_outcome["dropped"] == ["ELIM"]  # never varies
    few = tagging.logit_regression(labels[:2], [True, False])
    assert few["error"] is not None
    # perfectly separated: fit or explain, never raise
    sep = tagging.logit_regression(labels, [bool(i % 2) for i in range(10)])
    assert sep["error"] is not None or sep["warnings"]


# --- trace-to-answer predictability ---------------------------------------------------------


@pytest.mark.parametrize(
    ("rationale", "trace"),
    [
        ("Fish live in water.\n\nSo the answer is (B).\nANSWER: B", "Fish live in water."),
        # the last ANSWER line and all after it go; a body that discusses letters stays
        (
            "B) and C) are metals.\n\nA mammal is warm-blooded.\n\nANSWER: A\nextra",
            "B) and C) are metals.\n\nA mammal is warm-blooded.",
        ),
        ("Compare them.\n\nOption C is best, so I pick it.", "Compare them."),
        ("Choice: D fits.\n\nANSWER: D", ""),  # one paragraph, naming its letter: nothing left
        ("A cat is a mammal.\n\nANSWER: A", "A cat is a mammal."),  # "A" as an article stays
        ("No line at all, A is an article here.", "No line at all, A is an article here."),
        ("answer: c\n", ""),
    ],
)
def test_the_judge_reads_the_trace_without_its_answer(rationale: str, trace: str) -> None:
    assert audit.stripped_trace(rationale) == trace


def test_the_judge_prompt_holds_the_trace_and_the_options_never_the_question() -> None:
    text = audit.predict_user("Water is wet.", ["ice", "steam", "rain", "snow"])
    assert "Water is wet." in text
    assert "A) ice\nB) steam\nC) rain\nD) snow" in text
    assert "one of A,B,C,D" in text
    assert "ANSWER: $LETTER" in text


def _predicted(index: int, predicted: int | None, k: int = 4) -> ConditionRun:
    run = _run(index, [1 / k] * k, index)
    empty = predicted is None
    run.prediction = audit.Prediction(predicted, None if empty else 0.9, empty)
    return run


def test_predictability_counts_agreement_over_the_traces_read() -> None:
    items = [
        ItemRun(k=4, answer_index=0, runs={"full_reason": _predicted(0, 0)}),
        ItemRun(k=4, answer_index=0, runs={"full_reason": _predicted(1, 1)}),
        ItemRun(k=4, answer_index=0, runs={"full_reason": _predicted(2, 3)}),
        ItemRun(k=5, answer_index=0, runs={"full_reason": _predicted(2, None, 5)}),
        ItemRun(k=4, answer_index=0, runs={"full_reason": _run(1, [0.25] * 4, 1)}),  # not asked
    ]
    pred = audit.summarize(items)["conditions"]["full_reason"]["predictability"]
    assert (pred["n"], pred["n_empty"]) == (3, 1)
    assert pred["agreement"] == pytest.approx(2 / 3)
    assert pred["chance"] == 0.25
    lo, hi = audit.wilson(2, 3)
    assert (pred["ci_low"], pred["ci_high"]) == (lo, hi)
    assert lo < 2 / 3 < hi
    # the Wilson interval, written out
    z, p, n = 1.959963984540054, 2 / 3, 3
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    assert audit.summarize(items[4:])["conditions"]["full_reason"]["predictability"] is None


def test_predictability_needs_a_reason_condition() -> None:
    item = {"question": "q", "options": ["a", "b"], "answer_index": 0}
    with pytest.raises(ValidationError, match="predictability needs a reason condition"):
        AuditRequest.model_validate(
            {"items": [item], "conditions": ["full_base"], "predictability": True}
        )
    ok = AuditRequest.model_validate(
        {"items": [item], "conditions": ["choices_only_reason"], "predictability": True}
    )
    assert ok.predictability


async def test_a_remote_judge_reads_the_traces_and_the_served_model_everything_else(
    tokenizer: Any,
) -> None:
    """With trace_judge 'remote' the traces go to the judge engine (here one that
    favours the last letter) while the answers stay the served model's (it favours A)."""
    from service.errors import InvalidRequest
    from service.serving.audit import AuditServing
    from tests.support.fakes import FakeEngine

    served = FakeEngine(tokenizer, write=lambda prompt: "B looks right because it fits.")
    judge = FakeEngine(tokenizer, options=lambda text, k: [float(i) for i in range(k)], name="big")
    item = {"question": "Which is a colour?", "options": ["red", "dog", "car"], "answer_index": 0}
    body = {
        "items": [item, item],
        "conditions": ["full_reason"],
        "reasoning_tokens": 16,
        "predictability": True,
    }
    remote = await AuditServing(served, "small", judge).run(
        AuditRequest.model_validate({**body, "trace_judge": "remote"})
    )
    own = await AuditServing(served, "small", judge).run(AuditRequest.model_validate(body))
    assert (remote.trace_judge, own.trace_judge) == ("big", "small")
    for res, letter in ((remote, "C"), (own, "A")):
        for it in res.items:
            cond = it.conditions["full_reason"]
            assert cond.answer_letter == "A"  # the served model answered
            assert cond.prediction is not None
            assert cond.prediction.predicted_letter == letter
    assert len(judge.requests) == 2  # one trace read per item, by the judge only
    n = len(served.requests)
    with pytest.raises(InvalidRequest, match="VERIFIER_AUDIT__REMOTE_JUDGE"):
        await AuditServing(served, "small").run(
            AuditRequest.model_validate({**body, "trace_judge": "remote"})
        )
    assert len(served.requests) == n  # refused before any read
    with pytest.raises(ValidationError, match="applies with predictability"):
        AuditRequest.model_validate({**body, "predictability": False, "trace_judge": "remote"})


# --- the inferred-question match ---------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (" Which gas do plants take in?\nBecause...", "Which gas do plants take in?"),
        ('"What is the boiling point of water?"', "What is the boiling point of water?"),
        ("NONE", None),
        ("None.", None),
        ("  ", None),
        ("Unknown: the trace never says", None),
    ],
)
def test_the_inferred_question_is_the_first_line_or_none(
    written: str, expected: str | None
) -> None:
    from service.scoring.inferred import parse_inferred

    assert parse_inferred(written) == expected


def test_inferred_summary_splits_the_match_rate_by_correctness() -> None:
    from service.scoring import inferred

    def item(correct: bool, question: str | None, p: float | None) -> ItemRun:
        run = ConditionRun(index=0 if correct else 1, probs=[0.5, 0.5], rationale="r")
        run.inferred = audit.Inferred(question=question, match_prob=p)
        return ItemRun(k=2, answer_index=0, runs={"choices_only_reason": run})

    items = [
        item(True, "q", 0.9),
        item(True, "q", 0.2),
        item(True, None, None),
        item(False, "q", 0.1),
        item(False, "q", 0.6),
        item(False, "q", 0.3),
    ]
    out = inferred.summarize(items)
    assert out is not None
    assert (out["n"], out["n_inferred"]) == (6, 5)
    assert (out["correct"]["n"], out["correct"]["match_rate"]) == (2, 0.5)
    assert out["incorrect"]["n"] == 3
    assert out["incorrect"]["match_rate"] == pytest.approx(1 / 3)
    assert out["correct"]["ci_low"] < 0.5 < out["correct"]["ci_high"]
    assert inferred.summarize([ItemRun(k=2, answer_index=0)]) is None


async def test_the_judge_writes_each_choices_only_trace_question_and_reads_its_match(
    tokenizer: Any,
) -> None:
    from service.serving.audit import AuditServing
    from tests.support.fakes import FakeEngine, by_last_marker

    def write(prompt: str) -> str:
        if "write that question" in prompt:  # the judge: a question from one trace, none else
            return " Which of these is a colour?" if "colours" in prompt else " NONE"
        return "These look like colours; red is one.\nANSWER: A" if "red" in prompt else "Hmm."

    engine = FakeEngine(
        tokenizer,
        write=write,
        verdicts=by_last_marker({"Question 2: Which of these is a colour?": 3.0}, default=-3.0),
    )
    items = [
        {"question": "Which is a colour?", "options": ["red", "dog", "car"], "answer_index": 0},
        {"question": "What barks?", "options": ["cat", "dog", "cow"], "answer_index": 1},
    ]
    req = AuditRequest.model_validate(
        {
            "items": items,
            "conditions": ["choices_only_reason"],
            "reasoning_tokens": 16,
            "inferred_question": True,
        }
    )
    res = await AuditServing(engine, "small").run(req)
    first, second = (it.conditions["choices_only_reason"].inferred_question for it in res.items)
    assert first is not None
    assert second is not None
    assert first.question == "Which of these is a colour?"
    assert first.match_probability == pytest.approx(1 / (1 + np.exp(-3.0)))
    assert first.matches is True
    assert (second.question, second.match_probability, second.matches) == (None, None, None)
    summary = res.summary.inferred_question
    assert summary is not None
    assert (summary.n, summary.n_inferred) == (2, 1)
    assert res.trace_judge == "small"
    assert res.tokens_by_condition["inferred_question"] > 0
    with pytest.raises(ValidationError, match="needs the choices_only_reason condition"):
        AuditRequest.model_validate(
            {"items": items, "conditions": ["full_reason"], "inferred_question": True}
        )
