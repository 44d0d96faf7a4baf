"""MCQ data readers: ARC jsonl and the mcqa CSV format, with the rows that trip parsers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from annotated_types import MaxLen, MinLen
from verifier_client import models

from service.evals.data import (
    MAX_OPTIONS,
    MIN_OPTIONS,
    GoldItem,
    parse_choices,
    read_arc,
    read_items,
    read_mcqa_csv,
)
from service.evals.mcq import split_calibration, summarize


def test_arc_keys_map_by_label_or_position(tmp_path: Path) -> None:
    def row(key: str, stem: str, labels: str, answer: str) -> dict[str, object]:
        choices = [{"text": f"t{label}", "label": label} for label in labels]
        return {"id": key, "question": {"stem": stem, "choices": choices}, "answerKey": answer}

    rows = [
        row("a", "Q1", "AB", "B"),
        row("b", "Q2", "123", "3"),  # digit keys
        row("c", "Q3", "A", "A"),  # one option: skipped
        {"id": "d", "question": {"stem": "Q4"}, "answerKey": "A"},  # no choices: skipped
    ]
    path = tmp_path / "arc.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    items, skipped = read_arc(path)
    assert [(i.id, i.answer_index) for i in items] == [("a", 1), ("b", 2)]
    assert [s.row for s in skipped] == [3, 4]
    assert "1 options" in skipped[0].reason


def test_real_arc_dev_reads_completely(data_dir: Path) -> None:
    items, skipped = read_items(data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    assert len(items) == 299
    assert skipped == []
    assert {i.k for i in items} == {3, 4, 5}


def test_numpy_repr_choices() -> None:
    assert parse_choices("['Paris' 'London'\n 'Berlin']") == ["Paris", "London", "Berlin"]
    assert parse_choices("""["it's" 'say "hi"']""") == ["it's", 'say "hi"']
    assert parse_choices(r"['$\\frac{1}{2}$' 'a\tb']") == ["$\\frac{1}{2}$", "a\tb"]
    with pytest.raises(ValueError, match="array repr"):
        parse_choices("Paris, London")
    with pytest.raises(ValueError, match="unquoted"):
        parse_choices("['a' b 'c']")


def test_mcqa_csv_tricky_rows_are_read_or_counted(tmp_path: Path) -> None:
    ten = "[" + " ".join(f"'opt {i}'" for i in range(10)) + "]"
    rows = [
        ('What is "1/2"?', "['$\\\\frac{1}{2}$' '0.3'\n '2']", "A"),  # quotes, LaTeX, newline
        ("Line one\nline two, with a comma", "['x' \"y's\"]", "B"),
        ("Ten options?", ten, "J"),
        ("Bad letter", "['a' 'b' 'c']", "D"),  # D is outside 3 options
        ("Not a letter", "['a' 'b']", "1"),
        ("Broken choices", "a, b", "A"),
    ]
    path = tmp_path / "mcqa.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["question", "choices", "answer"])
        writer.writerows(rows)
    items, skipped = read_mcqa_csv(path)
    assert [i.question for i in items] == [rows[0][0], rows[1][0], rows[2][0]]
    assert items[0].options == ["$\\frac{1}{2}$", "0.3", "2"]
    assert items[1].options == ["x", "y's"]
    assert items[1].answer_index == 1
    assert items[2].k == 10
    assert items[2].answer_index == 9
    assert [s.row for s in skipped] == [4, 5, 6]
    assert "outside 3 options" in skipped[0].reason
    assert "not a letter" in skipped[1].reason


def test_csv_without_the_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("q,a\n1,2\n")
    with pytest.raises(ValueError, match="missing CSV columns"):
        read_mcqa_csv(path)


def item(i: int, k: int = 4, gold: int = 0) -> GoldItem:
    return GoldItem(str(i), f"q{i}", [f"o{j}" for j in range(k)], gold)


def test_calibration_split_is_seeded_held_out_and_per_k() -> None:
    items = [item(i) for i in range(100)] + [item(100 + i, k=3) for i in range(10)]
    calib, scored = split_calibration(items, 0.05, seed=1)
    assert calib == split_calibration(items, 0.05, seed=1)[0]
    assert {i.id for i in calib}.isdisjoint(i.id for i in scored)
    assert len(calib) + len(scored) == len(items)
    assert sum(i.k == 4 for i in calib) == 5
    assert sum(i.k == 3 for i in calib) == 1  # at least one per K


def test_summarize_rates_and_rstd() -> None:
    items = [item(0, gold=0), item(1, gold=1), item(2, gold=1), item(3, gold=2)]
    report = summarize(items, [0, 0, 1, 2])
    assert report["accuracy"] == 0.75
    assert report["chance"] == 0.25
    assert report["selection_rates"] == {"A": 0.5, "B": 0.25, "C": 0.25, "D": 0.0}
    assert report["rstd"] == pytest.approx(23.57, abs=0.01)  # recalls 100, 50, 100


def test_option_bounds_are_the_services() -> None:
    # The reader refuses what the service would refuse: the bounds of the client's wire model.
    metadata = models.MCQItem.model_fields["options"].metadata
    assert [m for m in metadata if isinstance(m, MinLen)] == [MinLen(MIN_OPTIONS)]
    assert [m for m in metadata if isinstance(m, MaxLen)] == [MaxLen(MAX_OPTIONS)]
