"""Probability calibrations of target ``compare`` on the real server: fit on labelled GSM8K
pairs, apply to /v1/judge/compare, defaults, refusals (docs/methods.md J.5).

Mechanics only (the default model is weak). Compare reads are not cached, so a second read of
a pair may move within the run's dtype tolerance; a calibrated answer is checked exactly
against the raw preferences it carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import special

from service.evals.compare import build_pairs
from service.evals.data import load_gsm8k_solutions
from tests.support.calibration_math import ece_of_bins

pytestmark = pytest.mark.engine

FIRST_QUESTION = 1305  # questions no other calibration test reads
QUESTIONS = 7  # 13 pairs; the first 10 are fitted
PAIRS = 10
FOLDS = 5  # 10 pairs: 5 of each label, 8 to fit each fold on
BINS = 4


@pytest.fixture(scope="module")
def solutions(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    lines = (data_dir / "gsm8k" / "example_model_solutions.jsonl").read_text().splitlines()
    path = tmp_path_factory.mktemp("pcal-compare") / "solutions.jsonl"
    path.write_text("\n".join(lines[FIRST_QUESTION : FIRST_QUESTION + QUESTIONS]) + "\n")
    return load_gsm8k_solutions(path, QUESTIONS)


@pytest.fixture(scope="module")
def pairs(solutions: list[Any]) -> list[dict[str, Any]]:
    """Labelled pairs sent the way preference data usually comes: the preferred one first."""
    built = build_pairs(solutions, PAIRS)
    assert len(built) == PAIRS
    return [
        {
            "question": p.question,
            "responses": [p.responses[p.correct], p.responses[1 - p.correct]],
            "preferred": 0,
        }
        for p in built
    ]


def fit(server: Any, examples: list[dict[str, Any]], **options: Any) -> httpx.Response:
    body = {"target": "compare", "examples": examples, "folds": FOLDS, "bins": BINS, **options}
    return httpx.post(server.url + "/v1/calibrations", json=body, timeout=600)


def compare(server: Any, question: str, responses: list[str], **options: Any) -> httpx.Response:
    body = {"question": question, "responses": responses, **options}
    return httpx.post(server.url + "/v1/judge/compare", json=body, timeout=300)


def compared(server: Any, question: str, responses: list[str], **options: Any) -> dict[str, Any]:
    r = compare(server, question, responses, **options)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.fixture(scope="module")
def cal(server: Any, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    r = fit(server, pairs, name="gsm8k pairs")
    assert r.status_code == 200, r.text
    fitted: dict[str, Any] = r.json()
    return fitted


def test_a_compare_fit_reports_what_its_reads_give(
    server: Any, pairs: list[dict[str, Any]], cal: dict[str, Any], prob_tol: float
) -> None:
    assert cal["id"].startswith("pcal_")
    assert (cal["target"], cal["method"], cal["mode"]) == ("compare", "temperature", "direct")
    # sent preferred-first, fitted on alternating orientations: both labels, half each
    assert (cal["examples"], cal["positives"]) == (PAIRS, PAIRS // 2)
    assert cal["usage"]["prompt_tokens"] > 0
    t = cal["parameters"]["temperature"]
    assert t > 0
    # The same pairs read again, raw: each pair's P(preferred over the other), oriented.
    p = np.array(
        [compared(server, ex["question"], ex["responses"])["preferences"][0][1] for ex in pairs]
    )
    y = np.array([1, 0] * (PAIRS // 2))
    z = np.where(y == 1, 1.0, -1.0) * special.logit(p)
    for figures, probs in (
        (cal["fit_set"]["raw"], special.expit(z)),
        (cal["fit_set"]["calibrated"], special.expit(z / t)),
    ):
        assert (figures["n"], figures["base_rate"]) == (PAIRS, 0.5)
        assert figures["mean_probability"] == pytest.approx(probs.mean(), abs=prob_tol)
        assert figures["brier"] == pytest.approx(np.mean((probs - y) ** 2), abs=2 * prob_tol)
        assert sum(b["count"] for b in figures["bins"]) == PAIRS
        assert figures["ece"] == pytest.approx(ece_of_bins(figures["bins"]))
    held = cal["held_out"]["calibrated"]
    assert held["ece"] == pytest.approx(ece_of_bins(held["bins"]))


def mapped(p: float, t: float) -> float:
    with np.errstate(divide="ignore"):
        return float(special.expit(special.logit(p) / t))


def test_a_calibrated_comparison_maps_its_raw_preferences_and_keeps_the_ranking(
    server: Any, pairs: list[dict[str, Any]], solutions: list[Any], cal: dict[str, Any]
) -> None:
    t = cal["parameters"]["temperature"]
    info = {"id": cal["id"], "method": "temperature", "parameters": cal["parameters"]}
    for ex in pairs[:3]:
        answer = compared(server, ex["question"], ex["responses"], calibration_id=cal["id"])
        raw = answer["raw_preferences"]
        assert answer["calibration"] == info
        assert answer["preferences"][0][1] == pytest.approx(mapped(raw[0][1], t), abs=1e-12)
        assert answer["preferences"][0][1] + answer["preferences"][1][0] == pytest.approx(1.0)
        scores = [r["score"] for r in answer["results"]]
        assert scores == [answer["preferences"][0][1], answer["preferences"][1][0]]
        # the raw score is the aggregation's (Bradley-Terry's win rate: the preference itself)
        raw_scores = [r["raw_score"] for r in answer["results"]]
        assert raw_scores == pytest.approx([raw[0][1], raw[1][0]], abs=1e-9)
        assert answer["ranking"][0] == int(raw[1][0] > raw[0][1])
    # Three responses: every preference mapped; each score aggregates two pairs, kept raw.
    item = solutions[0]
    texts = [c.solution for c in item.candidates[:3]]
    answer = compared(server, item.question, texts, calibration_id=cal["id"])
    raw = answer["raw_preferences"]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert answer["preferences"][i][j] == pytest.approx(mapped(raw[i][j], t), abs=1e-12)
    assert all(r["raw_score"] is None for r in answer["results"])
    plain = compared(server, item.question, texts, calibration_id="none")
    assert (plain["calibration"], plain["raw_preferences"]) == (None, None)
    assert all(r["raw_score"] is None for r in plain["results"])


def test_a_compare_default_maps_swap_reads_only(
    server: Any, pairs: list[dict[str, Any]], cal: dict[str, Any]
) -> None:
    url = server.url + "/v1/calibrations"
    put = httpx.put(url + "/defaults/compare", json={"calibration_id": cal["id"]})
    assert put.status_code == 200, put.text
    assert put.json()["defaults"]["compare"] == cal["id"]
    ex = pairs[0]
    try:
        assert compared(server, ex["question"], ex["responses"])["calibration"]["id"] == cal["id"]
        for other in ({"debias": "none"}, {"mode": "listwise"}, {"calibration_id": "none"}):
            assert compared(server, ex["question"], ex["responses"], **other)["calibration"] is None
    finally:
        assert httpx.delete(url + "/defaults/compare").status_code == 204
    assert compared(server, ex["question"], ex["responses"])["calibration"] is None


def outcome_examples(solutions: list[Any]) -> list[dict[str, Any]]:
    return [
        {"question": item.question, "response": c.solution, "label": int(c.is_correct)}
        for item in solutions
        for c in item.candidates
    ]


def test_a_calibration_of_another_target_is_refused_on_both_routes(
    server: Any, pairs: list[dict[str, Any]], solutions: list[Any], cal: dict[str, Any]
) -> None:
    body = {"target": "outcome", "examples": outcome_examples(solutions), "folds": FOLDS}
    r = httpx.post(server.url + "/v1/calibrations", json=body, timeout=600)
    assert r.status_code == 200, r.text
    outcome_cal = r.json()["id"]
    ex = pairs[0]
    refused = compare(server, ex["question"], ex["responses"], calibration_id=outcome_cal)
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "calibration_mismatch"
    assert "target 'outcome', not 'compare'" in refused.json()["error"]["message"]
    judged = httpx.post(
        server.url + "/v1/judge/outcome",
        json={
            "question": ex["question"],
            "response": ex["responses"][0],
            "calibration_id": cal["id"],
        },
        timeout=60,
    )
    assert judged.status_code == 422
    assert "target 'compare', not 'outcome'" in judged.json()["error"]["message"]
    assert httpx.delete(f"{server.url}/v1/calibrations/{outcome_cal}").status_code == 204


@pytest.mark.parametrize(
    ("change", "options", "says"),
    [
        (lambda ex: ex, {"method": "platt"}, "temperature only"),
        (lambda ex: [{**e, "preferred": 2} for e in ex], {}, "preferred must be 0 or 1"),
        (lambda ex: [{**ex[0], "preferred": "0"}, *ex[1:]], {}, "valid integer"),
        (lambda ex: ex[:7], {}, "at least 8"),
        (
            lambda ex: [
                {"question": e["question"], "response": e["responses"][0], "label": 1} for e in ex
            ],
            {},
            "not a compare example",
        ),
    ],
)
def test_a_compare_fit_that_cannot_be_made_is_refused_and_stores_nothing(
    server: Any, pairs: list[dict[str, Any]], change: Any, options: dict[str, Any], says: str
) -> None:
    before = httpx.get(server.url + "/v1/calibrations").json()["data"]
    r = fit(server, change(pairs), **options)
    assert r.status_code == 422, r.text
    assert says in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/calibrations").json()["data"] == before


def test_a_compare_calibration_on_a_listwise_read_is_refused(
    server: Any, pairs: list[dict[str, Any]], cal: dict[str, Any]
) -> None:
    ex = pairs[0]
    r = compare(server, ex["question"], ex["responses"], calibration_id=cal["id"], mode="listwise")
    assert r.status_code == 422
    assert "debias='swap'" in r.json()["error"]["message"]
