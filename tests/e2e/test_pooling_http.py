"""Trained reward models and PRMs on vLLM's pooling runner, through real servers.

Two small checkpoints are built here (``loadtests.checkpoints``): a one-logit
``LlamaForSequenceClassification`` RM with random weights and a ``Qwen2ForProcessRewardModel``
PRM whose head scores every step after the word " zebra" low. Each is served by changing only
``VERIFIER_ENGINE__MODEL``, and every reward and step score the service returns is checked
against a direct PyTorch forward pass of the same weights (``tests.support.pooled_reference``).

Tolerance: the servers run float32, like the reference; vLLM's CPU kernels and torch's
differ by float32 rounding only (|delta logit| under 1e-3 was seen), so the bound is 5e-3.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from loadtests.checkpoints import POISON_WORD, PRM_TAG, build_prm, build_reward
from loadtests.harness import ROOT, ServerProcess, free_port, stop_all, verifier
from loadtests.metrics_text import sample_sum
from tests.support.pooled_reference import PRMReference, RewardReference

TOL = 5e-3
QUESTION = "Tom has 3 apples and buys 2 more. How many apples does he have?"
RESPONSES = [
    "He has 5 apples.",
    "3 + 2 = 6, so he has 6 apples.",
    "The answer is 5.",
    "I am not sure, maybe 4?",
]
STEPS = [
    "Tom starts with 3 apples.",
    "He buys 2 more apples.",
    "A zebra eats one apple.",
    "3 + 2 - 1 = 4.",
    "The answer is 4.",
]


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@dataclass(frozen=True)
class Served:
    url: str
    folder: Path


def post(served: Served, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(served.url + path, json=body, timeout=300)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {"rm": build_reward(root / "rm"), "prm": build_prm(root / "prm")}


@pytest.fixture(scope="module")
def servers(
    folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Served]]:
    """An RM server and a PRM server, started together; only the model setting differs."""
    logs = tmp_path_factory.mktemp("pooling-servers")
    procs: dict[str, tuple[ServerProcess, str]] = {}
    for name, folder in folders.items():
        port = free_port()
        env = {
            **os.environ,
            "VERIFIER_HOST": "127.0.0.1",
            "VERIFIER_PORT": str(port),
            "VERIFIER_ENGINE__MODEL": str(folder),
            "VERIFIER_ENGINE__DTYPE": "float32",
            "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
            "VERIFIER_ENGINE__MAX_MODEL_LEN": "2048",
        }
        url = f"http://127.0.0.1:{port}"
        proc = ServerProcess(
            verifier("serve"), env=env, log=logs / f"{name}.log", probe=url + "/ready", cwd=ROOT
        )
        procs[name] = (proc.start(), url)
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda p: p[0].wait_ready(), procs.values()))
        yield {name: Served(url, folders[name]) for name, (_, url) in procs.items()}
    finally:
        stop_all([proc for proc, _ in procs.values()])


@pytest.fixture(scope="module")
def rm(servers: dict[str, Served]) -> Served:
    return servers["rm"]


@pytest.fixture(scope="module")
def prm(servers: dict[str, Served]) -> Served:
    return servers["prm"]


@pytest.fixture(scope="module")
def rm_ref(folders: dict[str, Path]) -> RewardReference:
    return RewardReference(folders["rm"])


@pytest.fixture(scope="module")
def prm_ref(folders: dict[str, Path]) -> PRMReference:
    return PRMReference(folders["prm"])


def test_the_kind_comes_from_the_architecture(rm: Served, prm: Served) -> None:
    card = httpx.get(rm.url + "/v1/models", timeout=10).json()["data"][0]
    assert (card["kind"], card["pooling_task"], card["step_tag"]) == ("reward", "classify", None)
    card = httpx.get(prm.url + "/v1/models", timeout=10).json()["data"][0]
    assert card["kind"] == "process_reward"
    assert (card["pooling_task"], card["step_tag"]) == ("token_classify", PRM_TAG)


def test_outcome_reward_is_the_heads_output(rm: Served, rm_ref: RewardReference) -> None:
    for response in RESPONSES:
        r = post(rm, "/v1/judge/outcome", {"question": QUESTION, "response": response})
        assert r.status_code == 200, r.text
        b = r.json()
        ids = rm_ref.ids(QUESTION, response)
        (expected,) = rm_ref.logits(ids)
        assert abs(b["reward"] - expected) < TOL, (response, b["reward"], expected)
        assert b["logit"] == b["reward"]
        assert abs(b["score"] - sigmoid(expected)) < TOL
        assert b["verdict"] == int(b["score"] >= 0.5)
        assert b["decided_by"] == "model"
        u = b["usage"]
        assert (u["prompt_tokens"], u["generated_tokens"], u["engine_calls"]) == (len(ids), 0, 1)


def test_score_rerank_and_get_reward_use_the_same_reward(
    rm: Served, rm_ref: RewardReference
) -> None:
    expected = [rm_ref.logits(rm_ref.ids(QUESTION, r))[0] for r in RESPONSES]
    b = post(rm, "/v1/score", {"question": QUESTION, "responses": RESPONSES}).json()
    got = [res["outcome"] for res in sorted(b["results"], key=lambda x: x["index"])]
    want = [sigmoid(e) for e in expected]
    assert all(abs(g - w) < TOL for g, w in zip(got, want, strict=True)), (got, want)
    b = post(rm, "/v1/rerank", {"query": QUESTION, "documents": RESPONSES}).json()
    order = sorted(range(len(expected)), key=lambda i: -expected[i])
    assert [res["index"] for res in b["results"]] == order
    for res in b["results"]:
        assert abs(res["relevance_score"] - sigmoid(expected[res["index"]])) < TOL


def test_get_reward_with_a_reference_lets_the_rule_decide_first(rm: Served) -> None:
    """RL trainers send a ground truth with every rollout: the rule decides what it can, the
    RM (which has no place for a reference) scores the rest."""
    query = [f"{QUESTION}\nThe answer is 5.", f"{QUESTION}\nI am not sure, maybe 4?"]
    r = post(rm, "/get_reward", {"query": query, "prompts": [QUESTION] * 2, "labels": ["5", ""]})
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["rewards"][0] == 1.0  # the rule: 5 == 5
    assert 0.0 < b["rewards"][1] < 1.0  # no reference: the RM's sigmoid(reward)
    assert b["usage"]["engine_calls"] == 1
    assert b["usage"]["generated_tokens"] == 0


def test_verls_classify_body(rm: Served, rm_ref: RewardReference) -> None:
    """verl's and AReaL's call: the chat-templated text, raw logits, data[-1].probs[-1]."""
    text = rm_ref.tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": RESPONSES[0]}],
        tokenize=False,
    )
    r = post(rm, "/classify", {"model": "rm", "input": text, "use_activation": False})
    assert r.status_code == 200, r.text
    b = r.json()
    ids = rm_ref.tokenizer.encode(text)
    (expected,) = rm_ref.logits(ids)
    assert abs(b["data"][-1]["probs"][-1] - expected) < TOL
    assert b["object"] == "list"
    assert b["id"].startswith("classify-")
    assert b["data"][0]["num_classes"] == 1
    assert b["data"][0]["index"] == 0
    assert b["usage"]["prompt_tokens"] == b["usage"]["total_tokens"] == len(ids)
    assert r.headers["x-job-id"]  # through the queue, like every route
    # Activation on (vLLM's default): a one-logit head gives the sigmoid.
    b = post(rm, "/classify", {"model": "rm", "input": [text, text]}).json()
    assert [d["index"] for d in b["data"]] == [0, 1]
    assert abs(b["data"][1]["probs"][0] - sigmoid(expected)) < TOL


def test_vllms_pooling_bodies(rm: Served, prm: Served, prm_ref: PRMReference) -> None:
    r = post(rm, "/pooling", {"model": "rm", "input": "hello", "use_activation": False})
    assert r.status_code == 200, r.text
    data = r.json()["data"][0]
    assert data["object"] == "pooling"
    assert len(data["data"]) == 1
    ids = prm_ref.ids(QUESTION, STEPS)
    r = post(prm, "/pooling", {"model": "prm", "input": ids, "use_activation": False})
    assert r.status_code == 200, r.text
    rows = r.json()["data"][0]["data"]
    expected = prm_ref.step_logits(ids)
    assert len(rows) == len(expected) == len(STEPS)  # a row at every step tag
    for row, want in zip(rows, expected, strict=True):
        assert all(abs(a - b) < TOL for a, b in zip(row, want, strict=True)), (row, want)


def test_prm_step_scores_match_the_forward_pass(prm: Served, prm_ref: PRMReference) -> None:
    r = post(prm, "/v1/judge/process", {"question": QUESTION, "steps": STEPS})
    assert r.status_code == 200, r.text
    b = r.json()
    ids = prm_ref.ids(QUESTION, STEPS)
    rows = prm_ref.step_logits(ids)
    for k, (row, logit, score) in enumerate(
        zip(rows, b["step_logits"], b["step_scores"], strict=True)
    ):
        assert abs(logit - (row[1] - row[0])) < TOL, k
        p1 = math.exp(row[1]) / (math.exp(row[0]) + math.exp(row[1]))  # class 1: "good"
        assert abs(score - p1) < TOL, k
    mean = sum(b["step_logits"]) / len(STEPS)
    assert abs(b["aggregate"] - sigmoid(mean)) < 1e-9  # mean_logit, unchanged
    u = b["usage"]
    assert (u["engine_calls"], u["prompt_tokens"], u["generated_tokens"]) == (1, len(ids), 0)


@pytest.mark.parametrize("poisoned", [0, 2, 4, None])
def test_the_planted_step_is_the_first_error(prm: Served, poisoned: int | None) -> None:
    """The planted head scores steps from the poison word on low: a wrong step position or
    a swapped class moves the first error or flips every score."""
    steps = [f"Step {i + 1}: we count the apples again." for i in range(5)]
    if poisoned is not None:
        steps[poisoned] = f"Step {poisoned + 1}: a{POISON_WORD} walks by."
    b = post(prm, "/v1/judge/process", {"question": QUESTION, "steps": steps}).json()
    assert b["first_error_step"] == (-1 if poisoned is None else poisoned), b["step_scores"]
    cut = len(steps) if poisoned is None else poisoned
    assert all(s > 0.8 for s in b["step_scores"][:cut])
    assert all(s < 0.01 for s in b["step_scores"][cut:])


def test_prm_outcome_and_split_responses(prm: Served) -> None:
    b = post(prm, "/v1/judge/outcome", {"question": QUESTION, "response": RESPONSES[0]}).json()
    assert b["score"] > 0.8
    assert b["reward"] == b["logit"]
    bad = f"The{POISON_WORD} took one. The answer is 4."
    assert (
        post(prm, "/v1/judge/outcome", {"question": QUESTION, "response": bad}).json()["score"]
        < 0.01
    )
    response = "Tom starts with 3 apples.\n\nA zebra eats one.\n\nThe answer is 4."
    b = post(prm, "/v1/judge/process", {"question": QUESTION, "response": response}).json()
    assert b["split"]["method_used"] == "heuristic"
    assert len(b["steps"]) == 3
    assert b["first_error_step"] == 1


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/v1/judge/outcome", {"mode": "reasoning"}, "mode='reasoning'"),
        ("/v1/judge/outcome", {"reference": "5", "verifier": "model"}, "reference"),
        ("/v1/judge/process", {"mode": "reasoning"}, "mode='reasoning'"),
        ("/v1/mcq/answer", {"question": "2+2?", "options": ["3", "4"]}, "generative"),
        ("/v1/split", {"response": "a. b. c.", "method": "model"}, "generative"),
        ("/pooling", {"input": "hi", "task": "token_classify"}, "token_classify"),
    ],
)
def test_what_needs_generation_is_refused_with_a_reason(
    rm: Served, path: str, body: dict[str, Any], needle: str
) -> None:
    base: dict[str, Any] = {"question": QUESTION}
    if path == "/v1/judge/outcome":
        base["response"] = RESPONSES[0]
    if path == "/v1/judge/process":
        base["steps"] = STEPS[:2]
    if path in ("/v1/mcq/answer", "/v1/split", "/pooling"):
        base = {}
    r = post(rm, path, {**base, **body})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "not_served_by_model"
    assert needle in error["message"]


def test_classify_on_a_prm_is_refused(prm: Served) -> None:
    # On the generative judge: test_http_contract (this module runs beside the session server).
    r = post(prm, "/classify", {"input": "hello"})
    assert r.status_code == 422
    assert "/pooling" in r.json()["error"]["message"]


def test_bad_pooling_bodies(rm: Served) -> None:
    for body, field in [
        ({}, "input"),
        ({"input": "a", "messages": [{"role": "user", "content": "b"}]}, "input"),
        ({"input": []}, "input"),
        ({"input": [10**9]}, "input[0]"),
        ({"input": "a", "truncate_prompt_tokens": 5}, "truncate_prompt_tokens"),
        ({"input": "a", "encoding_format": "base64"}, "encoding_format"),
    ]:
        r = post(rm, "/pooling", body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.json()["error"]["message"], (body, r.text)


def test_pooling_routes_are_metered(rm: Served) -> None:
    def count(status: str) -> float:
        text = httpx.get(rm.url + "/metrics", timeout=10).text
        return sample_sum(text, "verifier_requests_total", endpoint="/classify", status=status)

    ok, refused = count("200"), count("422")
    assert post(rm, "/classify", {"input": ["one", "two"]}).status_code == 200
    assert post(rm, "/classify", {"input": []}).status_code == 422
    assert (count("200") - ok, count("422") - refused) == (1, 1)
