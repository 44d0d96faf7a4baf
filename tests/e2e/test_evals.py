"""Evaluation harnesses (`verifier eval ...`) end to end against the real server.

The default model is weak, so these tests check mechanics (the metric matches the predictions,
the pick matches the scores), never quality.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from service.evals.cli import eval_app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "processbench3.json"
pytestmark = pytest.mark.engine


def run_cli(*args: str) -> None:
    result = CliRunner().invoke(eval_app, list(args))
    assert result.exit_code == 0, f"{result.output}\n{result.stderr}\n{result.exception!r}"


def percent_matching(pairs: list[tuple[int | None, int]]) -> float:
    return 100.0 * sum(pred == label for pred, label in pairs) / len(pairs)


@pytest.mark.parametrize("mode", ["direct", "single_pass"])
def test_processbench_metric_matches_predictions(server: Any, tmp_path: Path, mode: str) -> None:
    out = tmp_path / f"pb-{mode}.json"
    run_cli(
        "processbench",
        *("--data", str(FIXTURE), "--mode", mode, "--url", server.url, "--output", str(out)),
    )
    result = json.loads(out.read_text())
    fixture = json.loads(FIXTURE.read_text())
    items = result["items"]

    assert [i["id"] for i in items] == [f["id"] for f in fixture]
    assert [i["label"] for i in items] == [f["label"] for f in fixture]
    for item, raw in zip(items, fixture, strict=True):
        assert item["error"] is None
        assert len(item["step_scores"]) == len(raw["steps"])
        assert -1 <= item["pred"] < len(raw["steps"])

    # docs/methods.md A.9 by hand: acc_err over items with an error (label != -1), acc_corr over
    # fully correct items (label == -1); F1 = 2 * acc_err * acc_corr / (acc_err + acc_corr), 0 if
    # both are 0.
    pairs = [(i["pred"], i["label"]) for i in items]
    acc_err = percent_matching([(p, y) for p, y in pairs if y != -1])
    acc_corr = percent_matching([(p, y) for p, y in pairs if y == -1])
    f1 = 0.0 if acc_err + acc_corr == 0 else 2 * acc_err * acc_corr / (acc_err + acc_corr)
    metric = result["metric"]
    assert metric["acc_err"] == pytest.approx(acc_err)
    assert metric["acc_corr"] == pytest.approx(acc_corr)
    assert metric["f1"] == pytest.approx(f1)
    assert (metric["n_err"], metric["n_corr"]) == (2, 1)

    assert result["config"]["mode"] == mode
    assert result["n_failed"] == 0
    assert result["usage"]["total_tokens"] > 0
    assert result["wall_s"] > 0


def test_bestofn_pick_and_report(server: Any, tmp_path: Path, data_dir: Path) -> None:
    data = data_dir / "gsm8k" / "example_model_solutions.jsonl"
    out = tmp_path / "bon.json"
    run_cli(
        "bestofn",
        *("--data", str(data), "--limit", "3", "--method", "outcome"),
        *("--url", server.url, "--output", str(out)),
    )
    result = json.loads(out.read_text())

    assert result["n_items"] == 3
    assert len(result["items"]) == 3

    # Only what the server's answers decide is asserted here: the random, first-candidate and
    # oracle baselines come from the data file alone (tests/unit/test_bestofn.py covers them).
    with data.open(encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(3)]
    solvers = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
    assert result["eval_tokens"]["total_tokens"] > 0
    assert result["eval_tokens"]["engine_calls"] > 0
    for item, row in zip(result["items"], rows, strict=True):
        scores = item["scores"]
        assert len(scores) == 4
        assert all(0.0 <= s <= 1.0 for s in scores)  # outcome scores are P(correct)
        best = max(scores)
        assert item["picked"] == scores.index(best)  # index() finds the lowest index on ties
        assert item["picked_correct"] == row[solvers[item["picked"]]]["is_correct"]
    picked_correct = [i["picked_correct"] for i in result["items"]]
    assert result["selection_accuracy"] == pytest.approx(sum(picked_correct) / 3)


def test_mcq_raw_pride_contextual_report(server: Any, tmp_path: Path, data_dir: Path) -> None:
    data = data_dir / "arc" / "ARC-Challenge-Dev.jsonl"
    out = tmp_path / "mcq.json"
    run_cli(
        "mcq",
        *("--data", str(data), "--limit", "40", "--calib-ratio", "0.1"),
        *("--debias", "raw,pride,contextual"),
        *("--url", server.url, "--output", str(out)),
    )
    result = json.loads(out.read_text())
    assert result["n_items"] == 40
    assert result["n_calibration"] >= 4
    assert result["n_scored"] + result["n_calibration"] == 40  # the calibration split is held out
    raw, pride, contextual = (result["methods"][m] for m in ("raw", "pride", "contextual"))
    for m in (raw, pride, contextual):
        assert m["n"] == result["n_scored"]
        assert 0.0 <= m["accuracy"] <= 1.0
        assert sum(m["selection_rates"].values()) == pytest.approx(1.0)
    assert raw["forward_passes_per_item"] == 1.0
    # PriDe: K passes per calibration item, spread over the scored items, plus one pass each.
    assert pride["forward_passes_per_item"] > 1.0
    assert contextual["forward_passes_per_item"] > 1.0
    assert result["skipped"] == []


def test_reference_rule_hybrid_and_model_report(server: Any, tmp_path: Path) -> None:
    """Each verifier over the same rows; the metrics recomputed from the rows it lists."""
    out = tmp_path / "ref.json"
    run_cli(
        "reference",
        *("--verifiers", "rule,hybrid,model", "--limit", "2", "--url", server.url),
        *("--output", str(out)),
    )
    result = json.loads(out.read_text())
    rule, hybrid, model = (result["verifiers"][v] for v in ("rule", "hybrid", "model"))
    assert rule["n"] == hybrid["n"] == model["n"] == 8
    assert rule["engine_calls"] == 0
    # GSM8K's labels come from final answers, which the rule reads: hybrid never needs the model
    assert hybrid["decided_by_rule_share"] == rule["decided_share"] == 1.0
    assert hybrid["engine_calls"] == 0
    assert (hybrid["accuracy"], hybrid["reasons"]) == (rule["accuracy"], rule["reasons"])
    # the model judged every candidate, once each
    assert model["decided_by_rule_share"] == 0.0
    assert model["engine_calls"] == model["n"]
    assert model["reasons"] == {"model": 8}
    assert model["tokens_per_judgment"] == model["tokens"] / 8
    assert model["n_disagreements"] == round(8 * (1 - model["accuracy"]))


def test_compare_pairs_report_and_the_first_order_read_is_debias_none(
    server: Any, tmp_path: Path, data_dir: Path, prob_tol: float
) -> None:
    """The report recomputed from its items; the read in request order of a swap request is
    the read a debias='none' request makes (same prompt), within the engine's batch noise."""
    from service.evals.compare import build_pairs
    from service.evals.data import load_gsm8k_solutions

    data = data_dir / "gsm8k" / "example_model_solutions.jsonl"
    out = tmp_path / "cmp.json"
    n = 8
    run_cli(
        "compare",
        *("--data", str(data), "--limit", str(n), "--url", server.url, "--output", str(out)),
    )
    result = json.loads(out.read_text())
    items = result["items"]
    assert (result["n_pairs"], len(items), result["n_failed"]) == (n, n, 0)
    assert result["config"]["debias"] == "swap"

    # the labels come from the file: the response marked correct is, the other is not
    questions = load_gsm8k_solutions(data, max(i["question_index"] for i in items) + 1)
    for k, item in enumerate(items):
        flags = {c.solver_name: c.is_correct for c in questions[item["question_index"]].candidates}
        assert item["correct"] == k % 2  # the correct one first in every other pair
        assert flags[item["solvers"][item["correct"]]]
        assert not flags[item["solvers"][1 - item["correct"]]]

    def pick(values: list[float], order: list[int]) -> int | None:
        return None if values[0] == values[1] else order[0 if values[0] > values[1] else 1]

    debiased, first, consistent, first_letter = [], [], [], []
    for item in items:
        m = item["preferences"]
        assert m[0][0] is None
        assert m[1][1] is None
        assert m[0][1] + m[1][0] == pytest.approx(1.0)
        reads = {tuple(r["order"]): r["probabilities"] for r in item["reads"]}
        assert set(reads) == {(0, 1), (1, 0)}
        for probs in reads.values():
            assert sum(probs) == pytest.approx(1.0)
        # P(0 over 1) is the mean over the two orders
        assert m[0][1] == pytest.approx((reads[(0, 1)][0] + reads[(1, 0)][1]) / 2)
        d = pick(item["scores"], [0, 1])
        if d is not None:
            assert item["ranking"][0] == d
        f = pick(reads[(0, 1)], [0, 1])
        assert (item["pick_debiased"], item["pick_first_order"]) == (d, f)
        debiased.append(d == item["correct"])
        first.append(f == item["correct"])
        picks = {pick(reads[(0, 1)], [0, 1]), pick(reads[(1, 0)], [1, 0])}
        consistent.append(len(picks) == 1 and None not in picks)
        first_letter += [reads[(0, 1)][0], reads[(1, 0)][0]]
    assert result["accuracy_debiased"] == pytest.approx(sum(debiased) / n)
    assert result["accuracy_first_order"] == pytest.approx(sum(first) / n)
    assert result["position_consistency"] == pytest.approx(sum(consistent) / n)
    assert result["first_position_rate"] == pytest.approx(sum(first_letter) / (2 * n))
    swap, one = (result["tokens_per_pair"][k] for k in ("swap", "one_order"))
    assert swap["total_tokens"] == result["eval_tokens"]["total_tokens"] / n
    assert one == {k: v / 2 for k, v in swap.items()}

    pair = build_pairs(load_gsm8k_solutions(data, 2), 1)[0]
    body = {"question": pair.question, "responses": list(pair.responses), "return_reads": True}
    alone = httpx.post(server.url + "/v1/judge/compare", json={**body, "debias": "none"}).json()
    assert alone["debias"] == "none"
    assert alone["passes"] == 1
    assert alone["position_consistency"] is None
    (read,) = alone["reads"]
    assert read["order"] == [0, 1]
    swapped = {tuple(r["order"]): r["probabilities"] for r in items[0]["reads"]}
    assert read["probabilities"] == pytest.approx(swapped[(0, 1)], abs=prob_tol)


