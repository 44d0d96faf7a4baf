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
