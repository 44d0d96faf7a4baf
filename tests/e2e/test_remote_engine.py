"""The remote engine (``engine.backend=openai``) against a real vLLM OpenAI server on the
default model: scores agree with the in-process engine's, the process needs no local vLLM, and
the client works in-process through the ASGI transport on that backend."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import verifier_client as vc

from loadtests.workload import load_pairs
from service.app import create_app
from service.config import EngineSettings, OpenAIEngineSettings, Settings
from service.engine import reaper
from service.evals.data import read_arc
from tests.support.remote import Proc, remote_backed_service, vllm_openai_process

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

# Logit: the two engines batch differently. 0.15 holds in float32; in bf16 the session's own
# tolerance (two steps of a label logprob's ulp, 0.26) applies: 0.25 was seen on a reasoning
# judgment's verdict (one request in-process, two on the remote engine).
TOL = 0.15


@pytest.fixture(scope="module")
def tol(logit_tol: float) -> float:
    return max(TOL, logit_tol)


PAIRS = [
    ("What is 17 * 3?", "17 * 3 = 41"),
    (
        "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?",
        "In May she sold 48 / 2 = 24 clips. In total 48 + 24 = 72. The answer is 72.",
    ),
    ("What is 12 + 30?", "12 + 30 = 52. The answer is 52."),
]
SOLUTION = "First, 2 + 4 = 6.\n\nThen 3 * 6 = 18.\n\nThe answer is 18."


@pytest.fixture(scope="module")
def vllm_openai(
    settings: Settings, model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proc]:
    log = tmp_path_factory.mktemp("vllm_openai") / "vllm.log"
    with vllm_openai_process(settings, model_dir, log) as proc:
        yield proc


@pytest.fixture(scope="module")
def remote(vllm_openai: Proc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    log = tmp_path_factory.mktemp("remote_service") / "service.log"
    with remote_backed_service(vllm_openai.url, log) as proc:
        yield proc


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(url + path, json={**body, "cache": False}, timeout=300)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_the_remote_backed_service_runs_no_engine_of_its_own(remote: Proc) -> None:
    card = httpx.get(remote.url + "/v1/models", timeout=10).json()["data"][0]
    assert card["device"] == "remote"
    assert "remote-judge" in card["root"]
    maps = Path(f"/proc/{remote.pid}/maps").read_text()
    assert "vllm" not in maps  # no vLLM extension module loaded
    assert list(reaper.children(remote.pid)) == []  # no engine-core process


def test_outcome_scores_agree_with_the_in_process_engine(
    server: Any, remote: Proc, tol: float
) -> None:
    for question, response in PAIRS:
        body = {"question": question, "response": response}
        local, far = (
            post(server.url, "/v1/judge/outcome", body),
            post(remote.url, "/v1/judge/outcome", body),
        )
        assert abs(local["logit"] - far["logit"]) <= tol, (question, local, far)
        assert far["usage"]["engine_calls"] == 1
        assert far["usage"]["prompt_tokens"] == local["usage"]["prompt_tokens"]


def test_reasoning_rationales_come_from_generation_on_the_server(
    server: Any, remote: Proc, tol: float
) -> None:
    body = {
        "question": PAIRS[0][0],
        "response": PAIRS[0][1],
        "mode": "reasoning",
        "reasoning_tokens": 48,
        "return_rationale": True,
    }
    local, far = (
        post(server.url, "/v1/judge/outcome", body),
        post(remote.url, "/v1/judge/outcome", body),
    )
    assert far["rationale"] == local["rationale"]  # greedy: the same text
    assert far["usage"]["generated_tokens"] == local["usage"]["generated_tokens"]
    assert abs(local["logit"] - far["logit"]) <= tol


def test_one_request_reasoning_scores_as_two_requests_do(
    server: Any, remote: Proc, settings: Settings, tol: float
) -> None:
    """The in-process engine reads a reasoning judgment's verdict inside the rationale's own
    request (engine.one_call_reasoning, on by default); the remote engine always sends a second
    request. Greedy, so the same rationale; the same score within the engines' tolerance; and
    usage.engine_calls says which path ran."""
    pairs = load_pairs(settings, 2)
    one_request = 0
    for question, response in pairs:
        body = {
            "question": question,
            "response": response,
            "mode": "reasoning",
            "reasoning_tokens": 64,
            "return_rationale": True,
        }
        local, far = (
            post(server.url, "/v1/judge/outcome", body),
            post(remote.url, "/v1/judge/outcome", body),
        )
        assert far["usage"]["engine_calls"] == 2
        assert local["usage"]["engine_calls"] in (1, 2)
        assert local["rationale"] == far["rationale"], question
        # The rationale and the verdict token, counted alike on both paths.
        assert local["usage"]["generated_tokens"] == far["usage"]["generated_tokens"]
        assert abs(local["logit"] - far["logit"]) <= tol, (question, local, far)
        if local["usage"]["engine_calls"] == 1:
            one_request += 1
            # One prefill of the prompt instead of two.
            assert local["usage"]["prompt_tokens"] < far["usage"]["prompt_tokens"]
    # Most of the default model's rationales end where one request can read the verdict
    # (EOS, or the budget); see docs/performance.md.
    assert one_request >= len(pairs) // 2


@pytest.mark.parametrize("mode", ["direct", "single_pass"])
def test_process_scores_agree(server: Any, remote: Proc, mode: str, tol: float) -> None:
    body = {"question": "What is 3 * (2 + 4)?", "response": SOLUTION, "mode": mode}
    local, far = (
        post(server.url, "/v1/judge/process", body),
        post(remote.url, "/v1/judge/process", body),
    )
    assert far["steps"] == local["steps"]
    assert len(far["step_logits"]) == 3
    for a, b in zip(local["step_logits"], far["step_logits"], strict=True):
        assert abs(a - b) <= tol, (mode, local["step_logits"], far["step_logits"])


def test_rerank_scores_agree(server: Any, remote: Proc, tol: float) -> None:
    body = {
        "query": "What is 12 + 30?",
        "documents": ["12 + 30 = 42. The answer is 42.", PAIRS[2][1], SOLUTION],
    }
    local, far = post(server.url, "/v1/rerank", body), post(remote.url, "/v1/rerank", body)
    mine = {r["index"]: r["relevance_score"] for r in local["results"]}
    theirs = {r["index"]: r["relevance_score"] for r in far["results"]}
    assert set(mine) == set(theirs) == {0, 1, 2}
    for i in mine:
        assert abs(logit(mine[i]) - logit(theirs[i])) <= tol, (i, mine, theirs)


@pytest.fixture(scope="module")
async def asgi_app(vllm_openai: Proc) -> AsyncIterator[Any]:
    """The service built in this process (no vLLM here: the remote backend) with its
    lifespan running; requests reach it through httpx's ASGI transport."""
    cfg = OpenAIEngineSettings(base_url=vllm_openai.url)
    app = create_app(Settings(engine=EngineSettings(backend="openai", openai=cfg)))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            deadline = time.monotonic() + 120
            while (await http.get("/ready")).status_code != 200:
                assert time.monotonic() < deadline, "in-process app not ready"
                await asyncio.sleep(0.2)
        yield app


