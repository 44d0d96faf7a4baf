"""`verifier bench`: one registry of the benchmark scripts, each reachable with its options."""

from __future__ import annotations

import ast
from pathlib import Path

from typer.testing import CliRunner

from loadtests.cli import SCRIPTS, bench_app
from loadtests.harness import ROOT

# Modules of loadtests/ that are libraries or typer commands, not argparse scripts.
NOT_SCRIPTS = {
    "__init__",
    "__main__",
    "cli",
    "harness",
    "workload",
    "stats",
    "plots",
    "checkpoints",  # builds reward checkpoints for tests and benchmarks; not a benchmark
}


def defines_main(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main"
        for node in tree.body
    )


def test_every_script_with_a_main_is_registered() -> None:
    found = {
        p.stem
        for p in (ROOT / "loadtests").glob("*.py")
        if p.stem not in NOT_SCRIPTS and defines_main(p)
    }
    assert found == set(SCRIPTS)
    assert len(SCRIPTS) == len(set(SCRIPTS))


def test_help_lists_every_benchmark() -> None:
    result = CliRunner().invoke(
        bench_app, ["--help"], prog_name="verifier bench", terminal_width=200
    )
    assert result.exit_code == 0, result.output
    names = ["load", "tradeoff", *(m.replace("_", "-") for m in SCRIPTS)]
    listed = [line.split()[1] for line in result.output.splitlines() if line.startswith("│ ")]
    assert [n for n in names if n not in listed] == []


def test_a_script_gets_its_own_options() -> None:
    result = CliRunner().invoke(bench_app, ["redis-loss", "--help"], prog_name="verifier bench")
    assert result.exit_code == 0, result.output
    assert "usage: verifier bench redis-loss" in result.output
    assert "--rate RATE" in result.output