def test_rubric_report_recomputes_from_its_rows(server: Any, tmp_path: Path) -> None:
    """Every case is graded by four criteria in one rubric; the labels follow the case's form,
    the reward is the weighted aggregate of the returned probabilities, the metrics come
    from the rows."""
    from service.evals.rubric import CRITERIA
    from service.scoring.calibration import auroc

    out = tmp_path / "rubric.json"
    run_cli("rubric", "--limit", "2", "--url", server.url, "--output", str(out))
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert result["n_cases"] == len(rows) > 0
    assert len(rows) % 3 == 0  # every solution in its three forms
    assert result["usage"]["engine_calls"] == 4 * len(rows)  # one read per criterion
    for row in rows:
        labels = row["labels"]
        assert labels["computation"] == (row["form"] != "answer_only")
        assert labels["format"] == (row["form"] != "sentence")
        assert labels["wrong_answer"] == (not labels["correct"])
        raw = sum(w * row["p"][name] for name, _, w in CRITERIA) / 4.0
        assert row["reward"] == pytest.approx(min(1.0, max(0.0, raw)), abs=1e-6)
    for name, _, _ in CRITERIA:
        probs = [r["p"][name] for r in rows]
        labels = [int(r["labels"][name]) for r in rows]
        right = sum(int(p >= 0.5) == y for p, y in zip(probs, labels, strict=True))
        assert result["criteria"][name]["accuracy"] == pytest.approx(right / len(rows))
        if 0 < sum(labels) < len(labels):
            assert result["criteria"][name]["auroc"] == pytest.approx(auroc(probs, labels))
