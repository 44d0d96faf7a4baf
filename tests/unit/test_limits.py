"""Request limits: declared once on each request model, enforced once before queueing.

For every job kind, every bounded field is pushed to its limit (admitted) and just over it
(refused with the status, error type and a message naming the field and the setting)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.api.limits import checked, enforce
from service.api.schema import strip_limits
from service.app import create_app
from service.config import LimitSettings, Settings
from service.errors import ServiceError
from service.kinds import JOB_KINDS, JobKind
from service.protocol.calibrate import ProbabilityCalibrationRequest
from service.protocol.jobs import JOBS
from service.protocol.limits import LimitKind
from tests.support.apps import app_with_worker
from tests.support.fakes import FakeEngine

Q = "What is 3 * (2 + 4)?"
A = "2 + 4 = 6, and 3 * 6 = 18."
REF = {"reference": "18", "criteria": "The final answer is 18."}
MCQ = {"question": Q, "options": ["18", "12"]}
POOL = {
    "question": Q,
    "answer": {"text": "18"},
    "aliases": ["eighteen"],
    "candidates": [{"text": "12"}],
}

# A minimal valid request per job kind, with every optional bounded field present.
REQUESTS: dict[JobKind, dict[str, Any]] = {
    "outcome": {"question": Q, "response": A, "mode": "reasoning", "samples": 1, **REF},
    # (its steps are bounded by max_steps, which the model checks them against)
    "process": {"question": Q, "steps": [A, "18"], "mode": "reasoning", **REF},
    "split": {"response": A, "max_steps": 4},
    "score": {"question": Q, "responses": [A, "18"], "mode": "reasoning", **REF},
    "rerank": {"query": Q, "documents": [A, {"text": "18"}], "mode": "reasoning", **REF},
    "mcq_answer": dict(MCQ),
    "mcq_batch": {"items": [MCQ]},
    "mcq_calibrate": {"method": "pride", "items": [MCQ]},
    "calibrate": {
        "target": "outcome",
        # 5 folds need 5 of each label, and each fold's training split 8 examples
        "examples": [{"question": Q, "response": A, "label": i % 2, **REF} for i in range(10)],
        "mode": "reasoning",
        "reasoning_tokens": 64,
    },
    "mcq_audit": {"items": [{**MCQ, "answer_index": 0}], "reasoning_tokens": 64},
    "mcq_popmcq": {
        "items": [
            POOL,
            {"question": "2 + 2?", "answer": {"text": "4"}, "candidates": [{"text": "5"}]},
        ]
    },
    "reward": {
        "query": [f"{Q} {A}"],
        "labels": ["18"],
        "criteria": REF["criteria"],
        "mode": "reasoning",
        "reasoning_tokens": 64,
    },
    "classify": {"input": [A, "18"]},
    "pooling": {"messages": [{"role": "user", "content": A}]},
    "decision": {
        "input": A,
        "model": "m",
        "questions": [{"type": "predicate", "instructions": "Is the answer 18?"}],
        "mode": "reasoning",
        "reasoning_tokens": 64,
        "samples": 1,
    },
    "compare": {"question": Q, "responses": [A, "18"], "reasoning_tokens": 64, **REF},
    "rewards": {
        "items": [
            {
                "prompt": Q,
                "response": A,
                "components": {
                    "m": {
                        "type": "math",
                        "reference": "18",
                        "mode": "reasoning",
                        "reasoning_tokens": 64,
                        "samples": 1,
                    },
                    # (options would have to match a grown answer: tests/unit/test_rewards.py)
                    "c": {"type": "choice", "answer": "eighteen"},
                    "k": {
                        "type": "code",
                        "tests": [{"input": "2", "output": "4"}, {"assert": "1"}],
                    },
                    "r": {
                        "type": "rubric",
                        "criteria": [{"text": "Shows the computation."}],
                        "reference": "18",
                        "mode": "reasoning",
                    },
                },
            }
        ],
        "mode": "reasoning",
        "reasoning_tokens": 64,
    },
    "run_code": {"code": "print(input())", "language": "python", "stdin": "hello"},
}

# What each kind bounds: a field lost from a model shows up here.
KINDS: dict[JobKind, set[LimitKind]] = {
    "outcome": {"text", "reference", "samples", "reasoning_tokens"},
    "process": {"text", "reference", "samples", "reasoning_tokens", "steps"},
    "split": {"text", "steps"},
    "score": {"text", "reference", "samples", "reasoning_tokens", "steps", "documents"},
    "rerank": {"text", "reference", "samples", "reasoning_tokens", "steps", "documents"},
    "mcq_answer": {"text"},
    "mcq_batch": {"text", "documents"},
    "mcq_calibrate": {"text", "documents"},
    "calibrate": {"text", "reference", "documents", "reasoning_tokens"},
    "mcq_audit": {"text", "documents", "reasoning_tokens"},
    "mcq_popmcq": {"text", "documents"},
    "reward": {"text", "reference", "documents", "reasoning_tokens"},
    "classify": {"text", "documents"},
    "pooling": {"text"},  # a chat is one input
    "decision": {"text", "samples", "reasoning_tokens"},
    "compare": {"text", "reference", "documents", "samples", "reasoning_tokens"},
    "rewards": {"text", "reference", "documents", "samples", "reasoning_tokens"},
    "run_code": {"text"},
}

# Small limits, so that over each one is cheap; the defaults of every request are within them.
LIMITS = LimitSettings(
    max_text_chars=80, max_documents=12, max_steps=70, max_samples=3, max_reasoning_tokens=300
)
EXPECTED: dict[LimitKind, tuple[int, str, str]] = {
    "text": (413, "payload_too_large", "VERIFIER_LIMITS__MAX_TEXT_CHARS"),
    "reference": (422, "invalid_request", "VERIFIER_LIMITS__MAX_TEXT_CHARS"),
    "documents": (422, "invalid_request", "VERIFIER_LIMITS__MAX_DOCUMENTS"),
    "steps": (422, "invalid_request", "VERIFIER_LIMITS__MAX_STEPS"),
    "samples": (422, "invalid_request", "VERIFIER_LIMITS__MAX_SAMPLES"),
    "reasoning_tokens": (422, "invalid_request", "VERIFIER_LIMITS__MAX_REASONING_TOKENS"),
}
LIMIT_OF: dict[LimitKind, int] = {
    "text": LIMITS.max_text_chars,
    "reference": LIMITS.max_text_chars,
    "documents": LIMITS.max_documents,
    "steps": LIMITS.max_steps,
    "samples": LIMITS.max_samples,
    "reasoning_tokens": LIMITS.max_reasoning_tokens,
}


def _steps(path: str) -> list[str | int]:
    return [int(i) if i else name for name, i in re.findall(r"(\w+)|\[(\d+)\]", path)]


def _resized(body: dict[str, Any], path: str, size: int, count: bool) -> dict[str, Any]:
    """``body`` with the value at ``path`` made ``size`` long (a text, a list) or large."""
    out = json.loads(json.dumps(body))
    *parents, last = _steps(path)
    holder: Any = out
    for step in parents:
        holder = holder[step]
    value = holder.get(last) if isinstance(holder, dict) else holder[last]
    if count:
        grown = [*value, *([value[-1]] * (size - len(value)))][:size]
        # lists that run in parallel with it (a reward's labels) grow with it
        for key, other in holder.items():
            if isinstance(other, list) and len(other) == len(value) and key != last:
                holder[key] = [*other, *([other[-1]] * (size - len(other)))][:size]
        holder[last] = grown
    elif isinstance(value, str):
        holder[last] = (value + "x" * size)[:size]
    else:
        holder[last] = size
    return out


def _cases() -> list[tuple[JobKind, str, LimitKind, bool]]:
    cases = []
    for kind in JOB_KINDS:
        req = JOBS[kind].request.model_validate(REQUESTS[kind])
        for item in checked(req):
            cases.append((kind, item.path, item.kind, item.count))
    return cases


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_each_kind_bounds_what_it_declares_and_its_minimal_request_is_admitted(
    kind: JobKind,
) -> None:
    req = JOBS[kind].request.model_validate(REQUESTS[kind])
    assert {b.kind for b in checked(req)} == KINDS[kind]
    enforce(req, LIMITS)


@pytest.mark.parametrize(("kind", "path", "limit", "count"), _cases())
def test_each_limit_admits_its_value_and_refuses_one_over(
    kind: JobKind, path: str, limit: LimitKind, count: bool
) -> None:
    model = JOBS[kind].request
    at = LIMIT_OF[limit]
    enforce(model.model_validate(_resized(REQUESTS[kind], path, at, count)), LIMITS)
    over = model.model_validate(_resized(REQUESTS[kind], path, at + 1, count))
    with pytest.raises(ServiceError) as caught:
        enforce(over, LIMITS)
    status, error_type, setting = EXPECTED[limit]
    assert (caught.value.status, caught.value.type) == (status, error_type)
    assert path in str(caught.value)
    assert setting in str(caught.value)


@pytest.fixture
async def http(tokenizer: Any) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI
    async with app_with_worker(FakeEngine(tokenizer)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            yield client


async def test_get_reward_in_reasoning_mode_refuses_reasoning_tokens_over_the_limit(
    http: httpx.AsyncClient,
) -> None:
    over = LimitSettings().max_reasoning_tokens + 1
    body = {"query": [f"{Q} {A}"], "mode": "reasoning", "reasoning_tokens": over}
    r = await http.post("/get_reward", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request"
    assert "reasoning_tokens" in error["message"]
    assert "VERIFIER_LIMITS__MAX_REASONING_TOKENS" in error["message"]


async def test_a_text_over_the_limit_is_a_413_before_anything_is_queued(
    http: httpx.AsyncClient,
) -> None:
    long = "x" * (LimitSettings().max_text_chars + 1)
    r = await http.post("/v1/judge/outcome", json={"question": Q, "response": long})
    assert r.status_code == 413, r.text
    assert "X-Job-Id" not in r.headers
    assert "response has" in r.json()["error"]["message"]


def test_the_schema_states_each_limit_as_the_running_settings_make_it() -> None:
    settings = Settings(limits=LIMITS)
    schemas = create_app(settings).openapi()["components"]["schemas"]
    query = schemas["RewardRequest"]["properties"]["query"]
    assert (query["maxItems"], query["x-limit"]) == (12, "VERIFIER_LIMITS__MAX_DOCUMENTS")
    assert query["items"]["maxLength"] == 80
    assert query["items"]["x-limit"] == "VERIFIER_LIMITS__MAX_TEXT_CHARS"
    (tokens, _) = schemas["RewardRequest"]["properties"]["reasoning_tokens"]["anyOf"]
    assert (tokens["maximum"], tokens["x-limit"]) == (300, "VERIFIER_LIMITS__MAX_REASONING_TOKENS")
    samples = schemas["OutcomeRequest"]["properties"]["samples"]
    assert (samples["maximum"], samples["x-limit"]) == (3, "VERIFIER_LIMITS__MAX_SAMPLES")
    assert schemas["PoolOption"]["properties"]["text"]["maxLength"] == 80


def test_stripped_of_its_limits_the_schema_is_the_one_without_them() -> None:
    app = create_app(Settings(limits=LIMITS))
    plain = json.loads(json.dumps(FastAPI.openapi(create_app(Settings()))))
    assert strip_limits(json.loads(json.dumps(app.openapi()))) == plain


def test_a_decision_option_is_bounded_as_the_model_reads_it() -> None:
    choices = [{"value": "yes"}, {"value": "no", "description": "x" * LIMITS.max_text_chars}]
    body = {
        "input": A,
        "model": "m",
        "questions": [{"type": "choice", "instructions": "Right?", "choices": choices}],
    }
    with pytest.raises(ServiceError, match=r"questions\[0\]\.options\[1\] has 83 characters"):
        enforce(JOBS["decision"].request.model_validate(body), LIMITS)


def decisions_fit(predicates: int, text: str = "A ticket.") -> ProbabilityCalibrationRequest:
    """A decisions calibration of 8 examples with ``predicates`` labelled questions each."""
    question = {"type": "predicate", "instructions": "It is about billing."}
    examples = [
        {
            "input": text if n == 3 else "A ticket.",
            "questions": [{**question, "name": f"q{i}"} for i in range(predicates)],
            "answers": [(n + i) % 2 == 0 for i in range(predicates)],
        }
        for n in range(8)
    ]
    body = {"target": "decisions", "examples": examples, "folds": 2}
    return ProbabilityCalibrationRequest.model_validate(body)


def test_a_decisions_calibration_counts_its_questions_and_bounds_their_texts() -> None:
    limits = LimitSettings(max_text_chars=80, max_documents=40)
    enforce(decisions_fit(5), limits)  # 40 questions: one read each
    with pytest.raises(ServiceError, match=r"examples\[\*\]\.questions has 48 items") as caught:
        enforce(decisions_fit(6), limits)
    assert caught.value.status == 422
    enforce(decisions_fit(5, "x" * 80), limits)
    with pytest.raises(ServiceError, match=r"examples\[3\]\.input has 81 characters") as caught:
        enforce(decisions_fit(5, "x" * 81), limits)
    assert caught.value.status == 413


def test_a_budget_left_out_takes_a_smaller_limit_and_one_sent_over_it_is_refused() -> None:
    small = LimitSettings(max_reasoning_tokens=16)
    model = JOBS["outcome"].request
    left_out = model.model_validate({"question": Q, "response": A, "mode": "reasoning"})
    assert left_out.reasoning_tokens > 16  # type: ignore[attr-defined]  # the default
    enforce(left_out, small)
    assert left_out.reasoning_tokens == 16  # type: ignore[attr-defined]
    sent = model.model_validate({"question": Q, "response": A, "reasoning_tokens": 17})
    with pytest.raises(ServiceError) as caught:
        enforce(sent, small)
    assert "reasoning_tokens=17" in str(caught.value)
    under = model.model_validate({"question": Q, "response": A})
    enforce(under, LIMITS)  # a default under the limit is left as it is
    assert under.reasoning_tokens == model.model_fields["reasoning_tokens"].default  # type: ignore[attr-defined]


def test_the_schema_states_a_default_over_the_limit_as_the_limit() -> None:
    schemas = create_app(Settings(limits=LimitSettings(max_reasoning_tokens=16))).openapi()
    prop = schemas["components"]["schemas"]["OutcomeRequest"]["properties"]["reasoning_tokens"]
    assert (prop["default"], prop["maximum"]) == (16, 16)
