"""Every example in README.md and docs/*.md runs, as written, against the session's server.

A fenced block is classified by its info string:

- ```` ```bash ```` and ```` ```python ````: an example. It must talk to
  ``http://127.0.0.1:8000`` (the session server's URL is put in its place) and exit 0; every
  JSON body a bash example prints must carry no ``"error"`` key (curl runs with
  ``--fail-with-body``, so a 4xx or 5xx also fails it). A ```` ```console ```` block right
  after it is its output as documented: the live bodies must have its shape (the same keys at
  every depth, the same JSON types; values may differ), so a stale output fails.
- ```` ```bash norun ```` / ```` ```python norun ````: cannot run in a test (installs,
  ``verifier serve``, docker, kubectl, a stronger model, a GPU); marked explicitly.
- ```` ```console ````, ```` ```text ````, ```` ```json ````, ```` ```promql ````,
  ```` ```yaml ````: output, formulas or data, not commands.

Anything else, including a bare fence or an example that does not name the local URL, fails:
a new block has to say what it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
URL = "http://127.0.0.1:8000"
RUNNABLE = frozenset({"bash", "python"})
NOT_CODE = frozenset({"console", "text", "json", "promql", "yaml"})
TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    info: tuple[str, ...]
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def lang(self) -> str:
        return self.info[0] if self.info else ""


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of a Markdown page, indented ones (inside list items) included."""
    blocks: list[Block] = []
    opened: tuple[int, str, tuple[str, ...]] | None = None
    body: list[str] = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        stripped = line.lstrip()
        if opened is None:
            if stripped.startswith("```"):
                indent = line[: len(line) - len(stripped)]
                opened = (n, indent, tuple(stripped[3:].split()))
                body = []
        elif stripped.startswith("```") and not stripped[3:].strip():
            blocks.append(Block(page, opened[0], opened[2], "\n".join(body) + "\n"))
            opened = None
        else:
            body.append(line.removeprefix(opened[1]))
    assert opened is None, f"{page.relative_to(ROOT)}:{opened[0]}: fence never closed"
    return blocks


def classify(block: Block) -> str:
    """'run', 'skip', or a message saying why the block cannot be classified."""
    if block.lang in NOT_CODE:
        return "skip"
    if block.lang in RUNNABLE:
        if "norun" in block.info[1:]:
            return "skip"
        if URL not in block.body:
            return (
                f"{block.where}: a ```{block.lang} example that does not call {URL}; "
                f"make it call the local service or mark it ```{block.lang} norun"
            )
        return "run"
    return (
        f"{block.where}: fence ```{' '.join(block.info)} is not a known kind; use "
        f"```bash/```python (run), add norun, or {'/'.join(sorted(NOT_CODE))} (not code)"
    )


ALL_BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
EXAMPLES = [block for block in ALL_BLOCKS if classify(block) == "run"]
# A runnable bash example's documented output: the console block right after it.
OUTPUTS = {
    (block.page, block.line): after
    for block, after in zip(ALL_BLOCKS, ALL_BLOCKS[1:], strict=False)
    if block.page == after.page and block.lang == "bash" and after.lang == "console"
}


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "boolean"
    if isinstance(value, int | float):
        return "number"  # 1.0 and 1 are one JSON type
    return {dict: "object", list: "array", str: "string"}[type(value)]


def shape_differences(documented: Any, live: Any, at: str = "$") -> list[str]:
    """Where the live value's shape differs from the documented one (keys and JSON types)."""
    if _kind(documented) != _kind(live):
        return [f"{at}: documented {_kind(documented)}, live {_kind(live)}"]
    if isinstance(documented, dict):
        found = [f"{at}: documented only: {sorted(documented.keys() - live.keys())}"] * bool(
            documented.keys() - live.keys()
        )
        found += [f"{at}: live only: {sorted(live.keys() - documented.keys())}"] * bool(
            live.keys() - documented.keys()
        )
        for key in documented.keys() & live.keys():
            found += shape_differences(documented[key], live[key], f"{at}.{key}")
        return found
    if isinstance(documented, list) and documented and live:
        # Every live item has the shape of the documented ones (lengths may differ).
        return [
            d
            for i, item in enumerate(live)
            for d in shape_differences(documented[min(i, len(documented) - 1)], item, f"{at}[{i}]")
        ]
    return []


