"""Outcome judgments through a real server process and the real vLLM engine."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from service.config import Settings
from service.engine.vllm_engine import CPU_BLOCK_SIZE
from service.scoring import prompts

QUESTION = "Natalia sold 48 clips in April and half as many in May. How many clips in total?"
RIGHT = "In May she sold 48 / 2 = 24 clips. In total 48 + 24 = 72 clips. The answer is 72."
WRONG = "In May she sold 48 * 2 = 96 clips. In total 48 + 96 = 144 clips. The answer is 144."


def judge(url: str, **body: Any) -> httpx.Response:
    """A judgment scored afresh: these tests check the engine, not the judgment cache."""
    return httpx.post(url + "/v1/judge/outcome", json={"cache": False, **body}, timeout=300)


def test_direct_judgment_fields(server: Any) -> None:
    r = judge(server.url, question=QUESTION, response=RIGHT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert 0.0 < body["score"] < 1.0
    assert abs(body["score"] - 1 / (1 + math.exp(-body["logit"]))) < 1e-6
    assert body["verdict"] == (1 if body["score"] >= 0.5 else 0)
    assert body["mode"] == "direct"
    assert body["rationale"] is None
    assert body["samples"] is None
    usage = body["usage"]
    assert usage["engine_calls"] == 1
    assert usage["generated_tokens"] == 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["generated_tokens"]


def test_usage_matches_tokenizer_count(server: Any, tokenizer: Any) -> None:
    user = prompts.outcome_user(QUESTION, WRONG, False, tokenizer.all_special_tokens)
    chat = tokenizer.apply_chat_template(
        [{"role": "system", "content": prompts.SYSTEM}, {"role": "user", "content": user}],
        tokenize=True,
        add_generation_prompt=True,
    )
    ids = chat["input_ids"] if hasattr(chat, "keys") else chat
    expected = len(ids) + len(tokenizer.encode("Verdict: ", add_special_tokens=False))
    body = judge(server.url, question=QUESTION, response=WRONG).json()
    assert body["usage"]["prompt_tokens"] == expected


def test_same_request_twice_is_stable(server: Any, logit_tol: float) -> None:
    a = judge(server.url, question=QUESTION, response=WRONG).json()
    b = judge(server.url, question=QUESTION, response=WRONG).json()
    assert abs(a["logit"] - b["logit"]) <= logit_tol
    # The second call reuses every full KV block of the first one's prompt except the last
    # token's (vLLM always computes that one): (n - 1) // block * block tokens.
    block = Settings().engine.block_size or CPU_BLOCK_SIZE
    n = b["usage"]["prompt_tokens"]
    assert b["usage"]["cached_tokens"] == (n - 1) // block * block
    assert b["usage"]["cached_judgments"] == 0


def test_concurrent_equals_sequential(server: Any, logit_tol: float) -> None:
    items = [(f"{QUESTION} (variant {i})", RIGHT if i % 2 else WRONG) for i in range(16)]
    sequential = [judge(server.url, question=q, response=a).json()["logit"] for q, a in items]
    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(judge, server.url, question=q, response=a) for q, a in items]
        concurrent = [f.result().json()["logit"] for f in futures]
    diffs = [abs(x - y) for x, y in zip(sequential, concurrent, strict=True)]
    assert max(diffs) <= logit_tol, diffs


def test_reasoning_respects_budget(server: Any) -> None:
    r = judge(
        server.url,
        question=QUESTION,
        response=WRONG,
        mode="reasoning",
        reasoning_tokens=32,
        samples=3,
        seed=7,
        return_rationale=True,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["samples"]) == 3
    for s in body["samples"]:
        assert 0 <= s["rationale_tokens"] <= 32
        assert s["rationale_finish"] in ("verdict", "eos", "length")
        assert isinstance(s["rationale"], str)
        assert abs(s["score"] - 1 / (1 + math.exp(-s["logit"]))) < 1e-6
    mean = sum(s["score"] for s in body["samples"]) / 3
    assert body["score"] == pytest.approx(mean, abs=1e-9)
    usage = body["usage"]
    # Per sample one request (the verdict read in the rationale's request) or two (a second
    # request reads it: always when a sampled rationale ends with EOS).
    assert 3 <= usage["engine_calls"] <= 6
    rationale_tokens = sum(s["rationale_tokens"] for s in body["samples"])
    assert usage["generated_tokens"] == rationale_tokens + 3  # + one verdict token each
    if usage["engine_calls"] > 3:
        assert usage["cached_tokens"] > 0  # a second request reuses the rationale's prompt


def test_a_repeat_is_answered_from_the_judgment_cache(server: Any) -> None:
    body = {"question": f"{QUESTION} (cache)", "response": WRONG, "cache": True}
    hits = cache_counter(server.url, "hits")
    fresh = httpx.post(server.url + "/v1/judge/outcome", json=body, timeout=300).json()
    again = httpx.post(server.url + "/v1/judge/outcome", json=body, timeout=300).json()
    assert fresh["usage"]["cached_judgments"] == 0
    assert fresh["usage"]["total_tokens"] > 0
    assert again["usage"] == {**fresh["usage"], **ZERO_USAGE, "cached_judgments": 1}
    assert abs(again["score"] - fresh["score"]) < 1e-9
    assert again["logit"] == fresh["logit"]
    assert cache_counter(server.url, "hits") == hits + 1
    # Sampled without a seed: never cached (each call is a fresh draw).
    sampled = {**body, "mode": "reasoning", "reasoning_tokens": 8, "temperature": 0.8}
    for _ in range(2):
        r = httpx.post(server.url + "/v1/judge/outcome", json=sampled, timeout=300).json()
        assert r["usage"]["cached_judgments"] == 0
        assert r["usage"]["engine_calls"] in (1, 2)


def cache_counter(url: str, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    family = f"verifier_judgment_cache_{name}"
    return sum(
        s.value for f in text_string_to_metric_families(text) if f.name == family for s in f.samples
    )


ZERO_USAGE = {
    "prompt_tokens": 0,
    "generated_tokens": 0,
    "cached_tokens": 0,
    "total_tokens": 0,
    "engine_calls": 0,
}


def test_single_reasoning_sample_returns_rationale(server: Any, tokenizer: Any) -> None:
    budget = 16
    body = judge(
        server.url,
        question=QUESTION,
        response=RIGHT,
        mode="reasoning",
        reasoning_tokens=budget,
        return_rationale=True,
    ).json()
    assert body["samples"] is None
    rationale = body["rationale"]
    assert isinstance(rationale, str)  # the small model may end it at once (EOS): then ""
    n = len(tokenizer.encode(rationale, add_special_tokens=False))
    # The rationale is within its budget and is what the usage counts as generated (plus at
    # most the verdict read's one token).
    assert n <= budget
    assert n <= body["usage"]["generated_tokens"] <= budget + 1
