"""POST /v1/decisions through a real server and engine, and through OpenAI's own SDK."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from service.engine.vllm_engine import CPU_BLOCK_SIZE
from service.protocol.decisions import DecisionRequest
from service.scoring import decisions as scoring

TICKET = "I was charged twice for the same subscription renewal. Please refund one charge."
PREDICATE = {
    "type": "predicate",
    "name": "duplicate_charge",
    "instructions": "The customer reports being charged more than once for the same purchase.",
}
CHOICE = {
    "type": "choice",
    "name": "category",
    "instructions": "Classify the support ticket.",
    "choices": [
        {"value": "billing"},
        {"value": "technical", "description": "Software errors and service outages"},
        {"value": False, "description": "Not a support ticket"},
    ],
}
SCORE = {
    "type": "score",
    "name": "urgency",
    "instructions": "How urgent is the ticket?",
    "levels": [{"label": "low"}, {"label": "medium"}, {"label": "high"}],
}
TRAJECTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 12 + 30?"},
    {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 12, "b": 30}'},
    {"type": "function_call_output", "call_id": "c1", "output": "42"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "12 + 30 = 42."}]},
]


def decide(url: str, **body: Any) -> httpx.Response:
    payload = {"model": "verifier", "input": TICKET, "questions": [PREDICATE], **body}
    return httpx.post(url + "/v1/decisions", json=payload, timeout=300)


def prompts(tokenizer: Any, body: dict[str, Any]) -> scoring.DecisionPrompts:
    req = DecisionRequest.model_validate({"model": "verifier", **body})
    specs = [q.spec() for q in req.questions]
    return scoring.decision_prompts(tokenizer, req.blocks(), specs)


def test_the_openai_sdk_works_unchanged(server: Any) -> None:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused") as client:
        d = client.decisions.create(
            model="verifier", input=TRAJECTORY, questions=[PREDICATE, CHOICE, SCORE]
        )
    pred, choice, score = d.answers
    assert pred.type == "predicate"
    assert pred.name == "duplicate_charge"
    assert 0.0 < pred.probability < 1.0
    assert choice.type == "choice"
    assert [p.value for p in choice.probabilities] == ["billing", "technical", False]
    probs = [p.probability for p in choice.probabilities]
    assert sum(probs) == pytest.approx(1.0, abs=1e-9)
    assert choice.confidence == max(probs)
    assert choice.choice == choice.probabilities[probs.index(max(probs))].value
    assert score.type == "score"
    levels = [p.probability for p in score.probabilities]
    assert sum(levels) == pytest.approx(1.0, abs=1e-9)
    assert [(p.label, p.value) for p in score.probabilities] == [
        ("low", 0),
        ("medium", 1),
        ("high", 2),
    ]
    assert score.score == pytest.approx(sum(i * p for i, p in enumerate(levels)))
    assert score.confidence == max(levels)
    assert d.usage.output_tokens == 3
    assert d.usage.total_tokens == d.usage.input_tokens + d.usage.output_tokens
    assert d.usage.output_tokens_details.reasoning_tokens == 0


def test_langchains_decisions_class_works_unchanged(server: Any, prob_tol: float) -> None:
    """``langchain_openai.decisions.OpenAIDecisions`` posts ``{base_url}/decisions`` through
    the openai client and reads answers keyed by question name."""
    from langchain_openai.decisions import Choice, OpenAIDecisions, Predicate, Score

    lc = OpenAIDecisions(model="verifier", base_url=server.url + "/v1", api_key="unused")
    got = lc.invoke(
        {
            "input": TICKET,
            "questions": {
                "category": Choice(
                    instructions="Classify the support ticket.",
                    choices={"billing": "Payments", "technical": "Software errors"},
                ),
                "duplicate": Predicate(instructions=PREDICATE["instructions"]),
                "urgency": Score(instructions="How urgent is it?", levels=["low", "high"]),
            },
        }
    )
    # The same questions as LangChain sends them, through plain HTTP.
    raw = decide(
        server.url,
        questions=[
            {
                "type": "choice",
                "name": "category",
                "instructions": "Classify the support ticket.",
                "choices": [
                    {"value": "billing", "description": "Payments"},
                    {"value": "technical", "description": "Software errors"},
                ],
            },
            {"type": "predicate", "name": "duplicate", "instructions": PREDICATE["instructions"]},
            {
                "type": "score",
                "name": "urgency",
                "instructions": "How urgent is it?",
                "levels": [{"label": "low"}, {"label": "high"}],
            },
        ],
    ).json()["answers"]
    choice, predicate, score = raw
    assert got.choices["category"].choice == choice["choice"]
    for p in choice["probabilities"]:
        assert got.choices["category"].probabilities[p["value"]] == pytest.approx(
            p["probability"], abs=prob_tol
        )
    assert got.predicates["duplicate"].probability == pytest.approx(
        predicate["probability"], abs=prob_tol
    )
    assert got.scores["urgency"].score == pytest.approx(score["score"], abs=prob_tol)
    assert got.usage.input_tokens > 0


def test_one_prefill_of_the_input_and_exactly_the_prompts_built(
    server: Any, tokenizer: Any
) -> None:
    # A fresh input (nothing of it cached yet), long enough to fill several cache blocks.
    fresh = f"Ticket {uuid.uuid4()}. " + TICKET * 8
    questions = [PREDICATE, CHOICE, SCORE, {**PREDICATE, "name": "again"}]
    r = decide(server.url, input=fresh, questions=questions)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    built = prompts(tokenizer, {"input": fresh, "questions": questions})
    assert usage["input_tokens"] == sum(len(built.prompt_ids(i)) for i in range(4))
    assert usage["engine_calls"] == 4
    # the three reads after the first find the whole-block part of the shared prefix cached
    shared_blocks = len(built.prefix_ids) // CPU_BLOCK_SIZE
    assert shared_blocks >= 2
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert cached >= 3 * shared_blocks * CPU_BLOCK_SIZE
    assert cached == usage["cached_tokens"]


def test_a_label_read_is_the_models_next_token_probability(
    server: Any, tokenizer: Any, model_dir: Path, prob_tol: float
) -> None:
    """The probabilities equal a direct read of the same prompt by the model in transformers
    (float32 there; the server's dtype moves each logprob by a few ulps)."""
    import torch
    from transformers import AutoModelForCausalLM

    body = {"input": TRAJECTORY, "questions": [CHOICE, SCORE]}
    got = decide(server.url, **body).json()["answers"]
    built = prompts(tokenizer, body)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    for i, (answer, q) in enumerate(zip(got, [CHOICE, SCORE], strict=True)):
        spec = DecisionRequest.model_validate({**body, "model": "m"}).questions[i].spec()
        with torch.no_grad():
            logits = model(torch.tensor([built.prompt_ids(i)])).logits[0, -1]
        logp = torch.log_softmax(logits.float(), -1)
        per_label = [
            torch.logsumexp(logp[ids], 0).item() for ids in scoring.label_ids(tokenizer, spec)
        ]
        top = max(per_label)
        direct = [math.exp(v - top) for v in per_label]
        direct = [v / sum(direct) for v in direct]
        served = [p["probability"] for p in answer["probabilities"]]
        assert served == pytest.approx(direct, abs=prob_tol), q["name"]


def test_the_same_question_alone_or_among_others_reads_the_same(
    server: Any, prob_tol: float
) -> None:
    alone = decide(server.url, questions=[CHOICE]).json()["answers"][0]
    among = decide(server.url, questions=[PREDICATE, SCORE, CHOICE]).json()["answers"][2]
    for a, b in zip(alone["probabilities"], among["probabilities"], strict=True):
        assert a["value"] == b["value"]
        # probabilities of 3 labels: a logit tolerance bounds each one's move
        assert a["probability"] == pytest.approx(b["probability"], abs=prob_tol)


def test_refusals_and_bad_requests(server: Any) -> None:
    # a question whose prompt does not fit the model is refused; the other is answered
    too_long = {**PREDICATE, "name": "too_long", "instructions": "word " * 5000}
    r = decide(server.url, questions=[too_long, CHOICE])
    assert r.status_code == 200, r.text
    b = r.json()
    assert [a["type"] for a in b["answers"]] == ["refusal", "choice"]
    assert b["answers"][0] == {"type": "refusal", "name": "too_long"}
    assert b["usage"]["engine_calls"] == 1
    # no label reaches probability 1: every question is refused
    r = decide(server.url, min_label_probability=1.0)
    assert [a["type"] for a in r.json()["answers"]] == ["refusal"]
    image = {"type": "input_image", "image_url": "https://example.com/a.png"}
    r = decide(server.url, input=[{"role": "user", "content": [image]}])
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["type"] == "invalid_request"
    assert "input[0].content[0] is an input_image; images are not supported" in err["message"]
    r = decide(
        server.url, questions=[{**CHOICE, "choices": [{"value": str(i)} for i in range(30)]}]
    )
    assert r.status_code == 422
    assert "questions[0].choices has 30 choices; send 2 to 26" in r.json()["error"]["message"]


def test_permutations_average_the_reads_of_each_cyclic_order(server: Any, prob_tol: float) -> None:
    r = decide(server.url, questions=[CHOICE], permutations=3)
    assert r.status_code == 200, r.text
    b = r.json()
    [got] = b["answers"]
    assert got["passes"] == 3
    assert b["usage"]["engine_calls"] == 3
    # the same three orders asked one by one, averaged per value by hand
    choices = CHOICE["choices"]
    by_value: dict[Any, list[float]] = {}
    for shift in range(3):
        order = [choices[(i + shift) % 3] for i in range(3)]
        one = decide(server.url, questions=[{**CHOICE, "choices": order}]).json()["answers"][0]
        assert one["passes"] == 1
        for p in one["probabilities"]:
            by_value.setdefault(p["value"], []).append(p["probability"])
    for p in got["probabilities"]:
        assert p["probability"] == pytest.approx(sum(by_value[p["value"]]) / 3, abs=prob_tol)
    assert sum(p["probability"] for p in got["probabilities"]) == pytest.approx(1.0)


def test_contextual_debias_adds_three_content_free_reads(server: Any, prob_tol: float) -> None:
    raw = decide(server.url, questions=[CHOICE]).json()
    b = decide(server.url, questions=[CHOICE, PREDICATE], debias="contextual").json()
    assert b["usage"]["engine_calls"] == 2 + 3
    probs = [p["probability"] for p in b["answers"][0]["probabilities"]]
    assert sum(probs) == pytest.approx(1.0)
    before = [p["probability"] for p in raw["answers"][0]["probabilities"]]
    assert probs != pytest.approx(before, abs=1e-3)  # the letter prior of this model is not flat
    # the predicate is not a choice question: untouched by the letter debiasing
    alone = decide(server.url).json()["answers"][0]["probability"]
    assert b["answers"][1]["probability"] == pytest.approx(alone, abs=prob_tol)


def test_reasoning_through_the_sdk_extra_body(server: Any) -> None:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused") as client:
        raw = client.decisions.with_raw_response.create(
            model="verifier",
            input=TICKET,
            questions=[PREDICATE, CHOICE],
            extra_body={"mode": "reasoning", "reasoning_tokens": 24},
        )
    d = raw.parse()
    usage = raw.http_response.json()["usage"]
    assert usage["engine_calls"] == 4  # a thought, then a read, per question
    thought = d.usage.output_tokens_details.reasoning_tokens
    assert 0 < thought <= 2 * 24
    assert d.usage.output_tokens == thought + 2
    assert 0.0 < d.answers[0].probability < 1.0  # type: ignore[union-attr]
    assert sum(p.probability for p in d.answers[1].probabilities) == pytest.approx(1.0)  # type: ignore[union-attr]
