"""README.md and docs/ describe the project as it is, from inside the project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

# References to documents outside the project, and sentences about what the code did before
# (history belongs in CHANGELOG.md, which is not checked).
FORBIDDEN = {
    "METHODS": re.compile(r"\bMETHODS\b"),  # the outside methods document; ours is docs/methods.md
    "../shared": re.compile(re.escape("../shared")),
    "used to": re.compile(r"\bused to\b", re.IGNORECASE),
    "formerly": re.compile(r"\bformerly\b", re.IGNORECASE),
    "previously": re.compile(r"\bpreviously\b", re.IGNORECASE),
}


def test_readme_is_a_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 320, f"README.md has {lines} lines (at most 320): move detail to docs/"


def test_readme_starts_with_install_and_serve_then_install_and_test() -> None:
    text = README.read_text()
    first_block = text.split("```", 2)[1]
    assert "scripts/install.sh && .venv/bin/verifier serve" in first_block
    assert "scripts/install.sh test && .venv/bin/python -m pytest" in first_block


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_outside_references_or_history(page: Path) -> None:
    found = [
        f"{page.relative_to(ROOT)}:{n}: {word!r}"
        for n, line in enumerate(page.read_text().splitlines(), 1)
        for word, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_check_catches_each_word() -> None:
    """The patterns match what they are meant to (so the test above can fail)."""
    samples = {
        "METHODS": "see METHODS A.2",
        "../shared": "read ../shared/data/x.json",
        "used to": "the worker Used to wait",
        "formerly": "Formerly --remote_rm_url",
        "previously": "as previously measured",
    }
    for word, sample in samples.items():
        assert FORBIDDEN[word].search(sample), word
    assert not FORBIDDEN["METHODS"].search("docs/methods.md A.2")


def test_every_cited_methods_section_exists() -> None:
    """Every `docs/methods.md X.n` cited in code or docs names a section of that page."""
    sections = set(re.findall(r"^### ([A-D]\.\d+) ", (ROOT / "docs/methods.md").read_text(), re.M))
    parts = set(re.findall(r"^## Part ([A-D])\. ", (ROOT / "docs/methods.md").read_text(), re.M))
    cited: set[str] = set()
    sources = [*ROOT.glob("service/**/*.py"), *ROOT.glob("clients/python/**/*.py"), *PAGES]
    for path in sources:
        for ref in re.findall(r"methods\.md\)? ([A-D](?:\.\d+)?)", path.read_text()):
            cited.add(ref)
    assert cited, "no citation found: the pattern is wrong"
    missing = sorted(c for c in cited if c not in sections and c not in parts)
    assert not missing, f"cited but not in docs/methods.md: {missing}"


ARCHITECTURE = ROOT / "docs/architecture.md"


def test_architecture_decisions_are_numbered_once_in_order() -> None:
    numbers = [int(n) for n in re.findall(r"^\*\*(\d+)\. ", ARCHITECTURE.read_text(), re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


def test_architecture_lists_every_import_contract_and_engine_module() -> None:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    text = ARCHITECTURE.read_text()
    table = text.split("## Dependency rules", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"\| [^-|]", line)][1:]  # no header
    assert len(rows) == len(contracts["contracts"]), rows
    engine = {p.name for p in (ROOT / "service/engine").glob("*.py")} - {"__init__.py"}
    missing = sorted(name for name in engine if name not in text)
    assert not missing, f"docs/architecture.md's layout omits {missing}"


def test_readme_lists_every_eval_command() -> None:
    from typer.main import get_command

    from service.evals.cli import eval_app

    names = set(get_command(eval_app).commands)  # type: ignore[attr-defined]
    section = README.read_text().split("## Evaluations and benchmarks", 1)[1].split("\n## ", 1)[0]
    missing = sorted(n for n in names if f"`{n}`" not in section)
    assert not missing, f"README's eval list omits {missing}"


def test_readme_names_the_routes_without_a_budget() -> None:
    """The README's claim about ``max_eval_tokens`` names exactly the routes that lack it."""
    from service.app import create_app
    from service.config import Settings

    document = create_app(Settings()).openapi()
    schemas = document["components"]["schemas"]
    without: set[str] = set()
    for path, operations in document["paths"].items():
        for op in operations.values():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            name = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            if name and "max_eval_tokens" not in schemas[name].get("properties", {}):
                without.add(path)
    assert without, "no route without a budget found: the walk is wrong"
    claim = README.read_text().split("`max_eval_tokens` and `budget_policy`", 1)[1]
    claim = claim.split("\n\n", 1)[0]
    assert {p for p in without if f"`{p}`" in claim} == without, claim


def test_architecture_names_the_pipeline_entry_point() -> None:
    from service.api import pipeline

    assert hasattr(pipeline.JobCall, "run")
    assert "JobCall.run" in ARCHITECTURE.read_text()
    assert "run_job" not in ARCHITECTURE.read_text()
