"""Verification against a reference over real HTTP, a real engine and the rule-check pool of
the session's server (docs/methods.md E): who decides, what it costs, what is refused."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

QUESTION = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?"
RIGHT = "In May she sold 48 / 2 = 24 clips.\nIn total 48 + 24 = 72.\nThe answer is \\boxed{72}."
WRONG = "She sold 48 + 48 = 96 clips. The answer is 96."
VAGUE = "She sold some clips in April and some more in May."
SOLUTION = "Natalia sold 48/2 = 24 clips in May.\nAltogether she sold 48+24 = 72 clips.\n#### 72"


def post(server: Any, path: str, body: dict[str, Any], timeout: float = 120) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=timeout)


def ok(server: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = post(server, path, body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_outcome_hybrid_rule_and_model(server: Any, logit_tol: float) -> None:
    base = {"question": QUESTION, "reference": "72", "cache": False}
    right = ok(server, "/v1/judge/outcome", {**base, "response": RIGHT})
    assert (right["score"], right["verdict"], right["logit"]) == (1.0, 1, None)
    assert right["decided_by"] == "rule"
    assert right["rule"] == {
        "extracted": "72",
        "reference": "72",
        "equivalent": True,
        "reason": "equivalent",
    }
    assert right["usage"]["total_tokens"] == right["usage"]["engine_calls"] == 0
    vague = ok(server, "/v1/judge/outcome", {**base, "response": VAGUE})
    assert vague["decided_by"] == "model"
    assert vague["rule"]["reason"] == "no_answer"
    assert vague["usage"]["engine_calls"] == 1
    # hybrid's fallback is exactly the model verifier's judgment with the same reference
    model = ok(server, "/v1/judge/outcome", {**base, "response": VAGUE, "verifier": "model"})
    assert model["rule"] is None
    assert model["logit"] == pytest.approx(vague["logit"], abs=logit_tol)
    # the reference is in the prompt: it is another prompt than the reference-free one
    plain = ok(server, "/v1/judge/outcome", {"question": QUESTION, "response": VAGUE})
    assert model["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]
    rule = ok(server, "/v1/judge/outcome", {**base, "response": VAGUE, "verifier": "rule"})
    assert (rule["score"], rule["decided_by"], rule["rule"]["reason"]) == (None, None, "no_answer")


def test_reasoning_with_a_reference_solution(server: Any) -> None:
    out = ok(
        server,
        "/v1/judge/outcome",
        {
            "question": QUESTION,
            "response": VAGUE,
            "reference": SOLUTION,
            "criteria": "The count must be exact.",
            "mode": "reasoning",
            "reasoning_tokens": 24,
            "return_rationale": True,
        },
    )
    assert out["decided_by"] == "model"
    assert 0.0 <= out["score"] <= 1.0
    assert out["usage"]["engine_calls"] == 2


def test_process_and_rerank_with_a_reference(server: Any) -> None:
    steps = RIGHT.splitlines()
    proc = ok(
        server, "/v1/judge/process", {"question": QUESTION, "steps": steps, "reference": SOLUTION}
    )
    assert len(proc["step_scores"]) == len(steps)
    plain = ok(server, "/v1/judge/process", {"question": QUESTION, "steps": steps})
    # each step's prompt shows the reference, so each is a longer prompt than without it
    assert proc["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]
    docs = [WRONG, RIGHT, VAGUE]
    rr = ok(
        server,
        "/v1/rerank",
        {"query": QUESTION, "documents": docs, "reference": "72", "method": "outcome"},
    )
    assert [r["index"] for r in rr["results"]][0] == 1
    by_index = {r["index"]: r for r in rr["results"]}
    assert (by_index[1]["relevance_score"], by_index[1]["decided_by"]) == (1.0, "rule")
    assert (by_index[0]["relevance_score"], by_index[0]["decided_by"]) == (0.0, "rule")
    assert by_index[2]["decided_by"] == "model"
    assert rr["usage"]["engine_calls"] == 1


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/v1/judge/outcome", {"reference": ""}, "reference must not be empty"),
        ("/v1/judge/outcome", {"reference": ["72"]}, "reference"),
        ("/v1/judge/outcome", {"reference": "7" * 100_000}, "reference has 100000 characters"),
        ("/v1/judge/outcome", {"criteria": "c" * 100_000}, "criteria has 100000 characters"),
        ("/v1/judge/outcome", {"verifier": "rule"}, "needs a reference"),
        ("/v1/judge/process", {"reference": "72", "verifier": "rule"}, "final answer"),
        ("/v1/score", {"reference": "72", "verifier": "rule"}, "process scores need the model"),
    ],
)
def test_a_bad_reference_is_a_422_naming_the_field(
    server: Any, path: str, body: dict[str, Any], needle: str
) -> None:
    shape: dict[str, Any] = {"question": QUESTION}
    if path == "/v1/score":
        shape["responses"] = [RIGHT]
    elif path == "/v1/judge/process":
        shape["steps"] = [RIGHT]
    else:
        shape["response"] = RIGHT
    r = post(server, path, {**shape, **body})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "invalid_request"
    assert needle in r.json()["error"]["message"]


def test_a_pathological_answer_times_out_without_stalling_other_requests(server: Any) -> None:
    """A power tower sympy would evaluate for ever: its check is killed at the rule deadline
    (2 s by default), and a judgment sent meanwhile is answered long before."""
    tower = {
        "question": "What is 9^9^9^9?",
        "response": "The answer is \\boxed{9^{9^{9^{9}}}}.",
        "reference": "9^{9^{9^{10}}}",
        "verifier": "rule",
    }
    plain = {"question": QUESTION, "response": WRONG, "cache": False}
    with ThreadPoolExecutor(2) as pool:
        started = time.monotonic()
        slow = pool.submit(lambda: (post(server, "/v1/judge/outcome", tower), time.monotonic()))
        time.sleep(0.2)  # the tower's check is running
        fast = pool.submit(lambda: (post(server, "/v1/judge/outcome", plain), time.monotonic()))
        (slow_r, slow_at), (fast_r, fast_at) = slow.result(), fast.result()
    assert fast_r.status_code == slow_r.status_code == 200
    assert fast_at < slow_at
    body = slow_r.json()
    assert (body["score"], body["rule"]["reason"]) == (None, "timeout")
    assert slow_at - started >= 2.0  # it ran to the deadline, and no further than a bound
    assert slow_at - started < 30.0
