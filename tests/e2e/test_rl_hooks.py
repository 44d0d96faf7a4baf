"""The RL trainer hooks, each called exactly as its trainer calls it (late-2026 call shapes),
against the session's real server. A real GRPOTrainer run is in test_grpo_trainer.py."""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any

import httpx
import pytest
import verifier_client as vc
from verifier_client import verl
from verifier_client.trl import RewardTimeout, reward_function
from verifier_client.verl import compute_score, compute_score_batch

QUESTION = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?"
RIGHT = "In May she sold 48 / 2 = 24 clips. In total 48 + 24 = 72. The answer is 72."
WRONG = "She sold 48 + 48 = 96 clips. The answer is 96."
# States no answer and no number: the rule cannot decide, so the model judges.
VAGUE = "She sold some clips in April and some more in May."


def outcome_scores(url: str, pairs: list[tuple[str, str]]) -> list[float]:
    with vc.Client(url) as client:
        return [client.outcome(question=q, response=r).score for q, r in pairs]


# --- OpenRLHF: POST /get_reward ------------------------------------------------------------


def openrlhf_call(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """As OpenRLHF's remote reward call: one POST of the batch, JSON in, JSON out."""
    r = httpx.post(url + "/get_reward", json=payload, timeout=180)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_openrlhf_remote_rm_with_prompts(server: Any, tokenizer: Any) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )
    queries = [prompt + RIGHT + tokenizer.eos_token, prompt + WRONG + tokenizer.eos_token]
    # OpenRLHF sends "" for every label when no label key is set: no reference.
    out = openrlhf_call(
        server.url, {"query": queries, "prompts": [prompt, prompt], "labels": ["", ""]}
    )
    assert set(out) >= {"rewards", "scores", "extra_logs"}
    expected = outcome_scores(server.url, [(QUESTION, RIGHT), (QUESTION, WRONG)])
    assert out["scores"] == pytest.approx(expected, abs=1e-9)  # the same judgments, cached
    assert out["rewards"] == out["scores"]
    assert all(0.0 <= s <= 1.0 for s in out["scores"])
    assert len(out["extra_logs"]["verifier_logit"]) == 2
    assert out["extra_logs"]["decided_by_rule"] == [0.0, 0.0]


def test_openrlhf_labels_are_references_decided_by_rule_where_it_can(
    server: Any, tokenizer: Any, logit_tol: float
) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )
    queries = [prompt + r + tokenizer.eos_token for r in (RIGHT, WRONG, VAGUE)]
    payload = {"query": queries, "prompts": [prompt] * 3, "labels": ["72", 72, "#### 72"]}
    out = openrlhf_call(server.url, {**payload, "cache": False})
    logs = out["extra_logs"]
    assert logs["decided_by_rule"] == [1.0, 1.0, 0.0]
    assert logs["rule_equivalent"] == [1.0, 0.0, 0.0]
    with vc.Client(server.url) as client:
        model = client.outcome(
            question=QUESTION, response=VAGUE, reference="#### 72", verifier="model"
        )
    assert out["rewards"][:2] == [1.0, 0.0]
    # the vague response's reward is this call's own read of the model ...
    assert logs["model_score"] == [0.0, 0.0, out["rewards"][2]]
    assert out["rewards"][2] == pytest.approx(
        1 / (1 + math.exp(-logs["verifier_logit"][2])), abs=1e-9
    )
    # ... and the same judgment read alone, in another engine batch: equal within the dtype's
    # tolerance (bf16 reads move by whole ulps between batches)
    assert model.logit is not None
    assert abs(logs["verifier_logit"][2] - model.logit) <= logit_tol
    assert logs["verifier_logit"][:2] == [1e4, -1e4]
    assert out["usage"]["engine_calls"] == 1  # only the vague response reached the engine
    rule_only = openrlhf_call(server.url, {**payload, "verifier": "rule"})
    assert rule_only["rewards"] == [1.0, 0.0, 0.0]  # undecided: 0, and flagged
    assert rule_only["extra_logs"]["decided_by_rule"] == [1.0, 1.0, 0.0]
    assert rule_only["usage"]["total_tokens"] == 0


