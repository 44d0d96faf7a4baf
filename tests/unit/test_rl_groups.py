"""The trainer hooks' batching without a server: a fake service behind httpx.MockTransport
answers /v1/score and the per-sample endpoints, and records every request the hooks send."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from verifier_client import Client, verl
from verifier_client import models as m
from verifier_client._rl import Group, Sample, Scoring, groups_of
from verifier_client.errors import ResponseValidationError
from verifier_client.trl import RewardTimeout, reward_function

TOO_LONG = "TOO LONG"  # the fake service refuses a response holding this (413)
RULE = "The answer is 72."  # ... and decides this one by rule when there is a reference
USAGE = m.Usage(prompt_tokens=10, generated_tokens=1, total_tokens=11, engine_calls=1)


def fake_score(question: str, response: str) -> float:
    """A score that tells the (question, response) pairs apart, in (0, 1)."""
    return (len(question) + 3 * len(response)) % 97 / 100 + 0.01


def refused() -> httpx.Response:
    body = {"error": {"type": "payload_too_large", "message": "responses[1] is too long"}}
    return httpx.Response(413, json=body)


def outcome_of(body: dict[str, Any], response: str) -> tuple[float, str, m.RuleInfo | None]:
    """(score, decided_by, rule) as the fake service decides one response."""
    if body.get("reference") is not None and response == RULE:
        rule = m.RuleInfo(extracted="72", reference="72", equivalent=True, reason="equivalent")
        return 1.0, "rule", rule
    return fake_score(body["question"], response), "model", None


def score_answer(body: dict[str, Any], reverse: bool) -> dict[str, Any]:
    results = []
    for i, response in enumerate(body["responses"]):
        score, by, rule = outcome_of(body, response)
        process = body.get("method") == "process"
        results.append(
            m.ScoreResult(
                index=i,
                outcome=None if process else score,
                process=score if process else None,
                final=score,
                decided_by=None if process else by,  # type: ignore[arg-type]
                rule=None if process else rule,
            )
        )
    if reverse:  # the service's order is by index; the hook must read the index, not the order
        results.reverse()
    n = len(results)
    return m.ScoreResponse(
        method=body.get("method", "fused"),
        alpha=0.5,
        model="fake",
        results=results,
        ranking=list(range(n)),
        usage=USAGE,
    ).model_dump(mode="json")


def outcome_answer(body: dict[str, Any]) -> dict[str, Any]:
    score, by, rule = outcome_of(body, body["response"])
    return m.OutcomeResponse(
        score=score,
        logit=0.0,
        verdict=int(score >= 0.5),
        mode="direct",
        model="fake",
        decided_by=by,  # type: ignore[arg-type]
        rule=rule,
        usage=USAGE,
    ).model_dump(mode="json")


def process_answer(body: dict[str, Any]) -> dict[str, Any]:
    score = fake_score(body["question"], body["response"])
    return m.ProcessResponse(
        aggregate=score,
        aggregation="mean_logit",
        first_error_step=-1,
        mode="direct",
        model="fake",
        split=m.SplitInfo(method_used="heuristic"),
        step_logits=[0.0],
        step_scores=[score],
        steps=[body["response"]],
        threshold=0.5,
        usage=USAGE,
    ).model_dump(mode="json")


class FakeService:
    """Records each request's path and body; answers as a verifier would, in shape."""

    def __init__(self, reverse: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.reverse = reverse
        self.slow_question: str | None = None  # a call about it takes SLOW_S
        self.inflight = self.max_inflight = 0

    def answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        path = request.url.path
        self.calls.append((path, body))
        texts = body.get("responses") or [body.get("response", "")]
        if any(TOO_LONG in t for t in texts):
            return refused()
        if path == "/v1/score":
            return httpx.Response(200, json=score_answer(body, self.reverse))
        if path == "/v1/judge/process":
            return httpx.Response(200, json=process_answer(body))
        return httpx.Response(200, json=outcome_answer(body))

    def sync(self, request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("question") == self.slow_question:
            time.sleep(SLOW_S)
        return self.answer(request)

    async def async_(self, request: httpx.Request) -> httpx.Response:
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            slow = json.loads(request.content).get("question") == self.slow_question
            await asyncio.sleep(SLOW_S if slow else 0.01)
            return self.answer(request)
        finally:
            self.inflight -= 1

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]

    def reward(self, asynchronous: bool = False, **kw: Any) -> Callable[..., Any]:
        handler = self.async_ if asynchronous else self.sync
        opts = {"transport": httpx.MockTransport(handler)}
        return reward_function("http://svc", asynchronous=asynchronous, client_options=opts, **kw)


SLOW_S = 1.0
Q1 = "Natalia sold 48 clips in April and half as many in May. How many in all?"
Q2 = "A pen costs 3 dollars. How much do 4 pens cost?"


async def call(fn: Callable[..., Any], **kw: Any) -> Any:
    out = fn(**kw)
    return await out if asyncio.iscoroutine(out) else out


def interleaved(n: int) -> tuple[list[str], list[str]]:
    """2 prompts x n completions, the prompts interleaved (a group's samples are not adjacent)."""
    prompts = [Q1 if i % 2 == 0 else Q2 for i in range(2 * n)]
    completions = [f"Attempt {i}: the answer is {10 + i}." for i in range(2 * n)]
    return prompts, completions


# --- grouping (pure) ---------------------------------------------------------------------------


def test_groups_are_by_question_and_reference_in_order_of_first_appearance() -> None:
    samples = [
        Sample("q1", "a", "1"),
        Sample("q2", "b", "1"),
        Sample("q1", "c", "1"),
        Sample("q1", "d", "2"),  # same question, another reference: another group
        Sample("q1", "   ", "1"),  # empty: in no group
        Sample("q2", "e", "1"),
    ]
    assert groups_of(samples, 512) == [
        Group("q1", "1", (0, 2), ("a", "c")),
        Group("q2", "1", (1, 5), ("b", "e")),
        Group("q1", "2", (3,), ("d",)),
    ]
    assert [g.indices for g in groups_of(samples, 1)] == [(0,), (2,), (1,), (5,), (3,)]


def test_a_group_over_the_cap_is_several_calls() -> None:
    samples = [Sample("q", str(i)) for i in range(5)]
    assert [g.indices for g in groups_of(samples, 2)] == [(0, 1), (2, 3), (4,)]


@pytest.mark.parametrize(
    ("method", "options", "grouped"),
    [
        ("outcome", {"reasoning_tokens": 64, "cache": False, "verifier": "model"}, True),
        ("outcome", {"return_rationale": True, "seed": 3}, True),
        ("process", {"aggregation": "min", "split": "heuristic"}, True),
        ("outcome", {"early_stop": True}, True),  # the per-sample outcome call drops it too
        ("process", {"early_stop": True}, False),  # /v1/score has no early_stop
        ("outcome", {"max_eval_tokens": 500}, False),  # a budget per request, not per response
        ("process", {"budget_policy": "degrade"}, False),
    ],
)
def test_options_score_cannot_apply_per_response_keep_per_sample_calls(
    method: Any, options: dict[str, Any], grouped: bool
) -> None:
    assert Scoring(method, "direct", options).grouped is grouped


def test_combinations_the_service_refuses_for_every_sample_fail_at_once() -> None:
    with pytest.raises(ValueError, match="single_pass"):
        reward_function("http://svc", mode="single_pass")
    with pytest.raises(ValueError, match="verifier='hybrid' with method='process'"):
        reward_function("http://svc", method="process", verifier="hybrid")
    with pytest.raises(ValueError, match="concurrency=0"):
        reward_function("http://svc", concurrency=0)


# --- the TRL hook --------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_batch_is_one_score_call_per_prompt_mapped_back_in_order(
    asynchronous: bool,
) -> None:
    svc = FakeService(reverse=True)
    prompts, completions = interleaved(4)
    fn = svc.reward(asynchronous, cache=False)
    rewards = await call(fn, prompts=prompts, completions=completions, trainer_state=None)
    assert svc.paths() == ["/v1/score", "/v1/score"]
    # the two calls run concurrently: they may arrive in either order
    by_question = {body["question"]: body for _, body in svc.calls}
    assert sorted(by_question) == sorted([Q1, Q2])
    assert by_question[Q1]["responses"] == completions[0::2]
    assert by_question[Q2]["responses"] == completions[1::2]
    bodies = list(by_question.values())
    for b in bodies:
        assert (b["method"], b["mode"], b["cache"]) == ("outcome", "direct", False)
        assert "reference" not in b
    assert rewards == [fake_score(p, c) for p, c in zip(prompts, completions, strict=True)]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_references_rule_decisions_and_logs_map_back(asynchronous: bool) -> None:
    svc = FakeService()
    extra: dict[str, list[float]] = {}
    metrics: dict[str, float] = {}
    rewards = await call(
        svc.reward(asynchronous, reference_column="answer"),
        prompts=[Q1, Q1, Q1, Q1],
        completions=["It is 5.", RULE, "", RULE],
        answer=["72", "72", "72", "#### 72"],  # the last: another reference, its own group
        log_extra=extra.__setitem__,
        log_metric=metrics.__setitem__,
    )
    # one /v1/score call for the first two; the last, alone in its group, per sample
    # (concurrent calls: in either order)
    by_path = dict(svc.calls)
    assert sorted(svc.paths()) == ["/v1/judge/outcome", "/v1/score"]
    assert by_path["/v1/score"]["reference"] == "72"
    assert by_path["/v1/judge/outcome"]["reference"] == "#### 72"
    model = fake_score(Q1, "It is 5.")
    assert rewards == [model, 1.0, 0.0, 1.0]  # an empty completion earns 0 without a call
    assert extra["verifier_decided_by_rule"] == [0.0, 1.0, 0.0, 1.0]
    assert extra["verifier_rule_equivalent"] == [0.0, 1.0, 0.0, 1.0]
    assert extra["verifier_model_score"] == [model, 0.0, 0.0, 0.0]
    assert metrics == {"verifier_decided_by_rule": 0.5}


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_refused_group_is_sent_again_sample_by_sample(asynchronous: bool) -> None:
    svc = FakeService()
    completions = ["It is 72.", f"{TOO_LONG} ...", "It is 96."]
    rewards = await call(svc.reward(asynchronous), prompts=[Q1] * 3, completions=completions)
    assert sorted(svc.paths()) == ["/v1/judge/outcome"] * 3 + ["/v1/score"]
    # only the refused completion gets no reward (None), as its own call would have said
    assert rewards == [fake_score(Q1, completions[0]), None, fake_score(Q1, completions[2])]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_process_scores_are_the_results_process_part(asynchronous: bool) -> None:
    svc = FakeService()
    prompts, completions = interleaved(2)
    fn = svc.reward(asynchronous, method="process", mode="single_pass")
    rewards = await call(fn, prompts=prompts, completions=completions)
    assert svc.paths() == ["/v1/score", "/v1/score"]
    assert {(b["method"], b["mode"]) for _, b in svc.calls} == {("process", "single_pass")}
    assert rewards == [fake_score(p, c) for p, c in zip(prompts, completions, strict=True)]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_per_sample_calls_on_request_or_for_options_score_lacks(asynchronous: bool) -> None:
    prompts, completions = interleaved(2)
    expected = [fake_score(p, c) for p, c in zip(prompts, completions, strict=True)]
    for kw in ({"group_calls": False}, {"method": "process", "early_stop": True}):
        svc = FakeService()
        rewards = await call(
            svc.reward(asynchronous, **kw), prompts=prompts, completions=completions
        )
        single = "/v1/judge/process" if kw.get("method") == "process" else "/v1/judge/outcome"
        assert svc.paths() == [single] * 4
        assert rewards == expected


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_empty_completions_make_no_call(asynchronous: bool) -> None:
    svc = FakeService()
    rewards = await call(svc.reward(asynchronous), prompts=[Q1, Q2], completions=["", "  "])
    assert (rewards, svc.calls) == ([0.0, 0.0], [])


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_late_group_gets_on_timeouts_value_for_each_of_its_samples(
    asynchronous: bool,
) -> None:
    prompts, completions = interleaved(2)
    fast = [fake_score(Q1, c) for c in completions[0::2]]
    for on_timeout, late in (("none", None), ("zero", 0.0)):
        svc = FakeService()
        svc.slow_question = Q2  # its call takes SLOW_S, past the 0.3 s deadline
        fn = svc.reward(asynchronous, timeout_s=0.3, on_timeout=on_timeout)
        rewards = await call(fn, prompts=prompts, completions=completions)
        assert rewards == [fast[0], late, fast[1], late]
    svc = FakeService()
    svc.slow_question = Q2
    with pytest.raises(RewardTimeout):
        await call(
            svc.reward(asynchronous, timeout_s=0.3, on_timeout="raise"),
            prompts=prompts,
            completions=completions,
        )


