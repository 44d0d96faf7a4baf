"""OpenAIEngine against scripted OpenAI-compatible answers: parsing, retries, and the refusal
of a server that ignores logprob_token_ids (it would answer a top-k: wrong scores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.config import Settings
from service.engine.base import JudgeCall, OptionCall
from service.engine.openai_engine import OpenAIEngine, api_root
from service.errors import EngineFailure

CARD = {"object": "list", "data": [{"id": "remote-model", "max_model_len": 2048}]}


def completion(top: dict[str, float], prompt_tokens: int = 5) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "text": "1", "logprobs": {"top_logprobs": [top]}}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }


class Remote:
    """A scripted server: honours logprob_token_ids (as vLLM) or ignores them (top-k)."""

    def __init__(self, honours: bool = True, busy: int = 0) -> None:
        self.honours = honours
        self.busy = busy
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=CARD)
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.busy:
            self.busy -= 1
            return httpx.Response(503, text="busy", headers={"Retry-After": "0"})
        if not self.honours:
            return httpx.Response(200, json=completion({"1": -0.5, " the": -1.0}))
        ids = body["logprob_token_ids"]
        # "1"-variants at -0.5, "0"-variants at -2.0, anything else far down.
        return httpx.Response(200, json=completion({f"token_id:{i}": -0.5 - i % 7 for i in ids}))


async def start(model_dir: Path, remote: Remote) -> OpenAIEngine:
    settings = Settings(engine={"backend": "openai", "openai": {"retries": 2}})  # type: ignore[arg-type]
    return await OpenAIEngine.start(settings, str(model_dir), transport=httpx.MockTransport(remote))


async def test_a_server_that_ignores_logprob_token_ids_is_refused_at_start(model_dir: Path) -> None:
    with pytest.raises(EngineFailure, match="does not honour `logprob_token_ids`"):
        await start(model_dir, Remote(honours=False))


async def test_labels_are_read_exactly_by_token_id_prompts(model_dir: Path) -> None:
    remote = Remote()
    engine = await start(model_dir, remote)
    try:
        assert engine.model_info().max_model_len == 2048
        (result,) = await engine.judge([JudgeCall(prompt_ids=[1, 2, 3], verdict_ids=[4, 5])])
        body = remote.bodies[-1]
        assert body["prompt"] == [1, 2, 3, 4, 5]
        assert body["model"] == "remote-model"
        assert body["logprobs"] == len(body["logprob_token_ids"])
        pos, neg = engine._pos_ids, engine._neg_ids
        assert sorted(body["logprob_token_ids"]) == sorted(pos + neg)
        assert result.usage.prompt_tokens == 5
        assert result.usage.cached_tokens == 2
        assert result.usage.engine_calls == 1
        (opt,) = await engine.option_logprobs([OptionCall([7, 8], [[pos[0]], [neg[0]]])])
        assert opt.logprobs == [-0.5 - pos[0] % 7, -0.5 - neg[0] % 7]
    finally:
        await engine.shutdown()


async def test_busy_answers_are_retried(model_dir: Path) -> None:
    remote = Remote()
    engine = await start(model_dir, remote)
    try:
        remote.busy = 2
        await engine.judge([JudgeCall(prompt_ids=[1], verdict_ids=[2])])
        assert len(remote.bodies) == 1 + 3  # the probe, then two 503s and the answer
        remote.busy = 3
        with pytest.raises(EngineFailure, match="503"):
            await engine.judge([JudgeCall(prompt_ids=[1], verdict_ids=[2])])
    finally:
        await engine.shutdown()


def test_the_base_url_may_end_in_v1() -> None:
    assert api_root("http://vllm:8000/v1/") == "http://vllm:8000"
    assert api_root("http://vllm:8000") == "http://vllm:8000"
