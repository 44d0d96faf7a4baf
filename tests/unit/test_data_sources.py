"""The shipped data: every file data/SOURCES.md names is there, unmodified, and no other."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from service.config import PROJECT_DATA, Settings

SOURCES = PROJECT_DATA / "SOURCES.md"
_SHA_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$", re.M)


def listed() -> dict[str, str]:
    return {path: digest for digest, path in _SHA_LINE.findall(SOURCES.read_text())}


def test_sources_lists_the_data_sets() -> None:
    assert set(listed()) == {
        "gsm8k/test.jsonl",
        "gsm8k/example_model_solutions.jsonl",
        "processbench/gsm8k.json",
        "arc/ARC-Challenge-Dev.jsonl",
        "popmcq/pool.jsonl",
        "humaneval/HumanEval.jsonl.gz",
    }


@pytest.mark.parametrize("name", sorted(listed()))
def test_file_matches_its_sha256(name: str) -> None:
    digest = hashlib.sha256((PROJECT_DATA / name).read_bytes()).hexdigest()
    assert digest == listed()[name], f"data/{name} differs from data/SOURCES.md"


def test_every_data_file_is_listed() -> None:
    on_disk = {str(p.relative_to(PROJECT_DATA)) for p in PROJECT_DATA.rglob("*") if p.is_file()} - {
        "SOURCES.md"
    }
    assert on_disk == set(listed())


def test_row_counts_match_sources() -> None:
    def lines(name: str) -> int:
        with (PROJECT_DATA / name).open(encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())

    assert lines("gsm8k/test.jsonl") == 1319
    assert lines("gsm8k/example_model_solutions.jsonl") == 1319
    assert lines("arc/ARC-Challenge-Dev.jsonl") == 299
    assert lines("popmcq/pool.jsonl") == 64
    assert len(json.loads((PROJECT_DATA / "processbench/gsm8k.json").read_text())) == 400
    with gzip.open(PROJECT_DATA / "humaneval/HumanEval.jsonl.gz", "rt") as handle:
        assert sum(1 for line in handle if line.strip()) == 164


def test_default_data_dir_is_the_projects_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Found from the package: the same folder whatever the working directory."""
    monkeypatch.delenv("VERIFIER_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Settings().data_dir == PROJECT_DATA
    assert Path(__file__).resolve().parents[2] / "data" == PROJECT_DATA
