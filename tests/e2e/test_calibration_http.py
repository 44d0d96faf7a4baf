"""`verifier eval calibration` end to end against the real server (docs/methods.md J).

The default model is weak, so only the report's mechanics are checked: every held-out value
recomputed from the raw logit and its fold's parameters, the metrics from those values, the
ECE from the bins, the AUROC unchanged by the monotone maps, the files written. Never quality.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special
from typer.testing import CliRunner

from service.evals.cli import eval_app
from service.evals.data import load_gsm8k_solutions
from tests.support.calibration_math import by_hand_bins, pairwise_auroc

pytestmark = pytest.mark.engine

N = 16  # 4 questions' solutions: 5 correct, 11 wrong
# Questions no other test judges: the session server's judgment cache then neither answers
# these reads from an earlier test nor answers a later test's (test_evals counts engine calls).
FIRST_QUESTION = 1200
FOLDS = 2
BINS = 4


def test_calibration_report_recomputes_from_its_reads(
    server: Any, tmp_path: Path, data_dir: Path
) -> None:
    lines = (data_dir / "gsm8k" / "example_model_solutions.jsonl").read_text().splitlines()
    data = tmp_path / "solutions.jsonl"
    data.write_text("\n".join(lines[FIRST_QUESTION : FIRST_QUESTION + N // 4]) + "\n")
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(
        eval_app,
        [
            "calibration",
            *("--data", str(data), "--limit", str(N), "--folds", str(FOLDS)),
            *("--bins", str(BINS), "--url", server.url, "--output", str(out)),
        ],
    )
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    assert "temperature" in result.output  # the printed tables
    report = json.loads(out.read_text())
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the reads: one per labelled solution, labels from the file, score = sigmoid(logit)
    candidates = [c for item in load_gsm8k_solutions(data, 4) for c in item.candidates]
    items = report["items"]
    assert (report["n_items"], report["n_failed"], len(items)) == (N, 0, N)
    assert [i["label"] for i in items] == [int(c.is_correct) for c in candidates]
    assert report["config"]["mode"] == "direct"
    assert report["usage"]["engine_calls"] + report["usage"]["cached_judgments"] == N
    z = np.array([i["logit"] for i in items])
    y = np.array([i["label"] for i in items])
    assert [i["score"] for i in items] == pytest.approx(special.expit(z).tolist(), abs=1e-9)
    assert report["base_rate"] == pytest.approx(y.mean())

    # stratified folds: each class split evenly
    folds = np.array([i["fold"] for i in items])
    for cls in (0, 1):
        counts = np.bincount(folds[y == cls], minlength=FOLDS)
        assert counts.max() - counts.min() <= 1

    # every held-out value is its fold's map (fitted without it) applied to the raw logit
    held = report["held_out"]
    params = {m: held[m]["fold_parameters"] for m in ("temperature", "platt")}
    expected = {"raw": special.expit(z)}
    expected["temperature"] = special.expit(
        z / np.array([params["temperature"][f]["temperature"] for f in folds])
    )
    a = np.array([params["platt"][f]["a"] for f in folds])
    b = np.array([params["platt"][f]["b"] for f in folds])
    expected["platt"] = special.expit(a * z + b)
    for method, values in expected.items():
        p = np.array([i["held_out"][method] for i in items])
        assert p == pytest.approx(values, abs=1e-12)
        m = held[method]["metrics"]
        # the metrics, from the reported predictions
        assert m["brier"] == pytest.approx(np.mean((p - y) ** 2))
        nll = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        assert m["nll"] == pytest.approx(nll, rel=1e-6)
        assert m["mean_probability"] == pytest.approx(p.mean())
        # the bins, written out by hand, and the ECE from the bins
        bins = m["bins"]
        hand = by_hand_bins(p, y, BINS)
        assert [x["count"] for x in bins] == [x["count"] for x in hand]
        for got, want in zip(bins, hand, strict=True):
            assert got["mean_predicted"] == pytest.approx(want["mean_predicted"])
            assert got["observed"] == pytest.approx(want["observed"])
        ece = sum(x["count"] / N * abs(x["mean_predicted"] - x["observed"]) for x in bins)
        assert m["ece"] == pytest.approx(ece)
        noise = held[method]["ece_noise"]
        assert 0 < noise["mean"] <= noise["q90"] <= 1
        # a monotone map per fold: each fold's AUROC is raw's, so their mean is too
        per_fold = [pairwise_auroc(p[folds == f], y[folds == f]) for f in range(FOLDS)]
        assert held[method]["auroc_folds"] == pytest.approx(np.mean(per_fold))
    assert held["temperature"]["auroc_folds"] == held["raw"]["auroc_folds"]
    assert held["platt"]["auroc_folds"] == held["raw"]["auroc_folds"]

    # the maps fitted on the whole set: positive, and AUROC unchanged on it
    full = report["parameters"]
    assert full["temperature"]["temperature"] > 0
    assert full["platt"]["a"] > 0
    fit_set = report["fit_set"]
    assert fit_set["temperature"]["auroc"] == fit_set["raw"]["auroc"] == fit_set["platt"]["auroc"]
    assert fit_set["raw"]["auroc"] == pytest.approx(pairwise_auroc(z, y))
    platt_full = special.expit(full["platt"]["a"] * z + full["platt"]["b"])
    assert fit_set["platt"]["brier"] == pytest.approx(np.mean((platt_full - y) ** 2))


def test_calibration_of_pairs_reads_each_by_comparison(
    server: Any, tmp_path: Path, data_dir: Path
) -> None:
    lines = (data_dir / "gsm8k" / "example_model_solutions.jsonl").read_text().splitlines()
    data = tmp_path / "solutions.jsonl"
    data.write_text("\n".join(lines[FIRST_QUESTION + 10 : FIRST_QUESTION + 20]) + "\n")
    out = tmp_path / "pairs.json"
    result = CliRunner().invoke(
        eval_app,
        [
            "calibration",
            *("--dataset", "gsm8k-pairs", "--data", str(data), "--limit", "16"),
            *("--folds", str(FOLDS), "--bins", str(BINS), "--url", server.url),
            *("--output", str(out)),
        ],
    )
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    report = json.loads(out.read_text())
    assert (report["n_items"], report["n_failed"]) == (16, 0)
    assert report["config"]["target"] == "compare"
    items = report["items"]
    assert [i["label"] for i in items] == [1, 0] * 8
    z = np.array([i["logit"] for i in items])
    assert [i["score"] for i in items] == pytest.approx(special.expit(z).tolist(), abs=1e-12)
    assert report["base_rate"] == 0.5
    assert report["usage"]["prompt_tokens"] > 0
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("dataset", "kinds"), [("arc", {"choice", "predicate"}), ("arc-mcq", {"mcq"})]
)
def test_the_arc_calibrations_read_through_the_service_and_fit_per_type(
    server: Any, tmp_path: Path, data_dir: Path, dataset: str, kinds: set[str]
) -> None:
    lines = (data_dir / "arc" / "ARC-Challenge-Dev.jsonl").read_text().splitlines()
    data = tmp_path / "arc.jsonl"
    data.write_text("\n".join(lines[200:220]) + "\n")
    out = tmp_path / f"{dataset}.json"
    result = CliRunner().invoke(
        eval_app,
        [
            "calibration",
            *("--dataset", dataset, "--data", str(data), "--folds", "2"),
            *("--bins", str(BINS), "--url", server.url, "--output", str(out)),
        ],
    )
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    report = json.loads(out.read_text())
    assert (report["n_items"], report["n_failed"], report["skipped"]) == (20, 0, [])
    assert set(report["types"]) == kinds
    assert report["n_questions"] == 20 * len(kinds)
    assert report["usage"]["engine_calls"] == 20 * len(kinds)
    for item in report["items"]:
        probs = np.asarray(item["raw"])
        assert probs.sum() == pytest.approx(1.0)
        t = report["types"][item["kind"]]["fold_temperatures"][item["fold"]]
        assert item["held_out"]["temperature"] == pytest.approx(
            float(special.softmax(np.log(probs) / t).max())
        )
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