def test_openrlhf_bad_labels_are_422s_naming_the_label(server: Any) -> None:
    query = f"Q: {QUESTION}\n### Response:\n{RIGHT}"
    base = {"query": [query], "separator": "### Response:"}
    for labels, verifier, needle in [
        ([{"answer": "72"}], None, "labels[0] is an object without `type` or `components`"),
        (["72", "1"], None, "labels has 2 items for 1 queries"),
        ([""], "rule", "labels[0] is missing or empty"),
        (["7" * 100_000], None, "labels[0] has 100000 characters"),
    ]:
        body = {**base, "labels": labels, **({"verifier": verifier} if verifier else {})}
        r = httpx.post(server.url + "/get_reward", json=body, timeout=60)
        assert r.status_code == 422, r.text
        assert needle in r.json()["error"]["message"]


def test_openrlhf_query_alone_is_cut_at_the_chat_templates_assistant_marker(
    server: Any, tokenizer: Any
) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )
    out = openrlhf_call(server.url, {"query": [prompt + RIGHT], "prompts": [], "labels": []})
    assert out["scores"] == pytest.approx(outcome_scores(server.url, [(QUESTION, RIGHT)]))


def test_openrlhf_separator_and_empty_calls(server: Any) -> None:
    query = f"Q: {QUESTION}\n### Response:\n{RIGHT}"
    out = openrlhf_call(
        server.url, {"query": [query], "prompts": [], "labels": [], "separator": "### Response:"}
    )
    assert out["scores"] == pytest.approx(outcome_scores(server.url, [(f"Q: {QUESTION}", RIGHT)]))
    # With several reward URLs some calls carry empty lists.
    empty = openrlhf_call(server.url, {"query": [], "prompts": [], "labels": []})
    assert empty == {
        "rewards": [],
        "scores": [],
        "extra_logs": {},
        "calibration": None,
        "usage": empty["usage"],
    }


def test_openrlhf_unsplittable_query_is_a_typed_422(server: Any) -> None:
    r = httpx.post(server.url + "/get_reward", json={"query": ["no marker here"]}, timeout=60)
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "invalid_request"
    assert "VERIFIER_REWARD__SEPARATOR" in r.json()["error"]["message"]


# --- TRL: reward_funcs=[reward_function(...)] ---------------------------------------------------


def trl_call(fn: Any, prompts: list[Any], completions: list[Any]) -> Any:
    """As GRPOTrainer's _calculate_rewards: keyword arguments, dataset columns, trainer state."""
    return fn(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1, 2, 3] for _ in completions],
        answer=["72"] * len(completions),  # a dataset column
        trainer_state=object(),
    )


def test_trl_reward_function_plain_format(server: Any) -> None:
    fn = reward_function(server.url, mode="direct")
    rewards = trl_call(fn, [QUESTION, QUESTION, QUESTION], [RIGHT, WRONG, "   "])
    expected = outcome_scores(server.url, [(QUESTION, RIGHT), (QUESTION, WRONG)])
    assert rewards == pytest.approx([*expected, 0.0])  # an empty completion earns 0


def test_trl_reward_function_conversational_format(server: Any) -> None:
    fn = reward_function(server.url)
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]]
    completions = [[{"role": "assistant", "content": RIGHT}]]
    rewards = trl_call(fn, prompts, completions)
    assert rewards == pytest.approx(outcome_scores(server.url, [(QUESTION, RIGHT)]))


def test_trl_reference_column_decides_by_rule_and_logs_who_decided(server: Any) -> None:
    fn = reward_function(server.url, reference_column="answer")
    extra: dict[str, list[float]] = {}
    metrics: dict[str, float] = {}
    rewards = fn(
        prompts=[QUESTION] * 4,
        completions=[RIGHT, WRONG, VAGUE, ""],
        completion_ids=[[1]] * 4,
        answer=["72", "72", "72", "72"],
        trainer_state=object(),
        log_extra=extra.__setitem__,
        log_metric=metrics.__setitem__,
    )
    with vc.Client(server.url) as client:
        vague = client.outcome(question=QUESTION, response=VAGUE, reference="72")
    assert vague.decided_by == "model"
    assert rewards == [1.0, 0.0, pytest.approx(vague.score), 0.0]
    assert extra["verifier_decided_by_rule"] == [1.0, 1.0, 0.0, 0.0]
    assert extra["verifier_rule_equivalent"] == [1.0, 0.0, 0.0, 0.0]
    assert extra["verifier_model_score"] == [0.0, 0.0, pytest.approx(vague.score), 0.0]
    assert metrics == {"verifier_decided_by_rule": 0.5}
    with pytest.raises(KeyError, match="reference_column='solution'"):
        reward_function(server.url, reference_column="solution")(
            prompts=[QUESTION], completions=[RIGHT], answer=["72"]
        )


