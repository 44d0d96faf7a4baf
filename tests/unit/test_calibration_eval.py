"""`verifier eval calibration`'s harness on a fake service (httpx.MockTransport), its data
readers, its table and its plot; the engine-backed run is tests/e2e/test_calibration_http.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import special

from service.evals import calibration as harness
from service.evals import decision_calibration as decision_harness
from service.evals.compare import build_pairs
from service.evals.data import load_gsm8k_solutions, load_processbench, read_arc
from service.evals.plots import reliability_plot
from service.evals.report import (
    calibration_grid,
    calibration_rows,
    decision_calibration_grid,
    decision_calibration_rows,
    print_table,
)
from tests.support.compare_answers import pair_answer, write_solutions

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "data" / "gsm8k" / "example_model_solutions.jsonl"
PROCESSBENCH = ROOT / "data" / "processbench" / "gsm8k.json"


def test_gsm8k_examples_are_the_labelled_solutions_in_order() -> None:
    examples = harness.gsm8k_examples(GSM8K, 10)
    items = load_gsm8k_solutions(GSM8K, 3)
    expected = [(item, c) for item in items for c in item.candidates][:10]
    assert len(examples) == 10
    for example, (item, c) in zip(examples, expected, strict=True):
        assert (example.question, example.response) == (item.question, c.solution)
        assert example.label == int(c.is_correct)
    assert examples[5].id == f"1:{items[1].candidates[1].solver_name}"


def test_processbench_examples_interleave_the_classes() -> None:
    examples = harness.processbench_examples(PROCESSBENCH, 9)
    assert [e.label for e in examples] == [0, 1, 0, 1, 0, 1, 0, 1, 0]
    items = {i.id: i for i in load_processbench(PROCESSBENCH)}
    for e in examples:
        item = items[e.id]
        assert e.label == int(item.final_answer_correct)
        assert e.response == "\n\n".join(item.steps)
        assert e.question == item.problem


def test_options_are_the_outcome_requests() -> None:
    assert harness.outcome_options("reasoning", 64) == {
        "mode": "reasoning",
        "reasoning_tokens": 64,
        "verifier": "model",
    }
    with pytest.raises(ValueError, match="mode"):
        harness.outcome_options("single_pass", 64)
    with pytest.raises(ValueError, match="dataset 'x'"):
        harness.load_examples("x", GSM8K, 4)


def fake_outcome_server(
    labels: dict[str, int], seen: list[dict[str, Any]], refuse: str
) -> httpx.MockTransport:
    """An overconfident judge that ranks fairly well: logit +-4 by the true label plus a fixed
    pseudo-random offset per response; refuses the response ``refuse`` with a 422."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if body["response"] == refuse:
            err = {"type": "invalid_request", "message": "response: too long"}
            return httpx.Response(422, json={"error": err})
        offset = zlib.crc32(body["response"].encode()) % 1000 / 1000 * 6 - 3
        logit = 4.0 * (2 * labels[body["response"]] - 1) + 2 * offset
        return httpx.Response(
            200,
            json={
                "score": float(special.expit(logit)),
                "logit": logit,
                "verdict": int(logit >= 0),
                "mode": body["mode"],
                "model": "fake-model",
                "decided_by": "model",
                "usage": {"prompt_tokens": 10, "generated_tokens": 1, "total_tokens": 11},
            },
        )

    return httpx.MockTransport(handler)