def test_the_shape_check_can_fail() -> None:
    doc = {"a": 1, "b": [{"c": "x"}], "d": None}
    assert shape_differences(doc, {"a": 2.5, "b": [{"c": "y"}, {"c": "z"}], "d": None}) == []
    assert shape_differences(doc, {"a": 1, "b": [{"c": "x"}], "d": None, "e": 1})
    assert shape_differences(doc, {"a": 1, "b": [{"c": 1}], "d": None})
    assert shape_differences(doc, {"a": "1", "b": [], "d": None})
    assert shape_differences(doc, {"a": 1, "b": [{"c": "x"}], "d": 0.5})


def test_every_documented_output_of_a_runnable_example_is_json() -> None:
    for (page, line), output in OUTPUTS.items():
        example = next(b for b in ALL_BLOCKS if (b.page, b.line) == (page, line))
        if classify(example) == "run":
            assert _json_documents(output.body), output.where


def test_every_block_is_classified() -> None:
    problems = [c for c in map(classify, ALL_BLOCKS) if c not in ("run", "skip")]
    assert not problems, "\n".join(problems)


def test_the_readme_and_the_endpoint_pages_have_examples() -> None:
    pages = {block.page.name for block in EXAMPLES}
    assert {"README.md", "api.md", "mcq.md", "client.md"} <= pages, pages


def test_classification_refuses_what_it_cannot_run() -> None:
    """The classifier can fail: bare fences, other languages and unmarked local commands."""
    page = ROOT / "README.md"
    assert classify(Block(page, 1, (), "echo hi\n")) != "skip"
    assert classify(Block(page, 1, ("sh",), "echo hi\n")) != "skip"
    assert classify(Block(page, 1, ("bash",), "pip install x\n")) not in ("run", "skip")
    assert classify(Block(page, 1, ("bash", "norun"), "pip install x\n")) == "skip"
    assert classify(Block(page, 1, ("python",), f"print('{URL}')\n")) == "run"


def _json_documents(text: str) -> list[Any]:
    """The JSON values printed one after another (curl prints no newline between bodies)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return values
        value, i = decoder.raw_decode(text, i)
        values.append(value)


def _errors(value: Any) -> list[Any]:
    if isinstance(value, dict):
        found = [value["error"]] if "error" in value else []
        return found + [e for v in value.values() for e in _errors(v)]
    if isinstance(value, list):
        return [e for v in value for e in _errors(v)]
    return []


@pytest.mark.parametrize("block", EXAMPLES, ids=[b.where for b in EXAMPLES])
def test_example_runs(block: Block, server: Any, tmp_path: Path) -> None:
    code = block.body.replace(URL, server.url)
    if block.lang == "bash":
        # An HTTP error status fails the example, and its body is still shown.
        script = 'set -euo pipefail\ncurl() { command curl --fail-with-body -sS "$@"; }\n' + code
        argv = ["bash", "-c", script]
    else:
        path = tmp_path / "example.py"
        path.write_text(code)
        argv = [sys.executable, str(path)]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    shown = f"{block.where}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode == 0, shown
    if block.lang == "bash":
        try:
            bodies = _json_documents(done.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"not JSON ({exc}): {shown}") from exc
        assert bodies, f"no JSON body printed: {shown}"
        assert not any(_errors(body) for body in bodies), shown
        output = OUTPUTS.get((block.page, block.line))
        if output is not None:
            documented = _json_documents(output.body)
            assert len(documented) == len(bodies), f"{output.where}: {len(documented)} bodies"
            stale = [
                d
                for doc, live in zip(documented, bodies, strict=True)
                for d in shape_differences(doc, live)
            ]
            assert not stale, f"{output.where} is stale: {stale}\n{shown}"
