"""The job handler (``Services`` + ``JobRunner``) over the scripted engine of tests/fakes.py:
dispatch by kind, error paths, tenant scoping of the judgment cache and of MCQ calibrations,
MCQ answers and debiasing, and the budget estimate against what the serving layer spends."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from pydantic import ValidationError

from service.errors import EngineFailure, EngineUnavailable
from service.kinds import JOB_KINDS, JobKind
from service.protocol import OutcomeRequest, ProcessRequest, Usage
from service.protocol.jobs import JOBS
from service.protocol.mcq import MCQAnswerRequest
from service.queue.base import Job, JobResult, new_job_id
from service.sandbox.runner import Sandbox
from service.scoring import prompts
from service.serving import budget
from service.serving.cache import MemoryStore
from service.serving.handler import JobRunner
from service.serving.services import Services
from tests.support.fakes import FakeEngine, by_last_marker, descending_letters, sigmoid

Q = "What is 3 * (2 + 4)?"
RESPONSE = "2 + 4 = 6, and 3 * 6 = 18."
OPTIONS = ["a hammer", "an apple", "a brick"]
# The fake's letter reads: A -1, B -2, C -3 (tests/fakes.descending_letters).
Z = math.exp(-1) + math.exp(-2) + math.exp(-3)
RAW = [math.exp(-1) / Z, math.exp(-2) / Z, math.exp(-3) / Z]


def job(kind: str, payload: dict[str, Any], tenant: str = "default") -> Job:
    return Job.model_validate(
        {
            "id": new_job_id(),
            "kind": kind,
            "payload": payload,
            "deadline": time.time() + 30,
            "tenant": tenant,
        }
    )


def runner(engine: FakeEngine, **kw: Any) -> JobRunner:
    return JobRunner(Services.build(engine, "fake-model", **kw))


def body(outcome: JobResult) -> dict[str, Any]:
    assert outcome.ok, outcome
    assert outcome.body is not None
    return outcome.body


# --- dispatch and errors -------------------------------------------------------------------


async def test_an_outcome_job_returns_the_response_json(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({RESPONSE: 1.5}))
    out = await runner(engine)(job("outcome", {"question": Q, "response": RESPONSE}))
    b = body(out)
    assert (out.status, b["logit"], b["verdict"], b["model"]) == (200, 1.5, 1, "fake-model")
    assert b["score"] == pytest.approx(sigmoid(1.5))
    n = len(prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, Q, RESPONSE, False)))
    assert b["usage"] == {
        "prompt_tokens": n,
        "generated_tokens": 1,
        "cached_tokens": 0,
        "total_tokens": n + 1,
        "engine_calls": 1,
        "cached_judgments": 0,
    }


def test_an_unknown_kind_never_reaches_the_handler() -> None:
    # Kinds are one closed set: a job of another kind is refused when it is built or parsed
    # (a stream entry of a newer API is answered 422 by the queue, test_queue_redis.py).
    with pytest.raises(ValidationError, match="kind"):
        job("telepathy", {})


async def test_an_invalid_payload_is_a_422_naming_the_model(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    out = await runner(engine)(job("outcome", {"question": Q}))
    assert (out.ok, out.status, out.error_type) == (False, 422, "invalid_request")
    assert out.error_message is not None
    assert out.error_message.startswith(
        "invalid job payload: 1 validation error for OutcomeRequest"
    )
    assert "response" in out.error_message
    assert engine.requests == []


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        (EngineFailure("engine returned no logprobs"), 502, "engine_error"),
        (EngineUnavailable("engine is restarting"), 503, "engine_unavailable"),
    ],
)
async def test_an_engine_error_becomes_the_jobs_typed_error(
    tokenizer: Any, error: Exception, status: int, error_type: str
) -> None:
    engine = FakeEngine(tokenizer, fail=error)
    for kind, payload in [
        ("outcome", {"question": Q, "response": RESPONSE}),
        ("process", {"question": Q, "steps": ["a", "b"], "mode": "single_pass"}),
        ("mcq_answer", {"question": Q, "options": OPTIONS}),
    ]:
        out = await runner(engine)(job(kind, payload))
        assert out == JobResult.failure(status, error_type, str(error)), kind


async def test_a_bug_in_the_engine_is_not_turned_into_a_client_error(tokenizer: Any) -> None:
    # Only ServiceErrors are answered as typed errors; anything else reaches the worker,
    # which answers 500 and logs it (tests/unit/test_worker.py).
    engine = FakeEngine(tokenizer, fail=ZeroDivisionError("bug"))
    with pytest.raises(ZeroDivisionError, match="bug"):
        await runner(engine)(job("outcome", {"question": Q, "response": RESPONSE}))


# --- tenant scoping --------------------------------------------------------------------------


async def test_the_judgment_cache_answers_repeats_per_tenant(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({RESPONSE: 0.75}))
    run = runner(engine, judgments=MemoryStore(max_entries=100, ttl_s=60))
    payload = {"question": Q, "response": RESPONSE}
    first = body(await run(job("outcome", payload, tenant="alpha")))
    again = body(await run(job("outcome", payload, tenant="alpha")))
    assert len(engine.requests) == 1  # the repeat never reached the engine
    assert again["logit"] == first["logit"] == 0.75
    assert again["usage"] == {
        "prompt_tokens": 0,
        "generated_tokens": 0,
        "cached_tokens": 0,
        "total_tokens": 0,
        "engine_calls": 0,
        "cached_judgments": 1,
    }
    other = body(await run(job("outcome", payload, tenant="beta")))
    assert len(engine.requests) == 2  # another tenant never hits alpha's entry
    assert other["usage"]["cached_judgments"] == 0
    fresh = body(await run(job("outcome", {**payload, "cache": False}, tenant="alpha")))
    assert (len(engine.requests), fresh["usage"]["engine_calls"]) == (3, 1)


async def test_a_calibration_is_fitted_used_and_kept_per_tenant(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    run = runner(engine)
    fit = {"method": "pride", "items": [{"question": Q, "options": OPTIONS}]}
    cal = body(await run(job("mcq_calibrate", fit, tenant="alpha")))
    # PriDe reads the K = 3 cyclic permutations; the fake's letter reads ignore the content,
    # so the prior is the raw letter distribution itself.
    assert (cal["method"], cal["k"], cal["cost"]["forward_passes"]) == ("pride", 3, 3)
    assert cal["params"]["prior"] == pytest.approx(RAW)
    answer = {"question": Q, "options": OPTIONS, "debias": "pride", "calibration_id": cal["id"]}
    debiased = body(await run(job("mcq_answer", answer, tenant="alpha")))
    assert debiased["probs_raw"] == pytest.approx(RAW)
    assert debiased["probs"] == pytest.approx([1 / 3] * 3)  # the prior divided out
    refused = await run(job("mcq_answer", answer, tenant="beta"))
    assert (refused.status, refused.error_type) == (422, "unknown_calibration")
    assert refused.error_message == (
        f"no calibration {cal['id']!r} for this tenant; list yours with GET /v1/mcq/calibrations"
    )


# --- MCQ ---------------------------------------------------------------------------------


async def test_mcq_answer_is_the_softmax_over_the_letters(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    services = Services.build(engine, "fake-model")
    out = await services.mcq.answer(MCQAnswerRequest(question=Q, options=OPTIONS))
    rendered = prompts.mcq_prompt(tokenizer, Q, OPTIONS)
    assert engine.requests == [("options", rendered.prompt_ids)]
    assert out.probs_raw == pytest.approx(RAW)
    assert out.probs == pytest.approx(RAW)
    assert (out.answer_index, out.answer_letter) == (0, "A")
    assert out.usage.engine_calls == 1


async def test_popdebias_subtracts_lambda_times_popularity(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    services = Services.build(engine, "fake-model")
    req = MCQAnswerRequest(
        question=Q,
        options=OPTIONS,
        popularity=[1.0, 0.0, 0.0],
        debias="popdebias",
        popdebias_lambda=2.0,
    )
    out = await services.mcq.answer(req)
    # log p - 2 * pop = [-1 - 2, -2, -3] (up to the shared log Z): B wins.
    z = math.exp(-3) + math.exp(-2) + math.exp(-3)
    assert out.probs == pytest.approx([math.exp(-3) / z, math.exp(-2) / z, math.exp(-3) / z])
    assert (out.answer_index, out.answer_letter) == (1, "B")
    assert out.debias.params == {"lambda": 2.0, "phi": "pop"}


async def test_model_popularity_is_the_min_max_of_the_option_span_reads(tokenizer: Any) -> None:
    spans = by_last_marker({"a hammer": -1.0, "an apple": -3.0, "a brick": -2.0})
    engine = FakeEngine(tokenizer, spans=spans)
    services = Services.build(engine, "fake-model")
    req = MCQAnswerRequest(
        question=Q, options=OPTIONS, popularity="model", debias="popdebias", popdebias_lambda=0.0
    )
    out = await services.mcq.answer(req)
    assert out.popularity == pytest.approx([1.0, 0.0, 0.5])
    assert out.probs == pytest.approx(RAW)  # lambda 0 leaves the answer alone
    assert sorted(engine.kinds()) == ["options", "span", "span", "span"]
    assert out.usage.engine_calls == 4


# --- budget estimate vs. what the serving layer spends ---------------------------------------


@pytest.mark.parametrize(
    ("kind", "request_"),
    [
        ("outcome", OutcomeRequest(question=Q, response=RESPONSE)),
        (
            "outcome",
            OutcomeRequest(
                question=Q, response=RESPONSE, mode="reasoning", reasoning_tokens=40, samples=2
            ),
        ),
        ("process", ProcessRequest(question=Q, steps=["2 + 4 = 6.", "3 * 6 = 18.", "18"])),
        (
            "process",
            ProcessRequest(question=Q, steps=["2 + 4 = 6.", "3 * 6 = 18."], mode="single_pass"),
        ),
    ],
)
async def test_the_budget_estimate_covers_the_planned_calls(
    tokenizer: Any, kind: str, request_: Any
) -> None:
    # The fake writes past every rationale budget: the most a request can generate.
    engine = FakeEngine(tokenizer, write=lambda prompt: "so " * 200)
    services = Services.build(engine, "fake-model")
    serve = services.outcome.judge if kind == "outcome" else services.process.judge
    spent = (await serve(request_)).usage
    est = budget.estimate(kind, request_)
    assert est.calls == spent.engine_calls
    assert est.generated == spent.generated_tokens
    assert spent.prompt_tokens <= est.prompt < 2 * spent.prompt_tokens


SEP = "\n###\n"
ITEM = {"question": Q, "options": OPTIONS}
ITEM_CHOICES = [{"value": o} for o in OPTIONS]
LEVELS = [{"label": "poor"}, {"label": "fair"}, {"label": "good"}]


def _pool(i: int) -> dict[str, Any]:
    return {
        "id": f"q{i}",
        "question": f"Question {i}: which city is the capital?",
        "answer": {"text": f"City {i}"},
        "candidates": [{"text": f"Town {i}-{j}"} for j in range(5)],
    }


# Payloads of every job kind, cheap and expensive options of each (the registry's kinds).
# A reference solution and a rubric: what a reference adds to every prompt is estimated too.
REFERENCE = {
    "reference": "Natalia sold 48 / 2 = 24 clips in May.\nIn all she sold 48 + 24 = 72.\n#### 72",
    "criteria": "The final number must equal the reference's; units do not matter.",
}

SPEND_CASES: dict[str, list[dict[str, Any]]] = {
    "outcome": [
        {"question": Q, "response": RESPONSE},
        {"question": Q, "response": "print(2 * 2)", "tests": [{"input": "", "output": "4"}]},
        {
            "question": Q,
            "response": RESPONSE,
            **REFERENCE,
            "verifier": "model",
            "mode": "reasoning",
            "reasoning_tokens": 40,
        },
        {
            "question": Q,
            "response": RESPONSE,
            "mode": "reasoning",
            "reasoning_tokens": 40,
            "samples": 2,
        },
    ],
    "process": [
        {"question": Q, "steps": ["2 + 4 = 6.", "3 * 6 = 18.", "18"]},
        {"question": Q, "response": RESPONSE, "mode": "single_pass"},
        {"question": Q, "steps": ["2 + 4 = 6.", "3 * 6 = 18.", "18"], **REFERENCE},
        {"question": Q, "response": RESPONSE, "mode": "single_pass", **REFERENCE},
    ],
    "split": [{"response": RESPONSE}, {"response": RESPONSE, "method": "model"}],
    "classify": [
        {"input": RESPONSE},
        {"input": [RESPONSE, "18"], "use_activation": False},
        {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": RESPONSE}]},
        {"input": [1, 2, 3]},
    ],
    "pooling": [{"input": [RESPONSE, Q]}, {"input": [[1, 2], [3, 4, 5]]}],
    "score": [
        {"question": Q, "responses": [RESPONSE, "18"]},
        {
            "question": Q,
            "responses": [RESPONSE, "18"],
            "method": "outcome",
            "mode": "reasoning",
            "reasoning_tokens": 30,
        },
    ],
    "rerank": [
        {"query": Q, "documents": [RESPONSE, "18"]},
        {"query": Q, "documents": [RESPONSE, "18"], **REFERENCE, "verifier": "model"},
        # the tests decide, the model reads each document to break their ties
        {
            "query": Q,
            "documents": ["print(4)", "print(5)"],
            "tests": ["assert True"],
            "method": "outcome",
        },
    ],
    "mcq_answer": [
        ITEM,
        {**ITEM, "popularity": "model", "debias": "popdebias", "popdebias_lambda": 0.5},
    ],
    "mcq_batch": [{"items": [ITEM, ITEM]}],
    "mcq_calibrate": [
        {"method": "pride", "items": [ITEM]},
        {"method": "contextual", "items": [ITEM]},
    ],
    "calibrate": [
        {
            "target": "outcome",
            "examples": [
                {"question": Q, "response": RESPONSE, "label": i % 2, **REFERENCE}
                for i in range(10)
            ],
        },
        {
            "target": "outcome",
            "examples": [{"question": Q, "response": RESPONSE, "label": i % 2} for i in range(10)],
            "mode": "reasoning",
            "reasoning_tokens": 30,
        },
        {
            "target": "decisions",
            "examples": [
                {
                    "input": RESPONSE,
                    "questions": [
                        {"type": "predicate", "instructions": "The answer is right."},
                        {"type": "choice", "instructions": "Which?", "choices": ITEM_CHOICES},
                    ],
                    "answers": [i % 2 == 0, ITEM_CHOICES[i % 2]["value"]],
                }
                for i in range(16)
            ],
            "folds": 2,
        },
    ],
    "mcq_audit": [
        {"items": [{**ITEM, "answer_index": 1}]},
        {"items": [{**ITEM, "answer_index": 1}], "reasoning_tokens": 30},
        {"items": [{**ITEM, "answer_index": 1}], "reasoning_tokens": 30, "predictability": True},
        {"items": [{**ITEM, "answer_index": 1}], "reasoning_tokens": 30, "inferred_question": True},
    ],
    "mcq_popmcq": [
        {"items": [_pool(i) for i in range(6)], "paper_filter": False},
        {"items": [_pool(i) for i in range(6)], "paper_filter": False, "open_recall": True},
    ],
    "reward": [
        {"query": [Q + SEP + RESPONSE, Q + SEP + "18"], "separator": SEP},
        {
            "query": [Q + SEP + RESPONSE, Q + SEP + "18"],
            "separator": SEP,
            "labels": [REFERENCE["reference"], "72"],
            "criteria": REFERENCE["criteria"],
            "verifier": "model",
        },
        {
            "query": [Q + SEP + RESPONSE, Q + SEP + "ANSWER: B", Q + SEP + RESPONSE],
            "separator": SEP,
            "labels": [
                "18",
                {"type": "choice", "answer": "B"},
                {
                    "components": {
                        "judged": {"type": "model"},
                        "rubric": {"type": "rubric", "criteria": [{"text": "Shows the work."}]},
                    }
                },
            ],
        },
    ],
    "rewards": [
        {
            "items": [
                {"prompt": Q, "response": RESPONSE, "verifier": {"type": "model"}},
                {
                    "prompt": Q,
                    "response": RESPONSE,
                    "verifier": {"type": "math", "reference": "72"},
                },
                {
                    "prompt": Q,
                    "response": "ANSWER: B",
                    "verifier": {"type": "choice", "answer": "B"},
                },
                {
                    "prompt": Q,
                    "response": RESPONSE,
                    "components": {
                        "right": {"type": "string", "operation": "contains", "reference": "18"},
                        "judged": {"type": "model", "criteria": REFERENCE["criteria"]},
                        "rubric": {
                            "type": "rubric",
                            "criteria": [
                                {"text": "Shows the computation."},
                                {"text": "Contradicts itself.", "weight": -2},
                            ],
                            "reference": "18",
                        },
                    },
                    "formula": "0.5 * right + 0.25 * judged + 0.25 * rubric",
                },
                {
                    "prompt": Q,
                    "response": "print(int(input()) * 2)",
                    "verifier": {"type": "code", "tests": [{"input": "2", "output": "4"}]},
                },
            ]
        },
        {
            "items": [
                {
                    "prompt": Q,
                    "response": RESPONSE,
                    "verifier": {
                        "type": "rubric",
                        "criteria": [{"text": "Shows the computation."}],
                        "mode": "reasoning",
                        "reasoning_tokens": 30,
                    },
                },
                {"prompt": Q, "response": RESPONSE, "verifier": {"type": "model"}},
            ],
            "mode": "reasoning",
            "reasoning_tokens": 30,
        },
    ],
    "run_code": [{"code": "print(input())", "language": "python", "stdin": "x"}],
    "decision": [
        {
            "model": "m",
            "input": [
                {"role": "user", "content": Q},
                {"role": "assistant", "content": RESPONSE},
            ],
            "questions": [
                {"type": "predicate", "instructions": "The answer is right."},
                {"type": "choice", "instructions": "Which?", "choices": ITEM_CHOICES},
                {"type": "score", "instructions": "How clear?", "levels": LEVELS},
            ],
        },
        {
            "model": "m",
            "input": RESPONSE,
            "questions": [{"type": "choice", "instructions": "Which?", "choices": ITEM_CHOICES}],
            "permutations": 4,
            "debias": "contextual",
        },
        {
            "model": "m",
            "input": RESPONSE,
            "questions": [
                {"type": "predicate", "instructions": "The answer is right."},
                {"type": "choice", "instructions": "Which?", "choices": ITEM_CHOICES},
            ],
            "permutations": 2,
            "mode": "reasoning",
            "reasoning_tokens": 30,
            "samples": 2,
        },
    ],
    "compare": [
        {"question": Q, "responses": [RESPONSE, "18", "The answer is 72."]},
        {
            "question": Q,
            "responses": [RESPONSE, "18", "72", "I do not know."],
            "mode": "listwise",
            **REFERENCE,
        },
        {
            "question": Q,
            "responses": [RESPONSE, "18"],
            "criteria": REFERENCE["criteria"],
            "reasoning_tokens": 30,
            "samples": 2,
        },
    ],
}


def test_every_job_kind_has_a_spend_case() -> None:
    assert sorted(SPEND_CASES) == sorted(JOB_KINDS)


@pytest.mark.parametrize(
    ("kind", "payload"),
    [(kind, payload) for kind in JOB_KINDS for payload in SPEND_CASES.get(kind, [])],
)
async def test_the_budget_estimate_covers_what_every_kind_spends(
    tokenizer: Any, code_sandbox: Sandbox, kind: JobKind, payload: dict[str, Any]
) -> None:
    """Run as the worker runs it: the estimate the API reserves is not below the spend."""
    # The fake writes past every rationale budget: the most a request can generate. Pooling
    # kinds run on a pooling model (prompt tokens only).
    pooling = kind in ("classify", "pooling")
    engine = FakeEngine(
        tokenizer, write=lambda prompt: "so " * 200, kind="reward" if pooling else "generative"
    )
    spent = Usage.model_validate(
        body(await runner(engine, sandbox=code_sandbox)(job(kind, payload)))["usage"]
    )
    est = budget.estimate(kind, JOBS[kind].request.model_validate(payload))
    # The total is what the API reserves against the quota. Not its parts: the model split's
    # copy budget follows the real token count of the response, and the per-text estimate
    # (upper-ish, not a bound) is one token under it for RESPONSE.
    assert spent.total_tokens <= est.total, (spent, est)
    assert spent.engine_calls <= est.calls, (spent, est)


# --- /get_reward -------------------------------------------------------------------------


async def test_reward_judges_each_query_and_scores_an_empty_response_zero(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({RESPONSE: 1.5}))
    sep = "\n###\n"
    payload = {"query": [Q + sep + RESPONSE, Q + sep], "separator": sep}
    b = body(await runner(engine)(job("reward", payload)))
    assert b["rewards"] == b["scores"] == pytest.approx([sigmoid(1.5), 0.0])
    assert b["extra_logs"] == {
        "decided_by_rule": [0.0, 0.0],
        "decided_by_model": [1.0, 0.0],
        "rule_equivalent": [0.0, 0.0],
        "model_score": [pytest.approx(sigmoid(1.5)), 0.0],
        "verifier_logit": [1.5, -1e4],  # a certain 0: -inf clamped for JSON
    }
    [(_, ids)] = engine.requests  # the empty response costs no engine call
    assert ids == prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, Q, RESPONSE, False))
    assert b["usage"]["engine_calls"] == 1


async def test_reward_without_a_response_boundary_is_a_422_naming_the_query(
    tokenizer: Any,
) -> None:
    engine = FakeEngine(tokenizer)
    out = await runner(engine)(job("reward", {"query": ["no boundary in here"]}))
    assert (out.status, out.error_type) == (422, "invalid_request")
    assert out.error_message is not None
    assert out.error_message.startswith("query[0]: cannot tell where the response starts")
    assert engine.requests == []


# --- MCQ audit -------------------------------------------------------------------------------


def knows_fruit(text: str, k: int) -> list[float]:
    """Letter reads that find the apple (B) only when the question is shown."""
    return [-3.0, -1.0, -2.0] if "fruit" in text else descending_letters(text, k)


async def test_choices_only_reads_never_see_the_question(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, options=knows_fruit)
    item = {"question": "Which of these is a fruit?", "options": OPTIONS, "answer_index": 1}
    payload = {"items": [item], "conditions": ["full_base", "choices_only_base"]}
    b = body(await runner(engine)(job("mcq_audit", payload)))
    texts = [engine.decode(ids) for _, ids in engine.requests]
    assert engine.kinds() == ["options", "options"]
    assert sum("fruit" in t for t in texts) == 1
    assert all(all(o in t for o in OPTIONS) for t in texts)
    full, blind = (b["items"][0]["conditions"][c] for c in ("full_base", "choices_only_base"))
    z = math.exp(-3) + math.exp(-1) + math.exp(-2)
    assert full["probs"] == pytest.approx([math.exp(-3) / z, math.exp(-1) / z, math.exp(-2) / z])
    assert (full["answer_letter"], full["correct"]) == ("B", True)
    assert blind["probs"] == pytest.approx(RAW)
    assert (blind["answer_letter"], blind["correct"]) == ("A", False)
    summary = b["summary"]["conditions"]
    assert (summary["full_base"]["accuracy"], summary["choices_only_base"]["accuracy"]) == (1, 0)
    assert summary["full_base"]["chance"] == pytest.approx(1 / 3)
    assert b["usage"]["engine_calls"] == 2
