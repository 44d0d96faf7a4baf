"""POST /v1/judge/compare and ``method: "compare"`` through a real server and engine.

The small model is a weak judge with a strong first-letter bias: these tests check the
mechanics (what is read, in which orders, and that every number is recomputed from the reads),
never which response it prefers.
"""

from __future__ import annotations

import itertools
import json
import math
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from verifier_client.trl import reward_function

from service.scoring import compare as scoring
from service.scoring.debias import pride
from service.scoring.prompts import token_variants

QUESTION = "Tom has 3 boxes with 4 apples each. He eats 2 apples. How many apples are left?"
RESPONSES = [
    "3 * 4 = 12 apples. 12 - 2 = 10. The answer is 10.",
    "3 + 4 = 7 apples. 7 - 2 = 5. The answer is 5.",
    "3 * 4 = 12 apples. 12 + 2 = 14. The answer is 14.",
]


def compare(url: str, **body: Any) -> httpx.Response:
    payload = {"question": QUESTION, "responses": RESPONSES, **body}
    return httpx.post(url + "/v1/judge/compare", json=payload, timeout=300)


def reads_of(body: dict[str, Any]) -> list[scoring.Read]:
    return [scoring.Read(tuple(r["order"]), tuple(r["probabilities"])) for r in body["reads"]]


def check_recomputed(body: dict[str, Any], n: int) -> None:
    """Matrix, consistency, rewards and ranking all follow from the reads returned."""
    reads = reads_of(body)
    rewards, matrix = scoring.aggregate(n, body["mode"], body["aggregation"], reads)
    for i, j in itertools.permutations(range(n), 2):
        assert body["preferences"][i][j] == pytest.approx(matrix[i][j], abs=1e-9)
        assert body["preferences"][i][j] + body["preferences"][j][i] == pytest.approx(1.0)
    assert all(body["preferences"][i][i] is None for i in range(n))
    assert [r["reward"] for r in body["results"]] == pytest.approx(rewards.rewards, abs=1e-9)
    assert [r["score"] for r in body["results"]] == pytest.approx(rewards.scores, abs=1e-9)
    assert body["position_consistency"] == scoring.position_consistency(n, reads)
    scores = [r["score"] for r in body["results"]]
    assert body["ranking"] == sorted(range(n), key=lambda i: (-scores[i], i))
    for r in body["reads"]:
        assert sum(r["probabilities"]) == pytest.approx(1.0)


def test_pairwise_reads_every_pair_both_ways_and_fits_bradley_terry(
    server: Any, prob_tol: float
) -> None:
    r = compare(server.url)
    assert r.status_code == 200, r.text
    b = r.json()
    assert (b["mode"], b["aggregation"], b["debias"]) == ("pairwise", "bradley_terry", "swap")
    assert sorted(tuple(x["order"]) for x in b["reads"]) == sorted(
        itertools.permutations(range(3), 2)
    )
    assert b["passes"] == 6
    assert b["usage"]["engine_calls"] == 6
    assert b["usage"]["generated_tokens"] == 6  # one label slot per read
    check_recomputed(b, 3)
    assert sum(b["results"][i]["reward"] for i in range(3)) == pytest.approx(0.0, abs=1e-9)
    assert b["first_position_rate"] == pytest.approx(
        sum(x["probabilities"][0] for x in b["reads"]) / 6
    )
    wr = compare(server.url, aggregation="win_rate").json()
    check_recomputed(wr, 3)
    for i, j in itertools.permutations(range(3), 2):
        assert wr["preferences"][i][j] == pytest.approx(b["preferences"][i][j], abs=prob_tol)


def test_without_debias_each_pair_is_read_once_and_reads_as_in_both_orders(
    server: Any, prob_tol: float
) -> None:
    both = compare(server.url).json()
    once = compare(server.url, debias="none").json()
    assert [tuple(x["order"]) for x in once["reads"]] == [(0, 1), (0, 2), (1, 2)]
    assert once["position_consistency"] is None
    check_recomputed(once, 3)
    same = {tuple(x["order"]): x["probabilities"] for x in both["reads"]}
    for x in once["reads"]:
        # the same prompt, read alone or in a bigger batch
        assert x["probabilities"] == pytest.approx(same[tuple(x["order"])], abs=prob_tol)