async def test_async_client_in_process_through_the_asgi_transport(asgi_app: Any) -> None:
    transport = httpx.ASGITransport(app=asgi_app)
    async with vc.AsyncClient("http://app", transport=transport) as client:
        assert (await client.ready()).status == "ready"
        out, proc, split = await asyncio.gather(
            client.outcome(question=PAIRS[1][0], response=PAIRS[1][1]),
            client.process(question="What is 3 * (2 + 4)?", response=SOLUTION),
            client.split(response=SOLUTION),
        )
        assert isinstance(out, vc.models.OutcomeResponse)
        assert 0 < out.score < 1
        assert math.isclose(out.score, 1 / (1 + math.exp(-out.logit)), rel_tol=1e-9)
        assert len(proc.step_scores) == len(split.steps) == 3
        ranked = await client.rerank(
            query="What is 12 + 30?", documents=["42", "52"], method="outcome"
        )
        assert sorted(r.index for r in ranked.results) == [0, 1]
        scored = await client.score(
            question="What is 12 + 30?", responses=["42", "52"], method="outcome"
        )
        assert scored.ranking[0] == ranked.results[0].index
        mcq = await client.mcq_answer(question="2 + 2 = ?", options=["3", "4", "5"])
        assert math.isclose(sum(mcq.probs), 1.0, rel_tol=1e-6)
        with pytest.raises(vc.InvalidRequestError, match="question"):
            await client.outcome(question=" ", response="x")
        # A stored result, by the job id the service returns in X-Job-Id.
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            r = await http.post("/v1/judge/outcome", json={"question": "q?", "response": "a"})
        stored = await client.result(r.headers["x-job-id"])
        assert stored["score"] == r.json()["score"]
        with pytest.raises(vc.NotFoundError):
            await client.result("no-such-job")


def test_the_audit_remote_judge_reads_traces_as_the_served_model_does(
    remote: Proc, prob_tol: float, data_dir: Path
) -> None:
    """The remote judge here is the same vLLM server: a trace it reads gives the letter and
    probability the served model's read gives (greedy traces, so both calls write the same)."""
    arc, _ = read_arc(data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    items = [
        {"question": it.question, "options": it.options, "answer_index": it.answer_index}
        for it in arc[:8]
    ]
    conditions = ["full_reason", "choices_only_reason"]
    body = {
        "items": items,
        "conditions": conditions,
        "reasoning_tokens": 32,
        "predictability": True,
    }
    served = post(remote.url, "/v1/mcq/audit", body)
    judged = post(remote.url, "/v1/mcq/audit", {**body, "trace_judge": "remote"})
    assert served["trace_judge"] == remote_judge_name(remote)
    assert judged["trace_judge"] == "remote-judge"  # the server's model id
    read = 0
    for a, b in zip(served["items"], judged["items"], strict=True):
        for cond in conditions:
            ca, cb = a["conditions"][cond], b["conditions"][cond]
            if ca["rationale"] != cb["rationale"]:
                continue  # a greedy trace differed between batches: nothing to compare
            pa, pb = ca["prediction"], cb["prediction"]
            assert pa["trace_empty"] == pb["trace_empty"]
            if not pa["trace_empty"]:
                read += 1
                assert abs(pa["probability"] - pb["probability"]) <= prob_tol
    assert read >= 1
    assert judged["tokens_by_condition"]["predictability"] > 0


def remote_judge_name(remote: Proc) -> str:
    """The served model's name as the remote-backed service reports it."""
    return str(httpx.get(remote.url + "/v1/models", timeout=10).json()["data"][0]["id"])
