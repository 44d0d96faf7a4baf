"""/v1/rewards' pure parts: the formula evaluator (and what it refuses), string and choice
checks, rubric aggregation; then the request's 422s, and the job over the scripted engine:
each item by its own spec, components recomputed from the per-item results, deadlines."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from service.engine import base
from service.protocol.rewards import RewardsRequest
from service.queue.base import Job, new_job_id
from service.scoring.rewards import (
    Criterion,
    Formula,
    FormulaError,
    PatternTooSlow,
    choice_check,
    gold_letter,
    pattern_search,
    response_letter,
    rubric_reward,
    string_check,
    string_input,
)
from service.serving.handler import JobRunner
from service.serving.services import Services
from tests.support.apps import app_client
from tests.support.fakes import FakeEngine, by_last_marker, sigmoid

Q = "What is 3 * (2 + 4)?"
RIGHT = "2 + 4 = 6, and 3 * 6 = 18.\n#### 18"
WRONG = "2 + 4 = 6, and 3 + 6 = 9.\n#### 9"
CATASTROPHIC = r"(x+x+)+y"

# --- the formula ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.8 * a + 0.2 * b", 0.8 * 1.0 + 0.2 * 0.25),
        ("min(a, b, 0.5) - max(b, 0.1)", 0.25 - 0.25),
        ("clip(a + b, 0, 1)", 1.0),
        ("abs(b - a) ** 2", 0.5625),
        ("b ^ 2", 0.0625),  # ^ is a power, as in OpenAI's multi grader
        ("-a + +b", -0.75),
        ("sqrt(b) + exp(0) + log(a) + floor(2.7) + ceil(0.2)", 0.5 + 1 + 0 + 2 + 1),
        ("(a + b) / 2", 0.625),
    ],
)
def test_a_formula_evaluates_arithmetic_over_the_components(text: str, expected: float) -> None:
    formula = Formula.parse(text, {"a", "b"})
    assert formula.evaluate({"a": 1.0, "b": 0.25}) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a.__class__", "Attribute"),
        ("__import__('os').system('true')", "calls \"__import__('os').system\""),
        ("__import__('os')", "calls '__import__'"),
        ("a.real", "Attribute"),
        ("(lambda: 1)()", "calls"),
        ("a[0]", "Subscript"),
        ("'x' * 3", "constant 'x'"),
        ("a if b else 1", "IfExp"),
        ("a < b", "Compare"),
        ("[a for a in (1, 2)]", "ListComp"),
        ("min(a, key=b)", "keywords"),
        ("max(*a)", "keywords or *args"),
        ("clip(a, 0)", "takes 3"),
        ("c + a", "names 'c', which is not a component (components: a, b)"),
        ("open", "names 'open'"),
        ("a +", "cannot be parsed"),
        ("True + a", "constant True"),
        ("a " + "+ a " * 300, "characters, over 500"),
    ],
)
def test_a_formula_refuses_every_form_outside_its_allow_list(text: str, says: str) -> None:
    with pytest.raises(FormulaError) as caught:
        Formula.parse(text, {"a", "b"})
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "text", ["a / (b - b)", "log(b - b)", "sqrt(b - a)", "10.0 ** 400", "(b - a) ** 0.5"]
)
def test_a_formula_that_cannot_be_computed_raises_instead_of_answering(text: str) -> None:
    formula = Formula.parse(text, {"a", "b"})
    with pytest.raises((ArithmeticError, ValueError)):
        formula.evaluate({"a": 1.0, "b": 0.25})


# --- string and choice checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "text", "reference", "expected"),
    [
        ("eq", "Paris", "Paris", True),
        ("eq", "Paris", "paris", False),
        ("ne", "Paris", "paris", True),
        ("like", "It is Paris.", "Paris", True),
        ("contains", "It is Paris.", "paris", False),
        ("ilike", "It is PARIS.", "paris", True),
        ("regex", "Total: 18 apples", r"\b18\b", True),
        ("regex", "Total: 180 apples", r"\b18\b", False),
    ],
)
def test_string_checks_follow_openais_operations(
    operation: Any, text: str, reference: str, expected: bool
) -> None:
    assert string_check(operation, text, reference) is expected


def test_a_catastrophic_pattern_stops_at_its_time_bound() -> None:
    start = time.monotonic()
    with pytest.raises(PatternTooSlow, match="catastrophic"):
        pattern_search(CATASTROPHIC, "x" * 5000)
    assert time.monotonic() - start < 2.0


def test_a_string_check_reads_the_response_or_its_final_answer() -> None:
    assert string_input("  \\boxed{18} \n", "response") == "\\boxed{18}"
    assert string_input("so \\boxed{18}", "answer") == "18"
    assert string_input("no number", "answer") == ""


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        ("B is tempting.\nANSWER: c", "C"),
        ("(D)", "D"),
        ("I think the answer is (B).", "B"),
        ("ANSWER: A\nno wait\nANSWER: B", "B"),
        ("No letter here at all.", None),
    ],
)
def test_the_letter_a_response_ends_on(response: str, letter: str | None) -> None:
    assert response_letter(response) == letter


def test_a_gold_answer_is_a_letter_or_an_options_text() -> None:
    options = ["a hammer", "an apple", "a brick"]
    assert gold_letter("b", options) == "B"
    assert gold_letter("An apple.", options) == "B"
    assert gold_letter("D", options) is None  # past the options, and no option's text
    assert gold_letter("a pear", options) is None
    assert choice_check("ANSWER: B", "an apple", options).correct
    assert not choice_check("ANSWER: A", "an apple", options).correct
    # gold text without options: the response's final answer text decides
    assert choice_check("It is red.\nANSWER: an apple", "An Apple", None).correct


# --- rubrics ------------------------------------------------------------------------------------


def test_rubric_aggregations() -> None:
    crit = [Criterion(2.0), Criterion(1.0), Criterion(-2.0)]
    p = [0.9, 0.6, 0.2]
    assert rubric_reward(crit, p, "weighted") == pytest.approx((1.8 + 0.6 - 0.4) / 3)
    assert rubric_reward(crit, p, "min") == pytest.approx(0.6)  # the penalty is 1 - 0.2
    assert rubric_reward(crit, p, "all_required") == 1.0  # none marked: every one must hold
    assert rubric_reward(crit, [0.9, 0.4, 0.2], "all_required") == 0.0
    # the penalty applies: the fault is present
    assert rubric_reward(crit, [0.9, 0.6, 0.8], "weighted") == pytest.approx(0.8 / 3)
    assert rubric_reward(crit, [0.0, 0.0, 1.0], "weighted") == 0.0  # clipped at 0
    gate = [Criterion(1.0, required=True), Criterion(1.0)]
    assert rubric_reward(gate, [0.4, 1.0], "weighted") == 0.0
    assert rubric_reward(gate, [0.6, 1.0], "weighted") == pytest.approx(0.8)
    assert rubric_reward(gate, [0.6, 0.1], "all_required") == 1.0  # only the required one


# --- the request ----------------------------------------------------------------------------


def _item(**kw: Any) -> dict[str, Any]:
    return {"prompt": Q, "response": RIGHT, **kw}


@pytest.mark.parametrize(
    ("item", "where", "says"),
    [
        (_item(verifier={"type": "telepathy"}), "items.0.verifier", "telepathy"),
        (
            _item(components={"a": {"type": "model"}}, formula="a + b"),
            "items.0",
            "names 'b', which is not a component",
        ),
        (
            _item(components={"a": {"type": "model"}}, formula="a.__class__"),
            "items.0",
            "Attribute",
        ),
        (
            _item(components={"a": {"type": "model"}}, formula="__import__('os')"),
            "items.0",
            "calls '__import__'",
        ),
        (
            _item(verifier={"type": "rubric", "criteria": [{"text": "Wrong.", "weight": -1}]}),
            "items.0.verifier.rubric",
            "no criterion has a positive weight",
        ),
        (
            _item(verifier={"type": "string", "operation": "regex", "pattern": "(unclosed"}),
            "items.0.verifier.string",
            "invalid regular expression",
        ),
        (
            _item(verifier={"type": "string", "operation": "eq", "pattern": "x"}),
            "items.0.verifier.string",
            "takes `reference`",
        ),
        (_item(verifier={"type": "code", "tests": []}), "items.0.verifier.code", "0 cases"),
        (
            _item(verifier={"type": "code", "tests": [{"input": "1"}]}),
            "items.0.verifier.code.tests.0",
            "either {'input', 'output'}",
        ),
        (_item(), "items.0", "exactly one of"),
        (
            _item(verifier={"type": "model"}, components={"a": {"type": "model"}}),
            "items.0",
            "exactly one of",
        ),
        (_item(components={"not a name": {"type": "model"}}), "items.0", "identifier"),
        (_item(components={"min": {"type": "model"}}), "items.0", "identifier"),
        (
            _item(components={"a": {"type": "model", "weight": 2}}, formula="a"),
            "items.0",
            "write the weights into the formula",
        ),
        (
            _item(verifier={"type": "choice", "answer": "a pear", "options": ["x", "y"]}),
            "items.0.verifier.choice",
            "neither a letter",
        ),
        (_item(verifier={"type": "model", "weight": float("inf")}), "weight", "finite"),
    ],
)
def test_a_bad_spec_is_refused_naming_its_item_and_field(
    item: dict[str, Any], where: str, says: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        RewardsRequest.model_validate({"items": [{"prompt": Q, "response": "x"}, item]})
    text = str(caught.value)
    assert says in text, text
    assert where.replace("items.0", "items.1") in text.replace("\n", "."), text


# --- the job, over the scripted engine ---------------------------------------------------------


def _job(payload: dict[str, Any], enqueued_at: float | None = None) -> Job:
    return Job.model_validate(
        {
            "id": new_job_id(),
            "kind": "rewards",
            "payload": payload,
            "deadline": time.time() + 30,
            "enqueued_at": enqueued_at or time.time(),
        }
    )


async def _run(engine: FakeEngine, payload: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out = await JobRunner(Services.build(engine, "fake-model"))(_job(payload, **kw))
    assert out.ok, out
    assert out.body is not None
    return out.body


MIXED: dict[str, Any] = {
    "items": [
        _item(id="math-rule", verifier={"type": "math", "reference": "18"}),
        _item(id="math-wrong", response=WRONG, verifier={"type": "math", "reference": "18"}),
        _item(
            id="math-undecided",
            response="I am not sure.",
            verifier={"type": "math", "reference": "18", "model_fallback": False},
        ),
        _item(id="choice", response="ANSWER: b", verifier={"type": "choice", "answer": "B"}),
        _item(
            id="string",
            verifier={"type": "string", "operation": "regex", "pattern": r"=\s*18\b"},
        ),
        _item(id="model", verifier={"type": "model", "criteria": "The answer is 18."}),
        _item(
            id="rubric",
            verifier={
                "type": "rubric",
                "criteria": [
                    {"text": "The final answer equals the reference.", "weight": 2},
                    {"text": "Shows the computation."},
                    {"text": "Contradicts the reference.", "weight": -2},
                ],
                "reference": "18",
            },
        ),
        _item(
            id="mixed",
            components={
                "correct": {"type": "math", "reference": "18"},
                "format": {"type": "string", "operation": "contains", "reference": "####"},
                "judged": {"type": "model", "weight": 0.5},
            },
        ),
        _item(
            id="formula",
            response=WRONG,
            components={
                "correct": {"type": "math", "reference": "18"},
                "format": {"type": "string", "operation": "contains", "reference": "####"},
            },
            formula="0.8 * correct + 0.2 * format",
        ),
    ]
}


async def test_a_mixed_batch_is_answered_item_by_item_each_by_its_own_spec(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({"3 * 6 = 18": 1.5}))
    b = await _run(engine, MIXED)
    by_id = {r["id"]: r for r in b["results"]}
    assert [r["index"] for r in b["results"]] == list(range(len(MIXED["items"])))
    assert (b["timed_out"], b["failed"]) == (0, 0)
    assert (by_id["math-rule"]["reward"], by_id["math-rule"]["decided_by"]) == (1.0, "rule")
    assert by_id["math-rule"]["extracted"] == "18"
    assert (by_id["math-wrong"]["reward"], by_id["math-wrong"]["reason"]) == (
        0.0,
        "not_equivalent",
    )
    undecided = by_id["math-undecided"]
    assert (undecided["reward"], undecided["decided_by"], undecided["reason"]) == (
        0.0,
        "rule",
        "no_answer",
    )
    assert (by_id["choice"]["reward"], by_id["choice"]["extracted"]) == (1.0, "B")
    assert (by_id["string"]["reward"], by_id["string"]["decided_by"]) == (1.0, "match")
    model = by_id["model"]
    assert model["decided_by"] == "model"
    assert model["reward"] == model["score"] == pytest.approx(sigmoid(1.5))
    rubric = by_id["rubric"]
    probs = [c["probability"] for c in rubric["criteria"]]
    expected = max(0.0, min(1.0, (2 * probs[0] + probs[1] - 2 * probs[2]) / 3))
    assert rubric["reward"] == pytest.approx(expected)
    # components: recomputed from the per-component results
    mixed = by_id["mixed"]
    parts = mixed["components"]
    assert mixed["reward_components"] == {k: v["reward"] for k, v in parts.items()}
    values = mixed["reward_components"]
    assert mixed["decided_by"] == "weighted"
    assert mixed["reward"] == pytest.approx(
        (values["correct"] + values["format"] + 0.5 * values["judged"]) / 2.5
    )
    formula = by_id["formula"]
    assert formula["reward_components"] == {"correct": 0.0, "format": 1.0}
    assert (formula["reward"], formula["decided_by"]) == (pytest.approx(0.2), "formula")
    # engine work: the model item, the mixed item's judge, and one decision's reads
    verdicts = [ids for kind, ids in engine.requests if kind == "verdict"]
    assert len(verdicts) == 2


async def test_a_rubric_is_one_decision_over_a_shared_prefix(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer)
    criteria = [{"text": f"Criterion number {i}."} for i in range(10)]
    b = await _run(engine, {"items": [_item(verifier={"type": "rubric", "criteria": criteria})]})
    assert len(b["results"][0]["criteria"]) == 10
    reads = [ids for _, ids in engine.requests]
    assert len(reads) == 10  # one short read per criterion, nothing else
    shared = min(len(ids) for ids in reads)
    prefix = reads[0][: shared - 40]  # the prompt and response: the same tokens in every read
    assert all(ids[: len(prefix)] == prefix for ids in reads)
    assert len(prefix) > len(tokenizer.encode(RIGHT))


@dataclass
class HangingEngine(FakeEngine):
    """Reads of a prompt that holds HANG never return (a stuck engine request)."""

    cancelled: int = 0
    hung: int = 0

    async def _verdict(self, ids: Sequence[int]) -> tuple[float, base.TokenUsage]:
        if "HANG" in self.decode(ids):
            self.hung += 1
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return await super()._verdict(ids)


async def test_a_deadline_answers_on_time_with_the_hung_item_flagged(tokenizer: Any) -> None:
    engine = HangingEngine(tokenizer, verdicts=by_last_marker({"3 * 6 = 18": 1.5}))
    payload = {
        "items": [
            _item(verifier={"type": "model"}),
            _item(response="HANG " + RIGHT, verifier={"type": "model"}),
            _item(
                response="HANG " + RIGHT,
                components={
                    "fmt": {"type": "string", "operation": "contains", "reference": "####"},
                    "judged": {"type": "model"},
                },
            ),
        ],
        "deadline_s": 1.0,
        "fallback_reward": -1.0,
    }
    start = time.monotonic()
    b = await _run(engine, payload)
    took = time.monotonic() - start
    assert took < 1.0 + 0.5, took  # answered by the deadline (less the delivery margin)
    first, hung, parts = b["results"]
    assert (first["timed_out"], first["decided_by"]) == (False, "model")
    assert (hung["reward"], hung["timed_out"], hung["decided_by"]) == (-1.0, True, "fallback")
    assert (parts["reward"], parts["timed_out"]) == (-1.0, True)
    assert parts["reward_components"] == {"fmt": 1.0, "judged": -1.0}
    assert parts["components"]["judged"]["timed_out"] is True
    assert b["timed_out"] == 2
    assert engine.cancelled == 2  # the hung reads were cancelled, not left running


async def test_the_deadline_counts_from_arrival_so_queue_time_is_spent(tokenizer: Any) -> None:
    engine = HangingEngine(tokenizer)
    payload = {"items": [_item(verifier={"type": "model"})], "deadline_s": 5.0}
    b = await _run(engine, payload, enqueued_at=time.time() - 10)  # it waited 10 s in a queue
    assert b["results"][0]["timed_out"] is True
    assert engine.requests == []


async def test_an_engine_error_fails_its_item_and_not_the_batch(tokenizer: Any) -> None:
    from service.errors import EngineFailure

    engine = FakeEngine(tokenizer, fail=EngineFailure("engine returned no logprobs"))
    payload = {
        "items": [
            _item(verifier={"type": "model"}),
            _item(verifier={"type": "choice", "answer": "A"}, response="ANSWER: A"),
        ]
    }
    b = await _run(engine, payload)
    broken, fine = b["results"]
    assert broken["failed"] == "engine_error: engine returned no logprobs"
    assert (broken["reward"], broken["decided_by"]) == (0.0, "fallback")
    assert (fine["reward"], fine["failed"]) == (1.0, None)
    assert b["failed"] == 1


async def test_a_formula_that_divides_by_zero_fails_its_item(tokenizer: Any) -> None:
    payload = {
        "items": [
            _item(
                components={
                    "a": {"type": "string", "operation": "eq", "reference": "nope"},
                },
                formula="1 / a",
            )
        ],
        "fallback_reward": 0.5,
    }
    b = await _run(FakeEngine(tokenizer), payload)
    result = b["results"][0]
    assert (result["reward"], result["decided_by"]) == (0.5, "fallback")
    assert result["failed"].startswith("formula: ")
    assert result["reward_components"] == {"a": 0.0}


async def test_a_reward_model_spec_on_a_generative_judge_is_refused_before_any_read(
    tokenizer: Any,
) -> None:
    engine = FakeEngine(tokenizer)
    payload = {
        "items": [
            _item(verifier={"type": "model"}),
            _item(components={"rm": {"type": "reward_model"}}),
        ]
    }
    out = await JobRunner(Services.build(engine, "fake-model"))(_job(payload))
    assert (out.status, out.error_type) == (422, "invalid_request")
    assert out.error_message is not None
    assert "items.1.components.rm" in out.error_message
    assert engine.requests == []


async def test_a_reward_model_answers_its_spec_with_its_raw_score(tokenizer: Any) -> None:
    engine = FakeEngine(tokenizer, kind="reward", verdicts=lambda text: 2.5)
    b = await _run(engine, {"items": [_item(verifier={"type": "reward_model"})]})
    result = b["results"][0]
    assert (result["reward"], result["decided_by"]) == (2.5, "reward_model")
    assert result["score"] == pytest.approx(sigmoid(2.5))


# --- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture
async def http(tokenizer: Any) -> AsyncIterator[tuple[httpx.AsyncClient, FakeEngine]]:
    engine = FakeEngine(tokenizer)
    async with app_client(engine) as client:
        yield client, engine


async def test_a_catastrophic_pattern_is_a_422_before_anything_is_queued(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, engine = http
    item = _item(
        response="x" * 3000,
        components={
            "judged": {"type": "model"},
            "shape": {"type": "string", "operation": "regex", "pattern": CATASTROPHIC},
        },
    )
    r = await client.post("/v1/rewards", json={"items": [_item(verifier={"type": "model"}), item]})
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "items.1.components.shape.pattern" in message
    assert "catastrophic" in message
    assert "X-Job-Id" not in r.headers
    assert engine.requests == []


async def test_a_bad_spec_over_http_is_a_typed_422(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, engine = http
    bad = _item(components={"a": {"type": "model"}}, formula="a.__class__")
    r = await client.post("/v1/rewards", json={"items": [bad]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request"
    assert "items.0" in error["message"]
    assert "Attribute" in error["message"]
    assert engine.requests == []


async def test_choice_options_are_bounded_like_every_text(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, _ = http
    from service.config import LimitSettings

    long = "y" * (LimitSettings().max_text_chars + 1)
    item = _item(verifier={"type": "choice", "answer": "A", "options": [long, "no"]})
    r = await client.post("/v1/rewards", json={"items": [item]})
    assert r.status_code == 413, r.text
    assert "items[0].verifier.options[0]" in r.json()["error"]["message"]


def test_the_fallback_reward_and_weights_are_finite() -> None:
    with pytest.raises(ValidationError, match="finite"):
        RewardsRequest.model_validate(
            {"items": [_item(verifier={"type": "model"})], "fallback_reward": math.nan}
        )


async def test_a_cancelled_job_cancels_its_checks(tokenizer: Any) -> None:
    engine = HangingEngine(tokenizer)
    payload = {"items": [_item(response="HANG " + RIGHT, verifier={"type": "model"})]}
    job = asyncio.ensure_future(_run(engine, payload))
    for _ in range(500):  # until the hung read is in the engine (bounded)
        if engine.hung or job.done():
            break
        await asyncio.sleep(0.01)
    assert engine.hung == 1
    job.cancel()
    await asyncio.wait([job], timeout=5)
    assert job.cancelled()
    for _ in range(100):  # the check's task unwinds on the next loop turns
        if engine.cancelled:
            break
        await asyncio.sleep(0.01)
    assert engine.cancelled == 1