def test_a_read_is_the_models_next_token_probability_of_the_letters(
    server: Any, tokenizer: Any, model_dir: Path, prob_tol: float
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    b = compare(server.url, responses=RESPONSES[:2]).json()
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    labels = [token_variants(tokenizer, x) for x in "AB"]
    for read in b["reads"]:
        shown = [RESPONSES[i] for i in read["order"]]
        ids = scoring.compare_prompt_ids(tokenizer, QUESTION, shown)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)
        per = [torch.logsumexp(logp[v], 0).item() for v in labels]
        direct = [math.exp(v - max(per)) for v in per]
        assert read["probabilities"] == pytest.approx(
            [v / sum(direct) for v in direct], abs=prob_tol
        )
    assert b["usage"]["prompt_tokens"] == sum(
        len(scoring.compare_prompt_ids(tokenizer, QUESTION, [RESPONSES[i] for i in x["order"]]))
        for x in b["reads"]
    )


def test_the_shared_question_is_prefilled_once(server: Any, tokenizer: Any) -> None:
    from service.engine.vllm_engine import CPU_BLOCK_SIZE

    question = f"Case {uuid.uuid4()}. " + QUESTION * 12  # fresh, several cache blocks long
    b = compare(server.url, question=question).json()
    first, second = (
        scoring.compare_prompt_ids(tokenizer, question, [RESPONSES[i] for i in order])
        for order in ((0, 1), (1, 0))
    )
    shared = next(k for k, (x, y) in enumerate(zip(first, second, strict=False)) if x != y)
    blocks = shared // CPU_BLOCK_SIZE
    assert blocks >= 2
    assert b["usage"]["cached_tokens"] >= 5 * blocks * CPU_BLOCK_SIZE  # the 5 reads after one


def test_listwise_reads_cyclic_orders_and_averages_per_response(server: Any) -> None:
    b = compare(server.url, mode="listwise").json()
    assert (b["aggregation"], b["debias"], b["passes"]) == ("mean_probability", "permute", 3)
    orders = [tuple(x["order"]) for x in b["reads"]]
    assert orders == scoring.read_orders(3, "listwise", "permute", 3)
    check_recomputed(b, 3)
    assert sum(r["score"] for r in b["results"]) == pytest.approx(1.0)
    two = compare(server.url, mode="listwise", permutations=2, aggregation="bradley_terry").json()
    assert two["passes"] == 2
    check_recomputed(two, 3)
    plain = compare(server.url, mode="listwise", debias="none").json()
    assert plain["passes"] == 1
    assert plain["position_consistency"] is None


def test_listwise_pride_divides_a_stored_letter_prior_out(
    server: Any, data_dir: Path, prob_tol: float
) -> None:
    # PriDe's letter prior for 3 options, fitted on ARC questions cut to their first 3
    items = []
    with (data_dir / "arc" / "ARC-Challenge-Dev.jsonl").open() as fh:
        for line in itertools.islice(fh, 2):
            q = json.loads(line)["question"]
            items.append({"question": q["stem"], "options": [c["text"] for c in q["choices"]][:3]})
    cal = httpx.post(
        server.url + "/v1/mcq/calibrations",
        json={"method": "pride", "items": items[:2]},
        timeout=300,
    ).json()
    assert cal["k"] == 3
    raw = compare(server.url, mode="listwise", debias="none").json()
    b = compare(server.url, mode="listwise", debias="pride", calibration_id=cal["id"]).json()
    assert b["passes"] == 1
    expected = pride(raw["reads"][0]["probabilities"], cal["params"]["prior"])
    assert b["reads"][0]["probabilities"] == pytest.approx(expected, abs=prob_tol)
    assert b["first_position_rate"] == pytest.approx(raw["first_position_rate"], abs=prob_tol)
    # a calibration for another option count is refused before anything runs
    r = compare(
        server.url,
        responses=RESPONSES[:2],
        mode="listwise",
        debias="pride",
        calibration_id=cal["id"],
    )
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "calibration_mismatch"


def test_reasoning_writes_a_comparison_before_each_read(server: Any) -> None:
    b = compare(
        server.url,
        responses=RESPONSES[:2],
        reasoning_tokens=24,
        samples=2,
        seed=3,
        reference="10",
        criteria="The final number must be right.",
    ).json()
    assert b["passes"] == 4
    assert [x["sample"] for x in b["reads"]] == [0, 1, 0, 1]
    assert all(x["reasoning"] is not None for x in b["reads"])
    assert 0 < b["usage"]["generated_tokens"] <= 4 * (24 + 1)
    assert b["usage"]["engine_calls"] == 8
    check_recomputed(b, 2)


