"""slime's remote reward body and NeMo Gym's /verify, sent exactly as those stacks send them
(read from their source: slime rollout/rm_hub remote_rm, NeMo Gym base_resources_server),
answered through the rewards job over the scripted engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from service.protocol.reward_shapes import NemoResponse, label_spec, last_user_text
from tests.support.apps import app_client
from tests.support.fakes import FakeEngine, by_last_marker, sigmoid

Q = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?"
RIGHT = "48 / 2 = 24, and 48 + 24 = 72. The answer is 72."


@pytest.fixture
async def http(tokenizer: Any) -> AsyncIterator[tuple[httpx.AsyncClient, FakeEngine]]:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker({"48 + 24 = 72": 2.0}))
    async with app_client(engine) as client:
        yield client, engine


# --- slime ---------------------------------------------------------------------------------------


async def test_slime_body_with_a_gold_label_is_decided_by_rule(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, engine = http
    # exactly remote_rm's payload: prompt (here templated text), response, label
    body = {"prompt": f"<|im_start|>user\n{Q}<|im_end|>\n", "response": RIGHT, "label": "72"}
    r = await client.post("/v1/rewards/slime", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["reward"], out["decided_by"], out["extracted"]) == (1.0, "rule", "72")
    assert engine.requests == []
    # without --reward-key slime reads the whole body as the reward: ?scalar=true
    r = await client.post("/v1/rewards/slime?scalar=true", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == 1.0


async def test_slime_label_may_be_a_spec_and_the_prompt_a_message_list(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, _ = http
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": Q}]
    spec = {
        "components": {
            "judged": {"type": "model"},
            "fmt": {"type": "string", "operation": "contains", "reference": "The answer is"},
        },
        "formula": "0.5 * judged + 0.5 * fmt",
    }
    r = await client.post(
        "/v1/rewards/slime", json={"prompt": messages, "response": RIGHT, "label": spec}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reward_components"]["judged"] == pytest.approx(sigmoid(2.0))
    assert out["reward"] == pytest.approx(0.5 * sigmoid(2.0) + 0.5)
    # a null label: the judge alone
    r = await client.post("/v1/rewards/slime", json={"prompt": Q, "response": RIGHT, "label": None})
    assert (r.json()["decided_by"], r.json()["reward"]) == ("model", pytest.approx(sigmoid(2.0)))


async def test_slime_with_a_bad_spec_is_a_422_naming_the_field(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, engine = http
    label = {"components": {"a": {"type": "model"}}, "formula": "a.__class__"}
    r = await client.post(
        "/v1/rewards/slime", json={"prompt": Q, "response": RIGHT, "label": label}
    )
    assert r.status_code == 422, r.text
    assert "Attribute" in r.json()["error"]["message"]
    r = await client.post("/v1/rewards/slime", json={"prompt": Q, "response": RIGHT, "label": [1]})
    assert r.status_code == 422, r.text
    assert "label is list" in r.json()["error"]["message"]
    assert engine.requests == []


# --- NeMo Gym ------------------------------------------------------------------------------------


def nemo_response(*texts: str) -> dict[str, Any]:
    """A minimal NeMoGymResponse, as NeMo Gym's own tests build one."""
    return {
        "id": "resp_test",
        "created_at": 0.0,
        "model": "dummy",
        "object": "response",
        "output": [
            {
                "id": f"msg_{i}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": t, "annotations": []}],
            }
            for i, t in enumerate(texts)
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


async def test_nemo_gym_mcqa_row_is_verified_and_echoed(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, _ = http
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Q?\nA: a\nB: b\nC: c"}]},
        "response": nemo_response("Let me think.", "\\boxed{C}"),
        "options": [{"A": "a"}, {"B": "b"}, {"C": "c"}],
        "expected_answer": "C",
        "grading_mode": "strict_single_letter_boxed",
    }
    r = await client.post("/verify", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["reward"], out["extracted_answer"], out["decided_by"]) == (1.0, "C", "match")
    for key, value in body.items():  # the request is echoed, as BaseVerifyResponse does
        assert out[key] == value, key
    assert "_ng_failure_class" not in out


async def test_nemo_gym_row_with_components_returns_reward_components(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, _ = http
    body = {
        "responses_create_params": {"input": Q},
        "response": nemo_response(RIGHT),
        "components": {
            "correct": {"type": "math", "reference": "72"},
            "brief": {"type": "string", "operation": "regex", "pattern": r"^.{0,80}$"},
        },
    }
    r = await client.post("/verify", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reward_components"] == {"correct": 1.0, "brief": 1.0}
    assert out["reward"] == 1.0


def test_the_final_text_is_the_last_assistant_message() -> None:
    response = NemoResponse.model_validate(
        {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "a"}],
                },
                {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "1"},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "b"},
                        {"type": "refusal", "refusal": "no"},
                        {"type": "output_text", "text": "c"},
                    ],
                },
            ]
        }
    )
    assert response.final_text() == "bc"
    assert NemoResponse.model_validate({"output": []}).final_text() == ""


