"""LoRA adapters per request on real vLLM, through a real server.

The session's second server (``small_server`` in tests/conftest.py) serves the default model
with one adapter built with peft from random weights (``tests.support.lora``). Each judgment
read under the adapter is checked against a PyTorch forward pass of the base with the adapter
merged, and the base's against the base's, in one engine batch holding both. The server runs
float32 like the reference: vLLM's CPU kernels and torch's differ by float32 rounding (the
pooling tests' bound, 5e-3, holds).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.scoring.prompts import direct_prompt_ids, outcome_prompt, token_variants
from tests.support.lora import NextToken

TOL = 5e-3
PAIRS = [
    ("Tom has 3 apples and buys 2 more. How many apples does he have?", "He has 5 apples."),
    ("What is 7 times 6?", "7 times 6 is 48."),
]
BASE = "SmolLM2-135M-Instruct"
ADAPTED = f"{BASE}:rand"


@pytest.fixture(scope="module")
def adapter(small_server: Any) -> Path:
    return Path(small_server.adapter)


@pytest.fixture(scope="module")
def url(small_server: Any) -> str:
    return str(small_server.url)


def judge(url: str, question: str, response: str, model: str | None) -> dict[str, Any]:
    body = {"question": question, "response": response, "cache": False}
    if model is not None:
        body["model"] = model
    r = httpx.post(url + "/v1/judge/outcome", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def pair_logit(logp: list[float], pos: list[int], neg: list[int]) -> float:
    def lse(ids: list[int]) -> float:
        top = max(logp[i] for i in ids)
        return top + math.log(sum(math.exp(logp[i] - top) for i in ids))

    return lse(pos) - lse(neg)


def test_the_adapter_is_listed_under_its_parent(url: str, adapter: Path) -> None:
    cards = httpx.get(url + "/v1/models").json()["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [(BASE, None), (ADAPTED, BASE)]
    assert cards[1]["root"] == str(adapter)


def test_adapter_reads_are_the_merged_weights_forward_pass(
    url: str, adapter: Path, model_dir: Path, tokenizer: Any
) -> None:
    jobs = [(q, r, m) for q, r in PAIRS for m in (None, ADAPTED)]
    with ThreadPoolExecutor(len(jobs)) as pool:  # one engine batch holds base and adapter rows
        answers = list(pool.map(lambda j: judge(url, *j), jobs))
    refs = {None: NextToken(model_dir), ADAPTED: NextToken(model_dir, adapter)}
    pos, neg = token_variants(tokenizer, "1"), token_variants(tokenizer, "0")
    for (question, response, model), answer in zip(jobs, answers, strict=True):
        assert answer["model"] == (model or BASE)
        ids = direct_prompt_ids(outcome_prompt(tokenizer, question, response, reasoning=False))
        expected = pair_logit(refs[model].logprobs(ids), pos, neg)
        assert answer["logit"] == pytest.approx(expected, abs=TOL), (model, question)
    for i in range(0, len(answers), 2):  # the adapter changes the read
        assert abs(answers[i]["logit"] - answers[i + 1]["logit"]) > 20 * TOL


def test_a_cached_base_answer_never_answers_the_adapter(url: str) -> None:
    question, response = PAIRS[0]
    body = {"question": question + " (cache)", "response": response}
    first = httpx.post(url + "/v1/judge/outcome", json=body, timeout=300).json()
    adapted = httpx.post(
        url + "/v1/judge/outcome", json={**body, "model": ADAPTED}, timeout=300
    ).json()
    again = httpx.post(url + "/v1/judge/outcome", json=body, timeout=300).json()
    assert again["logit"] == first["logit"]
    assert again["usage"]["cached_judgments"] == 1
    assert abs(adapted["logit"] - first["logit"]) > 20 * TOL


def test_an_unknown_adapter_is_a_404_naming_what_is_served(url: str) -> None:
    r = httpx.post(
        url + "/v1/judge/outcome",
        json={"question": "q", "response": "r", "model": f"{BASE}:nope"},
        timeout=60,
    )
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["type"] == "model_not_found"
    assert ADAPTED in error["message"]


def test_a_reasoning_judgment_runs_under_the_adapter(url: str) -> None:
    question, response = PAIRS[1]
    body = {"question": question, "response": response, "mode": "reasoning"}
    r = httpx.post(
        url + "/v1/judge/outcome",
        json={**body, "model": ADAPTED, "reasoning_tokens": 16, "return_rationale": True},
        timeout=300,
    )
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["model"] == ADAPTED
    assert math.isfinite(b["logit"])
    assert isinstance(b["rationale"], str)
    # the rationale, plus the forced verdict line when one request read it
    assert 0 < b["usage"]["generated_tokens"] <= 16 + 8


def test_a_calibration_fitted_through_the_adapter_serves_the_adapter_only(url: str) -> None:
    examples = [
        {"question": f"What is {n} + {n}?", "response": f"{n + n + k}", "label": int(k == 0)}
        for n in range(5)
        for k in (0, 1)
    ]
    body = {"target": "outcome", "examples": examples, "model": ADAPTED}
    fitted = httpx.post(url + "/v1/calibrations", json=body, timeout=600)
    assert fitted.status_code == 200, fitted.text
    assert fitted.json()["model"] == ADAPTED
    cal = {"question": "What is 9 + 9?", "response": "18", "calibration_id": fitted.json()["id"]}
    mapped = httpx.post(url + "/v1/judge/outcome", json={**cal, "model": ADAPTED}, timeout=300)
    assert mapped.status_code == 200, mapped.text
    assert mapped.json()["calibration"] is not None
    refused = httpx.post(url + "/v1/judge/outcome", json=cal, timeout=300)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["type"] == "calibration_mismatch"
