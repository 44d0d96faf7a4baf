"""Multiple-choice answers, debiasing and calibrations through a real server and engine."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

ITEM = {
    "question": "Which of these is a fruit?",
    "options": ["a hammer", "an apple", "a brick", "a cloud"],
}


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=300)


@pytest.fixture(scope="module")
def arc(data_dir: Path) -> list[dict[str, Any]]:
    items = []
    with (data_dir / "arc" / "ARC-Challenge-Dev.jsonl").open() as fh:
        for line in itertools.islice(fh, 8):
            q = json.loads(line)["question"]
            items.append({"question": q["stem"], "options": [c["text"] for c in q["choices"]]})
    return items


def test_probabilities_over_the_letters(server: Any, arc: list[dict[str, Any]]) -> None:
    for item in arc[:4]:
        r = post(server.url, "/v1/mcq/answer", item)
        assert r.status_code == 200, r.text
        b = r.json()
        k = len(item["options"])
        assert len(b["probs_raw"]) == len(b["probs"]) == k
        assert abs(sum(b["probs_raw"]) - 1) < 1e-6
        assert b["probs"] == b["probs_raw"]  # debias none
        assert b["answer_index"] == max(range(k), key=lambda i: (b["probs"][i], -i))
        assert b["answer_letter"] == "ABCDEFGHIJ"[b["answer_index"]]
        assert b["debias"]["method"] == "none"
        assert b["usage"]["engine_calls"] == 1
        assert b["usage"]["generated_tokens"] == 1


def test_batch_is_one_engine_call_per_item_and_matches_single(
    server: Any, arc: list[dict[str, Any]], prob_tol: float
) -> None:
    # The same item in every order: each result belongs to its own order of options.
    orders = [ITEM["options"][i:] + ITEM["options"][:i] for i in range(4)]
    items = [*arc, *({"question": ITEM["question"], "options": o} for o in orders)]
    b = post(server.url, "/v1/mcq/answer/batch", {"items": items}).json()
    assert len(b["results"]) == len(items)
    assert b["usage"]["engine_calls"] == len(items)
    for item, res in zip(items[-4:], b["results"][-4:], strict=True):
        single = post(server.url, "/v1/mcq/answer", item).json()
        # bf16 moves each letter logprob by whole ulps between batched and single reads.
        assert single["probs_raw"] == pytest.approx(res["probs_raw"], abs=prob_tol)
    # Rotating the options moves each text to another letter: the per-letter probabilities
    # change with the order (the model reads the texts), and each result sums to one.
    assert len({tuple(round(p, 6) for p in r["probs_raw"]) for r in b["results"][-4:]}) > 1


def test_popdebias_moves_the_answer_only_toward_less_popular_options(
    server: Any, prob_tol: float
) -> None:
    pops = [1.0, 0.6, 0.3, 0.0]
    raw = post(server.url, "/v1/mcq/answer", {**ITEM, "popularity": pops}).json()
    strong = {**ITEM, "popularity": pops, "debias": "popdebias", "popdebias_lambda": 8.0}
    b = post(server.url, "/v1/mcq/answer", strong).json()
    assert b["probs_raw"] == pytest.approx(raw["probs_raw"], abs=prob_tol)
    assert b["debias"]["params"]["lambda"] == 8.0
    assert b["probs"][0] < b["probs_raw"][0]  # the most popular loses
    assert b["probs"][3] > b["probs_raw"][3]  # the least popular gains
    assert pops[b["answer_index"]] <= pops[raw["answer_index"]]
    zero = post(server.url, "/v1/mcq/answer", {**strong, "popdebias_lambda": 0.0}).json()
    assert zero["probs"] == zero["probs_raw"]
    assert zero["answer_index"] == max(range(4), key=lambda i: (zero["probs_raw"][i], -i))


def test_model_popularity_is_min_max_normalised(server: Any) -> None:
    body = {**ITEM, "popularity": "model", "debias": "popdebias", "popdebias_lambda": 1.0}
    b = post(server.url, "/v1/mcq/answer", body).json()
    pop = b["popularity"]
    assert len(pop) == 4
    assert min(pop) == 0.0
    assert max(pop) == 1.0
    assert b["usage"]["engine_calls"] == 1 + 4  # the letters, then one read per option text


def test_contextual_without_calibration_reads_content_free_inputs(server: Any) -> None:
    b = post(server.url, "/v1/mcq/answer", {**ITEM, "debias": "contextual"}).json()
    p_cf = b["debias"]["params"]["p_cf"]
    assert abs(sum(p_cf) - 1) < 1e-6
    expected = [p / c for p, c in zip(b["probs_raw"], p_cf, strict=True)]
    assert b["probs"] == pytest.approx([v / sum(expected) for v in expected], rel=1e-9)
    assert b["usage"]["engine_calls"] == 1 + 3


def test_calibrations_fit_read_use_and_delete(server: Any, arc: list[dict[str, Any]]) -> None:
    four = [it for it in arc if len(it["options"]) == 4][:3]
    r = post(server.url, "/v1/mcq/calibrations", {"method": "pride", "items": four})
    assert r.status_code == 200, r.text
    cal = r.json()
    assert cal["id"].startswith("cal_")
    assert cal["k"] == 4
    assert cal["cost"]["forward_passes"] == 3 * 4  # K cyclic permutations per item
    assert cal["usage"]["engine_calls"] == 12
    prior = cal["params"]["prior"]
    assert abs(sum(prior) - 1) < 1e-6
    got = httpx.get(f"{server.url}/v1/mcq/calibrations/{cal['id']}").json()
    assert got["params"] == cal["params"]
    listed = httpx.get(f"{server.url}/v1/mcq/calibrations").json()["data"]
    assert cal["id"] in [c["id"] for c in listed]
    used = post(
        server.url, "/v1/mcq/answer", {**ITEM, "debias": "pride", "calibration_id": cal["id"]}
    ).json()
    expected = [
        math.log(p + 1e-10) - math.log(q + 1e-10)
        for p, q in zip(used["probs_raw"], prior, strict=True)
    ]
    top = max(expected)
    norm = sum(math.exp(v - top) for v in expected)
    assert used["probs"] == pytest.approx([math.exp(v - top) / norm for v in expected], rel=1e-9)
    assert used["debias"]["calibration_id"] == cal["id"]
    # Fitted for K=4: a 3-option item is refused before it runs.
    three = {"question": "q?", "options": ["x", "y", "z"], "debias": "pride"}
    r = post(server.url, "/v1/mcq/answer", {**three, "calibration_id": cal["id"]})
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "calibration_mismatch"
    r = post(
        server.url, "/v1/mcq/answer", {**ITEM, "debias": "contextual", "calibration_id": cal["id"]}
    )
    assert r.json()["error"]["type"] == "calibration_mismatch"
    assert httpx.delete(f"{server.url}/v1/mcq/calibrations/{cal['id']}").status_code == 204
    assert httpx.get(f"{server.url}/v1/mcq/calibrations/{cal['id']}").status_code == 404


def test_popdebias_calibration_fits_lambda_label_free(
    server: Any, arc: list[dict[str, Any]]
) -> None:
    items = [{**it, "popularity": "model"} for it in arc]
    cal = post(server.url, "/v1/mcq/calibrations", {"method": "popdebias", "items": items}).json()
    assert math.isfinite(cal["params"]["lambda"])
    assert cal["k"] is None  # usable for any K
    binned = post(
        server.url, "/v1/mcq/calibrations", {"method": "popdebias_binned", "items": items}
    ).json()
    assert len(binned["params"]["log_pi"]) == 3
    for c in (cal, binned):
        b = post(
            server.url,
            "/v1/mcq/answer",
            {
                **ITEM,
                "popularity": [0.9, 0.5, 0.2, 0.1],
                "debias": "popdebias",
                "calibration_id": c["id"],
            },
        ).json()
        assert abs(sum(b["probs"]) - 1) < 1e-6, b


BAD = [
    ({**ITEM, "options": [f"o{i}" for i in range(11)]}, "options"),
    ({**ITEM, "options": []}, "options"),
    ({**ITEM, "options": ["a", " "]}, "options[1]"),
    ({**ITEM, "popularity": [0.1, 0.2]}, "popularity has 2 values"),
    ({**ITEM, "popularity": [0.1, 0.2, 1.5, 0.0]}, "[0, 1]"),
    ({**ITEM, "popularity": [0.1, 0.2, -0.1, 0.0]}, "[0, 1]"),
    ({**ITEM, "debias": "pride"}, "calibration_id"),
    ({**ITEM, "debias": "popdebias", "popdebias_lambda": 1}, "popularity"),
    ({**ITEM, "debias": "magic"}, "debias"),
]


@pytest.mark.parametrize(("body", "needle"), BAD)
def test_bad_mcq_requests_are_typed_422(server: Any, body: dict[str, Any], needle: str) -> None:
    r = post(server.url, "/v1/mcq/answer", body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "invalid_request"
    assert needle in r.json()["error"]["message"]


def test_unknown_calibration_is_a_typed_422(server: Any) -> None:
    body = {**ITEM, "debias": "pride", "calibration_id": "cal_doesnotexist1"}
    r = post(server.url, "/v1/mcq/answer", body)
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "unknown_calibration"
    assert httpx.get(f"{server.url}/v1/mcq/calibrations/cal_nope12345").status_code == 404