def test_score_rerank_and_get_reward_compare_like_the_endpoint(
    server: Any, prob_tol: float
) -> None:
    direct = compare(server.url).json()
    s = httpx.post(
        server.url + "/v1/score",
        json={"question": QUESTION, "responses": RESPONSES, "method": "compare"},
        timeout=300,
    ).json()
    assert s["method"] == "compare"
    finals = [r["final"] for r in s["results"]]
    assert finals == pytest.approx([r["score"] for r in direct["results"]], abs=prob_tol)
    assert s["comparison"]["preferences"][0][1] == pytest.approx(
        direct["preferences"][0][1], abs=prob_tol
    )
    assert s["ranking"] == sorted(range(3), key=lambda i: (-finals[i], i))
    rr = httpx.post(
        server.url + "/v1/rerank",
        json={"query": QUESTION, "documents": RESPONSES, "method": "compare", "top_n": 2},
        timeout=300,
    ).json()
    # Two reads of the model: the same scores within the dtype's tolerance, each list ranked
    # by its own (in bf16 two near-tied responses may swap between reads).
    got = [(x["index"], x["relevance_score"]) for x in rr["results"]]
    assert len(got) == 2
    assert [v for _, v in got] == sorted((v for _, v in got), reverse=True)
    assert [v for _, v in got] == pytest.approx([finals[i] for i, _ in got], abs=prob_tol)
    assert [finals[i] for i, _ in got] == pytest.approx(
        sorted(finals, reverse=True)[:2], abs=prob_tol
    )
    # /get_reward: the prompt's three queries in one comparison, the lone one as an outcome
    prompts = [QUESTION + "\nAnswer: "] * 3 + ["What is 2 + 2?\nAnswer: "]
    queries = [p + t for p, t in zip(prompts, [*RESPONSES, "4"], strict=True)]
    g = httpx.post(
        server.url + "/get_reward",
        json={"query": queries, "prompts": prompts, "method": "compare"},
        timeout=300,
    ).json()
    assert g["extra_logs"]["compare_group_size"] == [3.0, 3.0, 3.0, 0.0]
    grouped = compare(server.url, question=QUESTION + "\nAnswer: ").json()["results"]
    assert g["rewards"][:3] == pytest.approx([r["score"] for r in grouped], abs=prob_tol)
    assert 0.0 < g["rewards"][3] < 1.0  # judged as an outcome
    assert g["extra_logs"]["model_score"][3] == g["rewards"][3]


def test_trl_hook_compares_a_prompts_completions_in_one_call(server: Any, prob_tol: float) -> None:
    fn = reward_function(server.url, method="compare")
    got = fn(prompts=[QUESTION] * 3, completions=RESPONSES)
    assert got == pytest.approx(
        [r["score"] for r in compare(server.url).json()["results"]], abs=prob_tol
    )


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"responses": ["only one"]}, 422, "at least 2"),
        ({"responses": [str(i) for i in range(17)]}, 422, "over 256"),
        ({"mode": "listwise", "debias": "swap"}, 422, "does not apply"),
        ({"debias": "none", "permutations": 2}, 422, "permutations"),
        ({"mode": "listwise", "debias": "pride"}, 422, "calibration_id"),
        ({"samples": 2}, 422, "reasoning_tokens"),
        ({"responses": ["a", "x" * 40_000]}, 413, "responses[1]"),
        ({"reasoning_tokens": 100_000}, 422, "reasoning_tokens"),
        ({"mode": "listwise", "debias": "pride", "calibration_id": "cal_nope"}, 422, "cal_nope"),
        ({"max_eval_tokens": 10}, 422, "max_eval_tokens=10"),
    ],
)
def test_bad_comparisons_are_refused_before_they_run(
    server: Any, body: dict[str, Any], status: int, needle: str
) -> None:
    r = compare(server.url, **body)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]["message"]


def test_a_comparison_too_long_for_the_model_is_a_422_naming_its_responses(server: Any) -> None:
    max_len = httpx.get(server.url + "/v1/models", timeout=10).json()["data"][0]["max_model_len"]
    long = "word " * (max_len * 2 // 3)  # one fits the model, a pair does not
    r = compare(server.url, responses=[long, long, "short"])
    assert r.status_code == 422, r.text
    assert "responses[0], responses[1]" in r.json()["error"]["message"]
