"""POST /v1/rewards on the session's real server: a mixed batch answered item by item, each by
its own spec; components recomputed from the per-item results; a rubric read as one decision;
a deadline that answers on time with the hung item flagged and its engine work aborted."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import verifier_client as vc

from tests.e2e.test_disconnect import ENGINE_RUNNING, INFLIGHT, metric, wait_for

pytestmark = pytest.mark.timeout(300)

QUESTION = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?"
RIGHT = "In May she sold 48 / 2 = 24 clips. In total 48 + 24 = 72. The answer is 72."
WRONG = "She sold 48 + 48 = 96 clips. The answer is 96."
VAGUE = "She sold some clips in April and some more in May."  # no answer: the model decides
CRITERIA = [
    {"text": "The final answer equals the reference.", "weight": 2.0},
    {"text": "The response shows the computation.", "weight": 1.0},
    {"text": "The response contradicts the reference.", "weight": -2.0},
]


def item(response: str, **spec: Any) -> dict[str, Any]:
    return {"prompt": QUESTION, "response": response, **spec}


def post(url: str, body: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    r = httpx.post(url + "/v1/rewards", json=body, timeout=timeout)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_a_mixed_batch_is_answered_each_item_by_its_own_spec(server: Any, prob_tol: float) -> None:
    items = [
        item(RIGHT, id="rule", verifier={"type": "math", "reference": "72"}),
        item(VAGUE, id="fallback", verifier={"type": "math", "reference": "72"}),
        item("ANSWER: C", id="choice", verifier={"type": "choice", "answer": "C"}),
        item(
            RIGHT, id="string", verifier={"type": "string", "operation": "ilike", "reference": "72"}
        ),
        item(WRONG, id="model", verifier={"type": "model", "criteria": "The total is 72."}),
        item(
            RIGHT, id="rubric", verifier={"type": "rubric", "criteria": CRITERIA, "reference": "72"}
        ),
        item(
            WRONG,
            id="components",
            components={
                "correct": {"type": "math", "reference": "72"},
                "format": {"type": "string", "operation": "regex", "pattern": r"answer is \d+"},
                "judged": {"type": "model"},
            },
            formula="0.7 * correct + 0.1 * format + 0.2 * judged",
        ),
    ]
    body = post(server.url, {"items": items})
    got = {r["id"]: r for r in body["results"]}
    assert (body["timed_out"], body["failed"]) == (0, 0)
    assert [r["index"] for r in body["results"]] == list(range(len(items)))
    assert (got["rule"]["reward"], got["rule"]["decided_by"]) == (1.0, "rule")
    assert got["fallback"]["decided_by"] == "model"
    assert got["fallback"]["reason"] == "no_answer"
    assert (got["choice"]["reward"], got["string"]["reward"]) == (1.0, 1.0)
    assert got["model"]["decided_by"] == "model"
    assert body["usage"]["engine_calls"] >= 3  # two outcome reads and the rubric's reads

    # the model item is the same judgment /v1/judge/outcome makes
    with vc.Client(server.url) as client:
        direct = client.outcome(question=QUESTION, response=WRONG, criteria="The total is 72.")
    assert got["model"]["reward"] == pytest.approx(direct.score, abs=prob_tol)

    # the rubric: one decision, one predicate per criterion, aggregated by its weights
    rubric = got["rubric"]
    probs = [c["probability"] for c in rubric["criteria"]]
    assert len(probs) == 3
    expected = (2 * probs[0] + probs[1] - 2 * probs[2]) / 3
    assert rubric["reward"] == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-9)

    # components: recomputed here from the per-component results
    parts = got["components"]
    values = {name: c["reward"] for name, c in parts["components"].items()}
    assert parts["reward_components"] == values
    assert (values["correct"], values["format"]) == (0.0, 1.0)
    assert parts["components"]["correct"]["decided_by"] == "rule"
    assert parts["components"]["judged"]["decided_by"] == "model"
    formula = 0.7 * values["correct"] + 0.1 * values["format"] + 0.2 * values["judged"]
    assert (parts["reward"], parts["decided_by"]) == (pytest.approx(formula), "formula")


def test_a_batch_with_a_hung_item_answers_on_time(server: Any) -> None:
    url = server.url
    # Measure against an idle engine: earlier tests' work (a timed-out call's job) has ended.
    wait_for(lambda: metric(url, INFLIGHT) == 0 and not metric(url, ENGINE_RUNNING), 120.0)
    # Sampled rationales at a large budget: minutes of decoding on a CPU if left to run.
    slow = {
        "type": "model",
        "mode": "reasoning",
        "reasoning_tokens": 1024,
        "samples": 16,
        "temperature": 1.0,
    }
    items = [
        item(RIGHT, id="slow", verifier=slow),
        item(RIGHT, id="rule", verifier={"type": "math", "reference": "72"}),
        item(WRONG, id="direct", verifier={"type": "model"}),
    ]
    deadline = 4.0
    start = time.monotonic()
    body = post(
        url, {"items": items, "deadline_s": deadline, "fallback_reward": -1.0, "cache": False}
    )
    took = time.monotonic() - start
    assert took < deadline + 1.0, took
    slow_r, rule_r, direct_r = body["results"]
    assert (slow_r["reward"], slow_r["timed_out"], slow_r["decided_by"]) == (-1.0, True, "fallback")
    assert (rule_r["reward"], rule_r["timed_out"]) == (1.0, False)
    assert (direct_r["timed_out"], direct_r["decided_by"]) == (False, "model")
    assert 0.0 <= direct_r["reward"] <= 1.0
    assert body["timed_out"] == 1
    # the hung rationale was aborted in the engine, not left decoding
    wait_for(lambda: not metric(url, ENGINE_RUNNING), 3.0)


def test_a_deadline_no_worker_can_meet_is_still_answered(server: Any) -> None:
    # deadline_s shorter than any read: the API or the worker answers with the fallback, 200
    body = post(
        server.url,
        {
            "items": [item(RIGHT, verifier={"type": "model", "mode": "reasoning"})],
            "deadline_s": 0.01,
            "cache": False,
        },
    )
    (result,) = body["results"]
    assert (result["reward"], result["timed_out"], result["decided_by"]) == (0.0, True, "fallback")


def test_slime_and_nemo_gym_shapes_answer_by_each_samples_spec(server: Any) -> None:
    url = server.url
    # slime's remote_rm body, one POST per sample
    slime = [
        {"prompt": QUESTION, "response": RIGHT, "label": "72"},
        {"prompt": [{"role": "user", "content": QUESTION}], "response": WRONG, "label": None},
        {
            "prompt": QUESTION,
            "response": RIGHT,
            "label": {"type": "string", "operation": "contains", "reference": "72"},
        },
    ]
    got = []
    for body in slime:
        r = httpx.post(url + "/v1/rewards/slime", json=body, timeout=120)
        assert r.status_code == 200, r.text
        got.append(r.json())
    assert [g["decided_by"] for g in got] == ["rule", "model", "match"]
    assert (got[0]["reward"], got[2]["reward"]) == (1.0, 1.0)
    assert 0.0 <= got[1]["reward"] <= 1.0
    r = httpx.post(url + "/v1/rewards/slime?scalar=true", json=slime[0], timeout=120)
    assert r.json() == 1.0

    # NeMo Gym's /verify: a Responses object, the row's fields echoed, reward_components
    verify = {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "response": {
            "id": "resp_1",
            "created_at": 0.0,
            "model": "policy",
            "object": "response",
            "output": [
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": WRONG, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "components": {
            "correct": {"type": "math", "reference": "72"},
            "judged": {"type": "model"},
        },
        "formula": "0.9 * correct + 0.1 * judged",
        "uuid": "row-7",
    }
    r = httpx.post(url + "/verify", json=verify, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["uuid"] == "row-7"
    parts = out["reward_components"]
    assert parts["correct"] == 0.0
    assert out["reward"] == pytest.approx(0.9 * parts["correct"] + 0.1 * parts["judged"])


def test_get_reward_routes_a_query_with_a_spec_label_by_its_spec(
    server: Any, prob_tol: float
) -> None:
    sep = "\nResponse: "
    body = {
        "query": [QUESTION + sep + RIGHT, QUESTION + sep + "ANSWER: B", QUESTION + sep + WRONG],
        "separator": sep,
        "labels": [
            "72",
            {"type": "choice", "answer": "B"},
            {"type": "rubric", "criteria": CRITERIA, "reference": "72"},
        ],
    }
    r = httpx.post(server.url + "/get_reward", json=body, timeout=180)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["extra_logs"]["decided_by_spec"] == [0.0, 1.0, 1.0]
    assert out["extra_logs"]["decided_by_rule"] == [1.0, 0.0, 0.0]
    assert out["rewards"][:2] == [1.0, 1.0]
    # the rubric query's reward is what /v1/rewards gives the same (prompt, response, spec)
    same = post(
        server.url,
        {
            "items": [
                item(WRONG, verifier={"type": "rubric", "criteria": CRITERIA, "reference": "72"})
            ]
        },
    )
    # (two reads of each criterion: the weighted sum moves by at most (2 + 1 + 2) / 3 of one)
    assert out["rewards"][2] == pytest.approx(same["results"][0]["reward"], abs=5 / 3 * prob_tol)


def test_verl_hooks_route_each_sample_by_its_data_source(server: Any) -> None:
    import asyncio

    from verifier_client import verl

    specs = {"gsm8k": {"type": "math"}, "arc": {"type": "choice"}}
    info = {"question": QUESTION}

    async def one(source: str, solution: str, truth: Any) -> dict[str, Any]:
        try:
            return await verl.compute_score(
                source, solution, truth, info, base_url=server.url, specs=specs
            )
        finally:
            await verl.aclose()

    assert asyncio.run(one("gsm8k", RIGHT, "72"))["decided_by_rule"] == 1.0
    assert asyncio.run(one("arc", "ANSWER: C", "C"))["score"] == 1.0
    # a ground truth that is a spec is used as it is, whatever the source
    spec = {"type": "string", "operation": "contains", "reference": "clips"}
    assert asyncio.run(one("other", RIGHT, spec))["score"] == 1.0

    batch = verl.compute_score_batch(
        data_sources=["gsm8k", "arc", "unmapped", "gsm8k"],
        solution_strs=[RIGHT, "ANSWER: A", RIGHT, WRONG],
        ground_truths=["72", "C", "72", "72"],
        extra_infos=[info] * 4,
        base_url=server.url,
        specs=specs,
    )
    verl.close()
    assert [b["score"] for b in batch] == [1.0, 0.0, 1.0, 0.0]
    assert [b["decided_by_rule"] for b in batch] == [1.0, 0.0, 1.0, 1.0]
    assert all(set(b) == set(batch[0]) for b in batch)  # verl logs the same keys per sample


@pytest.mark.parametrize("asynchronous", [False, True])
def test_trl_reward_function_routes_rows_with_a_spec(server: Any, asynchronous: bool) -> None:
    import asyncio

    from verifier_client.trl import reward_function

    reward = reward_function(
        server.url, reference_column="answer", spec_column="verifier", asynchronous=asynchronous
    )
    columns = {
        "prompts": [QUESTION] * 3,
        "completions": [RIGHT, "ANSWER: B", WRONG],
        "completion_ids": [[1]] * 3,
        "answer": ["72", None, "72"],
        "verifier": [None, {"type": "choice", "answer": "B"}, None],
        "trainer_state": None,
    }
    out = reward(**columns)
    if asynchronous:
        out = asyncio.run(out)  # type: ignore[arg-type]
    assert out == [1.0, 1.0, 0.0]  # rule, the row's own choice spec, rule
