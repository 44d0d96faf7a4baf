"""Tests for service.scoring.bestofn and the GSM8K reader of service.evals.data, on the real
example solutions (data/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.evals.data import load_gsm8k_solutions, parse_gsm8k_row
from service.scoring.bestofn import SOLVER_ORDER, BestOfNItem, Candidate, selection_report

N_ROWS = 50


@pytest.fixture(scope="module")
def solutions(data_dir: Path) -> Path:
    return data_dir / "gsm8k" / "example_model_solutions.jsonl"


@pytest.fixture(scope="module")
def raw_rows(solutions: Path) -> list[dict[str, object]]:
    """The first N_ROWS rows decoded directly, independent of the loader."""
    with solutions.open(encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(N_ROWS)]


@pytest.fixture(scope="module")
def items(solutions: Path) -> list[BestOfNItem]:
    return load_gsm8k_solutions(solutions, limit=N_ROWS)


def _correct_flags(row: dict[str, object]) -> list[bool]:
    flags = []
    for name in SOLVER_ORDER:
        entry = row[name]
        assert isinstance(entry, dict)
        flags.append(bool(entry["is_correct"]))
    return flags


def test_loader_reads_rows_in_solver_order(
    items: list[BestOfNItem], raw_rows: list[dict[str, object]]
) -> None:
    assert len(items) == N_ROWS
    assert items[0].question.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert items[0].ground_truth.endswith("A: 18")
    for item, row in zip(items, raw_rows, strict=True):
        assert [c.solver_name for c in item.candidates] == list(SOLVER_ORDER)
        assert [c.is_correct for c in item.candidates] == _correct_flags(row)
    # Row 0: only the 175b verification solver is right (see the data file).
    assert [c.is_correct for c in items[0].candidates] == [False, False, False, True]


def test_oracle_scores_reach_the_any_correct_upper_bound(
    items: list[BestOfNItem], raw_rows: list[dict[str, object]]
) -> None:
    oracle_scores = [[float(c.is_correct) for c in item.candidates] for item in items]
    report = selection_report(items, oracle_scores)
    any_correct = sum(any(_correct_flags(row)) for row in raw_rows) / N_ROWS
    assert report["n_items"] == N_ROWS
    assert report["selection_accuracy"] == pytest.approx(any_correct)
    assert report["oracle_accuracy"] == pytest.approx(any_correct)
    assert 0.0 < any_correct <= 1.0


def _item(*flags: bool) -> BestOfNItem:
    cands = tuple(Candidate(f"s{i}", f"sol {i}", f) for i, f in enumerate(flags))
    return BestOfNItem("q", "A: 1", cands)


def test_baselines_on_hand_counted_items() -> None:
    # Four items whose baselines all differ; each figure below is counted by hand.
    items = [
        _item(False, True, True, False),  # random 2/4, first wrong, some right
        _item(True, False, False, False),  # random 1/4, first right
        _item(False, False, False, False),  # random 0, none right
        _item(True, True, True, True),  # random 1, first right
    ]
    report = selection_report(items, [[0.5] * 4 for _ in items])
    assert report == {
        "n_items": 4,
        "selection_accuracy": 0.5,  # all scores tie: candidate 0 is picked, right in items 2 and 4
        "random_accuracy": 0.4375,  # (0.5 + 0.25 + 0 + 1) / 4
        "first_accuracy": 0.5,
        "oracle_accuracy": 0.75,  # items 1, 2 and 4 have a right candidate
    }


def test_ties_go_to_the_lowest_index() -> None:
    items = [_item(False, True, False), _item(False, False, True)]
    report = selection_report(items, [[0.1, 0.7, 0.7], [0.2, 0.9, 0.9]])
    assert report["selection_accuracy"] == 0.5  # picks 1 (right) and 1 (wrong), never 2


def test_selection_on_hand_made_items() -> None:
    items = [_item(False, True, False), _item(True, False, False), _item(False, False, False)]
    scores = [[0.2, 0.9, 0.9], [0.5, 0.5, 0.1], [0.3, 0.2, 0.1]]
    report = selection_report(items, scores)
    assert report == {
        "n_items": 3,
        "selection_accuracy": pytest.approx(2 / 3),
        "random_accuracy": pytest.approx(2 / 9),
        "first_accuracy": pytest.approx(1 / 3),
        "oracle_accuracy": pytest.approx(2 / 3),
    }


def test_limit_zero_and_bad_limit(solutions: Path) -> None:
    assert load_gsm8k_solutions(solutions, limit=0) == []
    with pytest.raises(ValueError, match="limit must be >= 0 or None, got -1"):
        load_gsm8k_solutions(solutions, limit=-1)


def test_malformed_row_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = {"question": "q", "ground_truth": "A: 1"} | {
        name: {"is_correct": True, "solution": "s"} for name in SOLVER_ORDER
    }
    bad = good | {"175b_finetuning": {"is_correct": "yes", "solution": "s"}}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"bad\.jsonl:3: field '175b_finetuning\.is_correct': .*valid boolean"
    ):
        load_gsm8k_solutions(path, limit=None)


def test_bad_line_is_named_by_its_number(tmp_path: Path) -> None:
    good = {"question": "q", "ground_truth": "A: 1"} | {
        name: {"is_correct": False, "solution": "s"} for name in SOLVER_ORDER
    }
    no_question = {k: v for k, v in good.items() if k != "question"}
    lines = [json.dumps(good)] * 4 + [json.dumps(no_question), "{not json"]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(load_gsm8k_solutions(path, limit=4)) == 4
    with pytest.raises(ValueError, match=r"rows\.jsonl:5: field 'question': Field required$"):
        load_gsm8k_solutions(path, limit=None)
    path.write_text("\n".join(lines[:4] + lines[5:]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"rows\.jsonl:5: "):
        load_gsm8k_solutions(path, limit=None)


def test_row_types_are_checked_not_coerced() -> None:
    good = {"question": "q", "ground_truth": "A: 1"} | {
        name: {"is_correct": True, "solution": "s"} for name in SOLVER_ORDER
    }
    assert parse_gsm8k_row(good).candidates[2] == Candidate("175b_finetuning", "s", True)
    with pytest.raises(ValueError, match=r"field '6b_verification\.is_correct'"):
        parse_gsm8k_row(good | {"6b_verification": {"is_correct": 1, "solution": "s"}})
    with pytest.raises(ValueError, match=r"field 'ground_truth': Input should be a valid string"):
        parse_gsm8k_row(good | {"ground_truth": 18})


def test_parse_row_requires_every_solver() -> None:
    row = {"question": "q", "ground_truth": "g", "6b_finetuning": {}}
    with pytest.raises(ValueError, match=r"field '6b_finetuning\.solution': Field required"):
        parse_gsm8k_row(row)
    row["6b_finetuning"] = {"is_correct": True, "solution": "s"}
    with pytest.raises(ValueError, match="^field '6b_verification': Field required"):
        parse_gsm8k_row(row)


def test_report_rejects_misaligned_scores(items: list[BestOfNItem]) -> None:
    with pytest.raises(ValueError, match="score rows"):
        selection_report(items[:2], [[0.0] * 4])
    with pytest.raises(ValueError, match="one score per candidate"):
        selection_report(items[:1], [[0.0] * 3])
    with pytest.raises(ValueError, match="at least one item"):
        selection_report([], [])