def test_labels_and_inputs() -> None:
    assert label_spec("72") == {"verifier": {"type": "math", "reference": "72"}}
    assert label_spec(72) == {"verifier": {"type": "math", "reference": "72"}}
    assert label_spec(" ") == label_spec(None) == {"verifier": {"type": "model"}}
    assert label_spec({"type": "choice", "answer": "B"}) == {
        "verifier": {"type": "choice", "answer": "B"}
    }
    with pytest.raises(ValueError, match="label is bool"):
        label_spec(True)
    parts = [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]
    assert last_user_text(parts) == "Hi"
    assert last_user_text("plain") == "plain"


# --- /get_reward with a spec per label -----------------------------------------------------------


async def test_get_reward_labels_may_be_each_querys_own_spec(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, _ = http
    sep = "\nAnswer: "
    body = {
        "query": [Q + sep + RIGHT, Q + sep + "ANSWER: B", Q + sep + RIGHT, Q + sep + RIGHT],
        "separator": sep,
        "labels": [
            "72",  # a reference: rule first, as before
            {"type": "choice", "answer": "C"},
            {
                "components": {
                    "judged": {"type": "model"},
                    "fmt": {"type": "string", "operation": "contains", "reference": "answer"},
                },
                "formula": "2 * judged + fmt",
            },
            None,  # the judge alone
        ],
    }
    r = await client.post("/get_reward", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    logs = out["extra_logs"]
    assert logs["decided_by_spec"] == [0.0, 1.0, 1.0, 0.0]
    assert logs["decided_by_rule"] == [1.0, 0.0, 0.0, 0.0]
    assert out["rewards"][:2] == [1.0, 0.0]
    assert out["rewards"][2] == pytest.approx(2 * sigmoid(2.0) + 1.0)  # a formula may pass 1
    assert out["scores"][2] == 1.0  # scores stay in [0, 1]
    assert out["rewards"][3] == pytest.approx(sigmoid(2.0))


async def test_get_reward_with_a_bad_spec_label_is_a_422_naming_it(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    client, engine = http
    body = {
        "query": [Q + "\nA: " + RIGHT, Q + "\nA: " + RIGHT],
        "separator": "\nA: ",
        "labels": ["72", {"type": "rubric", "criteria": [{"text": "bad", "weight": -1}]}],
    }
    r = await client.post("/get_reward", json=body)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "labels[1]" in message
    assert "positive weight" in message
    assert engine.requests == []


def test_the_hooks_pick_a_spec_from_the_ground_truth_or_the_data_source() -> None:
    from verifier_client._specs import spec_fields

    specs = {
        "gsm8k": {"type": "math"},
        "arc": {"type": "choice"},
        "fmt": {"type": "string", "operation": "regex"},
        "mix": {"components": {"a": {"type": "math"}, "b": {"type": "model"}}, "formula": "a"},
        "fixed": {"type": "choice", "answer": "D"},
    }
    assert spec_fields(72, "gsm8k", specs) == {"verifier": {"type": "math", "reference": "72"}}
    assert spec_fields("B", "arc", specs) == {"verifier": {"type": "choice", "answer": "B"}}
    assert spec_fields(r"\d$", "fmt", specs) == {
        "verifier": {"type": "string", "operation": "regex", "pattern": r"\d$"}
    }
    assert spec_fields("7", "mix", specs) == {
        "components": {
            "a": {"type": "math", "reference": "7"},
            "b": {"type": "model", "reference": "7"},
        },
        "formula": "a",
    }
    assert spec_fields("B", "fixed", specs) == {"verifier": {"type": "choice", "answer": "D"}}
    assert spec_fields("72", "unmapped", specs) is None
    assert spec_fields("72", "gsm8k", None) is None
    own = {"type": "string", "operation": "eq", "reference": "x"}
    assert spec_fields(own, "unmapped", None) == {"verifier": own}


async def test_get_reward_with_a_catastrophic_regex_label_is_a_422_before_any_read(
    http: tuple[httpx.AsyncClient, FakeEngine],
) -> None:
    """The pattern runs on the query's own response (split in the worker) before any judgment."""
    client, engine = http
    body = {
        "query": [Q + "\nA: " + RIGHT, Q + "\nA: " + "x" * 3000],
        "separator": "\nA: ",
        "labels": [None, {"type": "string", "operation": "regex", "pattern": r"(x+x+)+y"}],
    }
    r = await client.post("/get_reward", json=body)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "labels[1].verifier.pattern" in message
    assert "catastrophic" in message
    assert engine.requests == []
