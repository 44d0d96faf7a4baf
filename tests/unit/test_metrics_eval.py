"""Tests for service.scoring.metrics_eval (docs/methods.md A.7-A.9) and the ProcessBench reader
of service.evals.data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from service.evals.data import load_processbench, parse_processbench_item
from service.scoring.metrics_eval import extract_boxed_int, processbench_metric


@pytest.fixture(scope="module")
def gsm8k(data_dir: Path) -> Path:
    return data_dir / "processbench" / "gsm8k.json"


# --- metric ---------------------------------------------------------------------------------


def test_always_minus_one_predictor() -> None:
    labels = [-1, 0, 3, -1, 2]
    scores = processbench_metric([-1] * len(labels), labels)
    assert scores["acc_corr"] == 100.0
    assert scores["acc_err"] == 0.0
    assert scores["f1"] == 0.0
    assert (scores["n_err"], scores["n_corr"]) == (3, 2)


def test_oracle_predictor() -> None:
    labels = [-1, 0, 3, -1, 2]
    scores = processbench_metric(list(labels), labels, n_steps=[4, 2, 5, 1, 3])
    assert (scores["acc_err"], scores["acc_corr"], scores["f1"]) == (100.0, 100.0, 100.0)


def test_three_item_hand_computation() -> None:
    # err items: labels 1 (pred 1, right) and 0 (pred 2, wrong) -> 50%; corr item right -> 100%.
    scores = processbench_metric([1, 2, -1], [1, 0, -1])
    assert scores["acc_err"] == pytest.approx(50.0)
    assert scores["acc_corr"] == pytest.approx(100.0)
    assert scores["f1"] == pytest.approx(2 * 50 * 100 / 150)  # 66.67


def test_none_prediction_is_wrong() -> None:
    scores = processbench_metric([None, None, 0], [-1, 1, 0])
    assert scores["acc_corr"] == 0.0
    assert scores["acc_err"] == pytest.approx(50.0)
    assert scores["f1"] == 0.0


def test_out_of_range_prediction_is_wrong_only_with_step_counts() -> None:
    # Pred 7 is past the last of 3 steps; pred -2 is below -1: both count as wrong.
    assert processbench_metric([7, -2], [2, -1], n_steps=[3, 3])["acc_err"] == 0.0
    assert processbench_metric([7, -2], [2, -1], n_steps=[3, 3])["acc_corr"] == 0.0
    assert processbench_metric([2], [2], n_steps=[3])["acc_err"] == 100.0


def test_empty_class_gives_nan() -> None:
    only_errors = processbench_metric([0, 1], [0, 2])
    assert only_errors["acc_err"] == 50.0
    assert math.isnan(only_errors["acc_corr"])
    assert math.isnan(only_errors["f1"])
    only_correct = processbench_metric([-1], [-1])
    assert math.isnan(only_correct["acc_err"])
    assert only_correct["acc_corr"] == 100.0
    assert math.isnan(only_correct["f1"])


def test_misaligned_or_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="predictions"):
        processbench_metric([0], [0, 1])
    with pytest.raises(ValueError, match="step counts"):
        processbench_metric([0], [0], n_steps=[1, 2])
    with pytest.raises(ValueError, match="labels must be"):
        processbench_metric([0], [-3])
    with pytest.raises(ValueError, match="step count"):
        processbench_metric([0], [4], n_steps=[2])


# --- boxed parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The first error is in \boxed{2}.", 2),
        (r"\boxed{-1}", -1),
        (r"Maybe \boxed{1}... no, actually \boxed{ 3 }", 3),  # last match, stripped
        (r"\boxed{1} then \boxed{x}", None),  # the last match decides, even if not an int
        (r"\boxed{2.5}", None),
        (r"\boxed{}", None),
        (r"\boxed{\text{3}}", None),  # nested braces are not supported (as upstream)
        ("no box here: 4", None),
        ("", None),
    ],
)
def test_extract_boxed_int(text: str, expected: int | None) -> None:
    assert extract_boxed_int(text) == expected


# --- loading --------------------------------------------------------------------------------


def test_load_real_processbench_gsm8k(gsm8k: Path) -> None:
    items = load_processbench(gsm8k, limit=None)
    assert len(items) == 400
    assert sum(item.label != -1 for item in items) == 207
    assert items[0].id == "gsm8k-0"
    assert all(-1 <= item.label < len(item.steps) for item in items)
    assert all(item.final_answer_correct for item in items if item.label == -1)
    assert len(load_processbench(gsm8k, limit=5)) == 5


def test_metric_on_real_labels_with_oracle_and_minus_one(gsm8k: Path) -> None:
    items = load_processbench(gsm8k, limit=None)
    labels = [item.label for item in items]
    n_steps = [len(item.steps) for item in items]
    assert processbench_metric(labels, labels, n_steps)["f1"] == 100.0
    trivial = processbench_metric([-1] * len(labels), labels, n_steps)
    assert (trivial["acc_err"], trivial["acc_corr"], trivial["f1"]) == (0.0, 100.0, 0.0)


GOOD_ITEM = {
    "id": "x",
    "generator": "g",
    "problem": "p",
    "steps": ["a", "b"],
    "final_answer_correct": True,
    "label": -1,
}


def test_load_rejects_bad_files(tmp_path: Path) -> None:
    not_array = tmp_path / "obj.json"
    not_array.write_text(json.dumps({"id": "x"}), encoding="utf-8")
    with pytest.raises(ValueError, match="JSON array"):
        load_processbench(not_array, limit=None)
    bad_label = tmp_path / "label.json"
    bad_label.write_text(json.dumps([GOOD_ITEM | {"label": 2}]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"item 0: field 'label'"):
        load_processbench(bad_label, limit=None)


def test_bad_item_is_named_by_its_index(tmp_path: Path) -> None:
    good = GOOD_ITEM
    path = tmp_path / "pb.json"
    cases = [
        ({"label": True}, r"item 2: field 'label': Input should be a valid integer"),
        ({"steps": ["a", 3]}, r"item 2: field 'steps\.1': Input should be a valid string"),
        ({"final_answer_correct": "yes"}, r"item 2: field 'final_answer_correct'"),
        ({"id": None}, r"item 2: field 'id'"),
    ]
    for damage, message in cases:
        path.write_text(json.dumps([good, good, good | damage]), encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            load_processbench(path, limit=None)
        assert len(load_processbench(path, limit=2)) == 2
    path.write_text(json.dumps([good, "not an object"]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"pb\.json: item 1: Input should be a valid dictionary"):
        load_processbench(path, limit=None)
    item = parse_processbench_item(good)
    assert (item.steps, item.label, item.final_answer_correct) == (("a", "b"), -1, True)