async def settled(value: Any) -> Any:
    """A reward function's result, awaited when it is async."""
    return await value if inspect.isawaitable(value) else value


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_trl_deadline_falls_back_as_the_caller_chose(server: Any, asynchronous: bool) -> None:
    # A reasoning judgment takes seconds here; a 50 ms deadline always passes first.
    slow = {"mode": "reasoning", "reasoning_tokens": 64, "cache": False}
    for on_timeout, expected in (("none", [None, None]), ("zero", [0.0, 0.0])):
        fn = reward_function(
            server.url, timeout_s=0.05, on_timeout=on_timeout, asynchronous=asynchronous, **slow
        )
        assert await settled(fn(prompts=[QUESTION] * 2, completions=[VAGUE, RIGHT])) == expected
    fn = reward_function(
        server.url, timeout_s=0.05, on_timeout="raise", asynchronous=asynchronous, **slow
    )
    with pytest.raises(RewardTimeout):
        await settled(fn(prompts=[QUESTION], completions=[VAGUE]))


class Counting(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Real HTTP transports (sync and async) that record each request's method and path."""

    def __init__(self) -> None:
        self._sync = httpx.HTTPTransport()
        self._async = httpx.AsyncHTTPTransport()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        return self._sync.handle_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        return await self._async.handle_async_request(request)

    def close(self) -> None:
        self._sync.close()

    async def aclose(self) -> None:
        await self._async.aclose()


# GRPO-shaped: 2 prompts x 4 completions, the prompts interleaved as a shuffled batch may be.
GROUP_PROMPTS = [QUESTION, "A pen costs 3 dollars. How much do 4 pens cost?"]
GROUP_COMPLETIONS = {
    GROUP_PROMPTS[0]: [RIGHT, WRONG, VAGUE, "48 + 24 = 72 clips."],
    GROUP_PROMPTS[1]: ["4 x 3 = 12 dollars.", "They cost 7 dollars.", "3 + 4 = 7.", "12."],
}


def logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_trl_batch_is_one_score_request_per_prompt(
    server: Any, logit_tol: float, asynchronous: bool
) -> None:
    prompts = [GROUP_PROMPTS[i % 2] for i in range(8)]
    completions = [GROUP_COMPLETIONS[p][i // 2] for i, p in enumerate(prompts)]
    transport = Counting()
    try:
        fn = reward_function(
            server.url,
            asynchronous=asynchronous,
            client_options={"transport": transport},
            cache=False,  # every judgment fresh: batched in the engine, not read from the cache
        )
        rewards = await settled(fn(prompts=prompts, completions=completions))
    finally:
        transport.close()
        await transport.aclose()
    assert transport.paths == ["POST /v1/score"] * 2
    with vc.Client(server.url) as client:
        single = [
            client.outcome(question=p, response=c, cache=False)
            for p, c in zip(prompts, completions, strict=True)
        ]
    assert all(r is not None and 0.0 < r < 1.0 for r in rewards)
    for reward, one in zip(rewards, single, strict=True):
        assert one.logit is not None
        assert abs(logit(reward) - one.logit) <= logit_tol, (reward, one.score)


def test_trl_refused_completion_skips_only_itself(server: Any) -> None:
    transport = Counting()
    try:
        fn = reward_function(server.url, client_options={"transport": transport})
        # over limits.max_text_chars (32,000 by default): the service refuses it (413)
        rewards = fn(prompts=[QUESTION] * 3, completions=[RIGHT, "7" * 40_000, WRONG])
    finally:
        transport.close()
    assert transport.paths == ["POST /v1/score"] + ["POST /v1/judge/outcome"] * 3
    expected = outcome_scores(server.url, [(QUESTION, RIGHT), (QUESTION, WRONG)])
    assert rewards == [pytest.approx(expected[0]), None, pytest.approx(expected[1])]


async def test_trl_async_reward_function_is_awaited(server: Any) -> None:
    fn = reward_function(server.url, method="process", asynchronous=True)
    assert inspect.iscoroutinefunction(fn)
    rewards = await trl_call(fn, [QUESTION], [RIGHT])
    with vc.Client(server.url) as client:
        expected = client.process(question=QUESTION, response=RIGHT).aggregate
    assert rewards == pytest.approx([expected])


# --- verl: reward.custom_reward_function.path/name + reward_kwargs ----------------------------


async def test_verl_compute_score_as_verl_calls_it(server: Any) -> None:
    assert inspect.iscoroutinefunction(compute_score)
    # reference-free here: what the ground truth changes is the next test's
    reward_kwargs = {"base_url": server.url, "mode": "direct", "use_reference": False}
    try:
        result = await compute_score(
            "openai/gsm8k", RIGHT, "72", {"question": QUESTION, "split": "train"}, **reward_kwargs
        )
        # verl's naive/batch managers pass keyword arguments too.
        again = await compute_score(
            data_source="openai/gsm8k",
            solution_str=WRONG,
            ground_truth="72",
            extra_info={"question": QUESTION},
            **reward_kwargs,
        )
        # both samples went through one kept client
        assert len(verl._clients[asyncio.get_running_loop()]) == 1
    finally:
        await verl.aclose()
    assert asyncio.get_running_loop() not in verl._clients
    assert result["score"] == pytest.approx(outcome_scores(server.url, [(QUESTION, RIGHT)])[0])
    assert result["judged"] == 1.0
    assert again["score"] == pytest.approx(outcome_scores(server.url, [(QUESTION, WRONG)])[0])


async def test_verl_ground_truth_is_the_reference(server: Any) -> None:
    kwargs = {"base_url": server.url}
    info = {"question": QUESTION}
    try:
        right = await compute_score("openai/gsm8k", RIGHT, "72", info, **kwargs)
        vague = await compute_score("openai/gsm8k", VAGUE, "72", info, **kwargs)
        ignored = await compute_score(
            "openai/gsm8k", RIGHT, "72", info, use_reference=False, **kwargs
        )
        late = await compute_score(
            "openai/gsm8k",
            VAGUE,
            "72",
            info,
            timeout_s=0.05,
            mode="reasoning",
            verifier="model",
            cache=False,
            **kwargs,
        )
    finally:
        await verl.aclose()
    assert right == {
        "score": 1.0,
        "judged": 1.0,
        "decided_by_rule": 1.0,
        "rule_equivalent": 1.0,
        "model_score": 0.0,
    }
    assert vague["decided_by_rule"] == 0.0
    assert vague["score"] == vague["model_score"]
    assert ignored["score"] == pytest.approx(outcome_scores(server.url, [(QUESTION, RIGHT)])[0])
    assert (late["score"], late["judged"]) == (0.0, 0.0)


def test_verl_batch_reward_manager_call(server: Any) -> None:
    import numpy as np

    # As verl's batch reward manager calls it: keyword lists, numpy object arrays for the
    # non-tensor columns, reward_kwargs last.
    info = {"question": QUESTION}
    try:
        out = compute_score_batch(
            data_sources=np.array(["openai/gsm8k"] * 3, dtype=object),
            solution_strs=[RIGHT, VAGUE, WRONG],
            ground_truths=["72", "72", "72"],
            extra_infos=np.array([info] * 3, dtype=object),
            base_url=server.url,
        )
    finally:
        verl.close()
    with vc.Client(server.url) as client:
        vague = client.outcome(question=QUESTION, response=VAGUE, reference="72")
    assert vague.decided_by == "model"
    assert [r["score"] for r in out] == [1.0, pytest.approx(vague.score), 0.0]
    assert [r["decided_by_rule"] for r in out] == [1.0, 0.0, 1.0]
    assert [r["model_score"] for r in out] == [0.0, pytest.approx(vague.score), 0.0]
    assert [r["judged"] for r in out] == [1.0, 1.0, 1.0]


async def test_verl_without_a_question_says_where_to_put_it(server: Any) -> None:
    with pytest.raises(ValueError, match="extra_info"):
        await compute_score("openai/gsm8k", RIGHT, "72", None, base_url=server.url)
