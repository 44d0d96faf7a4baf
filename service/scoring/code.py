"""Code verification without running anything: the response's code, the programs a test case
runs, and what their output means (docs/methods.md, Part L).

The response's code is its last fenced block tagged with the language (``python``, ``py``,
``python3``; ``bash``, ``sh``), else its last untagged block, else the whole response when it
has no fence at all. A stdin/stdout case passes when the program exits 0 and its stdout equals
the expected one line by line, trailing whitespace and trailing blank lines ignored. An
assertion case runs the response's code, then the case's code, in one namespace (the
concatenation HumanEval and MBPP use), and passes when a marker written after the case's last
line appears: a program that exits early with status 0 (``sys.exit(0)``, ``os._exit(0)``)
skips the marker and fails.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from service.scoring.ties import tie_groups

ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "python": ("python", "py", "python3"),
    "bash": ("bash", "sh", "shell"),
    "nodejs": ("javascript", "js", "node", "nodejs"),
}
_FENCE = re.compile(r"^[ \t]*```[ \t]*([^\n`]*)\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
STDERR_TAIL: Final = 500
# Two finals from the same pass count are equal floats; nothing else is within this.
SAME_FINAL: Final = 1e-12

Outcome = Literal["passed", "failed", "timeout", "error"]


def extract_code(response: str, language: str) -> str | None:
    """The code to run (module docstring), or None when the response's fences hold no block
    in ``language`` and none untagged."""
    blocks = [(m.group(1).strip().lower(), m.group(2)) for m in _FENCE.finditer(response)]
    if not blocks:
        return response if response.strip() else None
    names = ALIASES.get(language, (language,))
    tagged = [body for tag, body in blocks if tag and tag.split()[0] in names]
    untagged = [body for tag, body in blocks if not tag]
    return (tagged or untagged or [None])[-1]


def stdout_matches(got: str, expected: str) -> bool:
    return _lines(got) == _lines(expected)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@dataclass(frozen=True, slots=True)
class AssertProgram:
    """The files of an assertion case and the marker its stdout must carry to pass."""

    files: dict[str, str]
    marker: str


def assertion_program(code: str, test: str) -> AssertProgram:
    """``main.py`` runs ``solution.py`` then ``test.py`` in one namespace, then writes a fresh
    marker; it deletes itself first, so the marker is not on the disk the program can read."""
    marker = f"tests-completed-{secrets.token_hex(16)}"
    main = (
        "import os as _os\n"
        "_os.remove(__file__)\n"
        "_g = {'__name__': '__main__', '__builtins__': __builtins__}\n"
        "for _f in ('solution.py', 'test.py'):\n"
        "    with open(_f) as _src:\n"
        "        _code = compile(_src.read(), _f, 'exec')\n"
        "    exec(_code, _g)\n"
        f"_os.write(1, b'\\n{marker}\\n')\n"
    )
    return AssertProgram({"main.py": main, "solution.py": code, "test.py": test}, marker)


def assertion_passed(exit_code: int | None, stdout: str, marker: str) -> bool:
    return exit_code == 0 and marker in stdout


def reward(outcomes: Sequence[Outcome], rule: Literal["all_pass", "fraction"]) -> float:
    if not outcomes:
        return 0.0
    passed = sum(o == "passed" for o in outcomes)
    if rule == "all_pass":
        return float(passed == len(outcomes))
    return passed / len(outcomes)


def tail(text: str) -> str:
    return text[-STDERR_TAIL:]


def rank_with_tiebreak(finals: Sequence[float | None], tiebreak: Sequence[float]) -> list[int]:
    """Best first by the tests' final, equal finals by the model's score, then lowest index;
    an undecided final (None) after every decided one."""
    primary = [-1.0 if f is None else f for f in finals]
    return sorted(range(len(finals)), key=lambda i: (-primary[i], -tiebreak[i], i))


def split_ties(groups: list[list[int]], finals: Sequence[float | None]) -> list[list[int]]:
    """Tie groups of the tiebreak scores kept only within one final (the tests told apart
    what the model cannot)."""
    return [tied for group in groups for tied in tie_groups(finals, group, SAME_FINAL)]