async def test_concurrency_bounds_the_calls_in_flight() -> None:
    svc = FakeService()
    prompts = [f"Question {i}?" for i in range(6) for _ in range(2)]
    completions = [f"Answer {i}." for i in range(12)]
    fn = svc.reward(True, concurrency=2)
    await call(fn, prompts=prompts, completions=completions)
    assert svc.paths() == ["/v1/score"] * 6
    assert svc.max_inflight == 2


def test_an_answer_with_the_wrong_results_is_an_error() -> None:
    group = Group(Q1, None, (0, 1), ("a", "b"))
    body = score_answer({"question": Q1, "responses": ["a", "b"], "method": "outcome"}, False)
    body["results"] = body["results"][:1]
    with pytest.raises(ResponseValidationError, match="1 results with indices \\[0\\] for 2"):
        Scoring("outcome", "direct", {}).judged(group, m.ScoreResponse.model_validate(body))


# --- verl's batch reward manager -------------------------------------------------------------


def verl_batch(svc: FakeService, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> list[Any]:
    """compute_score_batch as verl's batch reward manager calls it, on the fake service."""
    transport = httpx.MockTransport(svc.sync)
    monkeypatch.setattr(verl, "Client", lambda url, api_key=None: Client(url, transport=transport))
    try:
        return verl.compute_score_batch(
            data_sources=["openai/gsm8k"] * 4,
            solution_strs=["It is 5.", RULE, "It is 6.", RULE],
            ground_truths=["72", "72", 72, "72"],
            extra_infos=[{"question": q} for q in (Q1, Q1, Q2, Q2)],
            base_url="http://svc",
            **kw,
        )
    finally:
        verl.close()
        assert verl._sync_clients == {}


def test_verl_batch_is_one_call_per_question_and_ground_truth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = FakeService()
    out = verl_batch(svc, monkeypatch)
    assert svc.paths() == ["/v1/score", "/v1/score"]
    assert [b["reference"] for _, b in svc.calls] == ["72", "72"]
    model = [fake_score(Q1, "It is 5."), fake_score(Q2, "It is 6.")]
    assert [r["score"] for r in out] == [model[0], 1.0, model[1], 1.0]
    assert [r["decided_by_rule"] for r in out] == [0.0, 1.0, 0.0, 1.0]
    assert [r["model_score"] for r in out] == [model[0], 0.0, model[1], 0.0]
    assert [r["judged"] for r in out] == [1.0] * 4


def test_verl_batch_late_samples_score_0_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    svc = FakeService()
    svc.slow_question = Q2
    out = verl_batch(svc, monkeypatch, timeout_s=0.3, on_timeout="zero")
    assert [r["judged"] for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert [r["score"] for r in out][2:] == [0.0, 0.0]
    svc = FakeService()
    svc.slow_question = Q2
    with pytest.raises(RewardTimeout):
        verl_batch(svc, monkeypatch, timeout_s=0.3, on_timeout="raise")