async def test_run_calibration_on_a_fake_service(tmp_path: Path) -> None:
    examples = harness.gsm8k_examples(GSM8K, 41)
    labels = {e.response: e.label for e in examples}
    seen: list[dict[str, Any]] = []
    refused = examples[7]
    result = await harness.run_calibration(
        "http://svc",
        GSM8K,
        "gsm8k",
        41,
        "direct",
        32,
        folds=4,
        n_bins=5,
        seed=1,
        concurrency=3,
        transport=fake_outcome_server(labels, seen, refused.response),
    )
    assert len(seen) == 41
    for body in seen:  # the ordinary user request: model verifier, no reference
        assert (body["verifier"], body["mode"], body["reasoning_tokens"]) == ("model", "direct", 32)
        assert "reference" not in body or body["reference"] is None
    error = "HTTP 422 invalid_request: response: too long"
    assert result["failed"] == [{"id": refused.id, "error": error}]
    assert result["n_items"] == 40
    assert [i["id"] for i in result["items"]] == [e.id for e in examples if e is not refused]
    assert result["usage"]["total_tokens"] == 11 * 40
    assert result["config"]["model"] == "fake-model"
    assert result["config"]["target"] == "outcome"
    for item in result["items"]:
        assert item["held_out"]["raw"] == pytest.approx(special.expit(item["logit"]))
    raw, temp = result["held_out"]["raw"], result["held_out"]["temperature"]
    assert raw["auroc_folds"] == temp["auroc_folds"] == result["held_out"]["platt"]["auroc_folds"]
    assert "probabilities" not in raw  # moved into the rows
    assert 0 < raw["ece_noise"]["mean"] <= raw["ece_noise"]["q90"]
    assert result["parameters"]["temperature"]["temperature"] > 1  # the fake is overconfident
    assert sum(b["count"] for b in raw["metrics"]["bins"]) == 40

    out = tmp_path / "cal.png"
    reliability_plot(result, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = dict(calibration_rows(result))
    assert rows["items (failed)"] == "40 (1)"
    print_table(calibration_grid(result))


def test_a_single_class_is_refused_by_the_fit() -> None:
    examples = [e for e in harness.gsm8k_examples(GSM8K, 40) if e.label == 0][:12]
    reads = [harness.Read(e, 1.0, 0.7) for e in examples]
    with pytest.raises(ValueError, match="all 12 labels are 0"):
        harness.summarize(reads, 5, 10, 0)


def test_questions_without_a_pair_do_not_shorten_the_pairs(tmp_path: Path) -> None:
    data = tmp_path / "solutions.jsonl"
    # two questions all right (no pair), then one with 1 right and 3 wrong (3 pairs)
    write_solutions(data, [[True] * 4, [True] * 4, [True, False, False, False]])
    examples = harness.pair_examples(data, 2)
    assert [e.id.split(":")[0] for e in examples] == ["2", "2"]


def test_pair_examples_are_the_compare_pairs_in_alternating_orientation() -> None:
    examples = harness.pair_examples(GSM8K, 6)
    pairs = build_pairs(load_gsm8k_solutions(GSM8K, 6), 6)
    assert [e.label for e in examples] == [1, 0, 1, 0, 1, 0]
    for e, p in zip(examples, pairs, strict=True):
        assert (e.question, e.responses, e.correct) == (p.question, list(p.responses), p.correct)
    assert harness.compare_options("direct", 64)["reasoning_tokens"] is None
    assert harness.compare_options("reasoning", 64)["reasoning_tokens"] == 64


async def test_run_calibration_on_pairs_reads_each_by_comparison() -> None:
    examples = harness.pair_examples(GSM8K, 20)
    seen: list[dict[str, Any]] = []
    p_correct = {}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        first = body["responses"][0]
        e = next(x for x in examples if x.response == first and x.other == body["responses"][1])
        p = 0.55 + zlib.crc32(first.encode()) % 400 / 1000  # P(correct over wrong) > 1/2
        p_correct[e.id] = p
        p01 = p if e.correct == 0 else 1 - p
        return httpx.Response(200, json=pair_answer(p01))

    result = await harness.run_calibration(
        "http://svc",
        GSM8K,
        "gsm8k-pairs",
        20,
        folds=4,
        n_bins=5,
        transport=httpx.MockTransport(handler),
    )
    assert len(seen) == 20
    assert all(
        (b["mode"], b["debias"], b["calibration_id"]) == ("pairwise", "swap", "none") for b in seen
    )
    assert result["config"]["target"] == "compare"
    assert result["base_rate"] == 0.5
    for item, e in zip(result["items"], examples, strict=True):
        z = special.logit(p_correct[e.id])
        assert item["logit"] == pytest.approx(z if e.label == 1 else -z)
    # every pair ranks the correct solution first: each positive logit above each negative one
    assert result["held_out"]["raw"]["metrics"]["auroc"] == 1.0


ARC = ROOT / "data" / "arc" / "ARC-Challenge-Dev.jsonl"


def test_arc_decisions_ask_a_choice_and_a_predicate_with_both_labels() -> None:
    examples, skipped = decision_harness.arc_decision_examples(ARC, 6)
    assert len(examples) == 6
    items, _ = read_arc(ARC)
    usable = items[:6]
    assert skipped == []
    for n, ((item_id, ex), item) in enumerate(zip(examples, usable, strict=True)):
        assert item_id == item.id
        assert ex["input"] == item.question
        choice, predicate = ex["questions"]
        assert [c["value"] for c in choice["choices"]] == item.options
        assert ex["answers"] == [item.options[item.answer_index], n % 2 == 0]
        named = item.answer_index if n % 2 == 0 else (item.answer_index + 1) % item.k
        assert predicate["instructions"].endswith(item.options[named])
        assert decision_harness.answer_indexes(ex) == [item.answer_index, 0 if n % 2 == 0 else 1]


def decision_answer(body: dict[str, Any], right: bool, p_true: float) -> dict[str, Any]:
    """A fake decision: the choice sure of the answer (``right``) or of another option."""
    values = [c["value"] for c in body["questions"][0]["choices"]]
    k = len(values)
    probs = [0.02 / (k - 1)] * k
    probs[0 if right else 1] = 0.98
    return {
        "answers": [
            {
                "type": "choice",
                "choice": values[int(max(range(k), key=lambda i: probs[i]))],
                "probabilities": [
                    {"value": v, "probability": p} for v, p in zip(values, probs, strict=True)
                ],
                "confidence": max(probs),
            },
            {"type": "predicate", "probability": p_true},
        ],
        "model": "fake",
        "usage": {"prompt_tokens": 10, "total_tokens": 12, "engine_calls": 2},
    }


async def test_run_decision_calibration_fits_a_temperature_per_type() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        n = len(seen)
        # 0.98 sure of the first option, right half the time: overconfident
        return httpx.Response(200, json=decision_answer(body, n % 2 == 0, 0.9))

    result = await decision_harness.run_decision_calibration(
        "http://svc", ARC, 20, folds=4, n_bins=5, transport=httpx.MockTransport(handler)
    )
    assert len(seen) == 20
    assert all(b["calibration_id"] == "none" and b["mode"] == "direct" for b in seen)
    assert result["config"]["target"] == "decisions"
    assert (result["n_items"], result["n_questions"], result["n_failed"]) == (20, 40, 0)
    assert set(result["types"]) == {"choice", "predicate"}
    # sure and right only about half the time: the fitted temperatures soften both
    assert all(t > 1 for t in result["temperatures"].values())
    held = result["held_out"]
    assert held["temperature"]["metrics"]["ece"] < held["raw"]["metrics"]["ece"]
    assert len(result["items"]) == 40
    # each row's held-out confidence: the softmax of its read through its fold's temperature
    fold_t = {k: t["fold_temperatures"] for k, t in result["types"].items()}
    for item in result["items"]:
        probs = np.asarray(item["raw"])
        t = fold_t[item["kind"]][item["fold"]]
        tempered = probs ** (1 / t) / np.sum(probs ** (1 / t))
        assert item["held_out"]["raw"] == pytest.approx(probs.max())
        assert item["held_out"]["temperature"] == pytest.approx(tempered.max())
    noise = held["temperature"]["ece_noise"]
    assert 0 < noise["mean"] <= noise["q90"] < 1
    print_table(decision_calibration_grid(result))
    assert dict(decision_calibration_rows(result))["items, questions (failed)"] == "20, 40 (0)"


def test_an_arc_item_whose_options_repeat_is_skipped(tmp_path: Path) -> None:
    lines = ARC.read_text().splitlines()[:3]
    row = json.loads(lines[1])
    row["question"]["choices"][1]["text"] = row["question"]["choices"][0]["text"]
    path = tmp_path / "arc.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n")
    examples, skipped = decision_harness.arc_decision_examples(path, None)
    assert [item_id for item_id, _ in examples] == [
        json.loads(lines[0])["id"],
        json.loads(lines[2])["id"],
    ]
    assert skipped == [{"id": row["id"], "reason": "its options repeat"}]
    # the predicate labels alternate over the examples kept
    assert [ex["answers"][1] for _, ex in examples] == [True, False]
