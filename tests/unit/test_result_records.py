"""The published result records: every one the README's figures table links exists, is a
record of the benchmark its row's command runs, and says where and on what it ran."""

from __future__ import annotations

import json
import re
from pathlib import Path

from loadtests.bench import Record

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|.*`verifier bench ([a-z-]+)[^`]*`")
# A row may link one record per dtype or machine.
LINK = re.compile(r"\]\((loadtests/results/[^)]+\.json)\)")


def _linked() -> list[tuple[str, Path]]:
    rows = []
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            name = m.group(1).replace("-", "_")
            rows.extend((name, ROOT / path) for path in LINK.findall(line))
    return rows


def test_the_readme_links_records() -> None:
    assert len(_linked()) >= 3


def test_every_linked_record_is_a_full_run_of_its_rows_benchmark() -> None:
    for name, path in _linked():
        rec = Record.model_validate(json.loads(path.read_text(encoding="utf-8")))
        # A variant a benchmark names itself (judge_throughput_compiled, models_split).
        assert rec.benchmark == name or rec.benchmark.startswith(f"{name}_"), path
        assert path.stem.startswith(name), path
        assert not rec.smoke, path
        assert re.fullmatch(r"[0-9a-f]{40}", rec.commit or ""), path
        assert rec.machine.cpu, path
        assert rec.machine.nproc >= 1, path
        assert rec.dtype in ("float32", "bfloat16", "float16"), path
        assert rec.results, path


def test_every_committed_record_is_linked_from_the_readme() -> None:
    linked = {path for _, path in _linked()}
    assert set((ROOT / "loadtests" / "results").glob("*.json")) == linked
