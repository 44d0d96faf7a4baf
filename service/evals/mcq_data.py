"""Readers for multiple-choice data (docs/methods.md D): ARC jsonl and the mcqa CSV format.

Both return the items they could read and the rows they skipped, each with its reason; a row is
never dropped silently.

- ARC: ``{id, question: {stem, choices: [{text, label}]}, answerKey}``; keys are letters or
  digits 1-4, mapped by position.
- CSV: header ``question, choices, answer``; ``choices`` is a numpy-array repr string (items
  quoted with ' or ", separated by spaces or newlines, LaTeX backslashes and control characters
  escaped as Python escapes); ``answer`` a letter. 2-10 options.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from service.protocol.mcq import MAX_OPTIONS, MIN_OPTIONS


@dataclass(frozen=True, slots=True)
class GoldItem:
    id: str
    question: str
    options: list[str]
    answer_index: int

    @property
    def k(self) -> int:
        return len(self.options)


@dataclass(frozen=True, slots=True)
class Skipped:
    row: int  # 1-based line (jsonl) or record (csv) number
    reason: str


# One quoted element of a numpy repr: '...' or "..." with backslash escapes inside.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"', re.S)


def parse_choices(text: str) -> list[str]:
    """The option texts of a numpy-array repr such as ``['a' 'b'\\n "c's"]``."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"choices is not an array repr: {text[:60]!r}")
    out = []
    for token in _QUOTED.findall(body):
        value = ast.literal_eval(token)
        if not isinstance(value, str):
            raise ValueError(f"choice {token[:40]!r} is not a string")
        out.append(value)
    leftover = _QUOTED.sub("", body[1:-1])
    if leftover.strip(" \n\r\t,"):
        raise ValueError(f"unquoted text in choices: {leftover.strip()[:40]!r}")
    return out


def answer_index(key: str, labels: list[str]) -> int:
    """Index of ``key``: its position among the labels, else a letter A.. or a digit 1.."""
    key = key.strip()
    if key in labels:
        return labels.index(key)
    if len(key) == 1 and key.isalpha():
        return ord(key.upper()) - ord("A")
    if key.isdigit():
        return int(key) - 1
    raise ValueError(f"answer key {key!r} is neither a label, a letter nor a digit")


def _checked(item_id: str, question: str, options: list[str], index: int) -> GoldItem:
    if not question.strip():
        raise ValueError("empty question")
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"{len(options)} options; {MIN_OPTIONS}-{MAX_OPTIONS} are supported")
    if any(not o.strip() for o in options):
        raise ValueError("an empty option")
    if not 0 <= index < len(options):
        raise ValueError(f"answer index {index} outside {len(options)} options")
    return GoldItem(item_id, question, options, index)


def read_arc(path: Path) -> tuple[list[GoldItem], list[Skipped]]:
    items, skipped = [], []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                q = row["question"]
                labels = [str(c["label"]) for c in q["choices"]]
                options = [str(c["text"]) for c in q["choices"]]
                index = answer_index(str(row["answerKey"]), labels)
                items.append(_checked(str(row.get("id", n)), str(q["stem"]), options, index))
            except (KeyError, TypeError, ValueError) as exc:
                skipped.append(Skipped(n, f"{type(exc).__name__}: {exc}"))
    return items, skipped


def read_mcqa_csv(path: Path) -> tuple[list[GoldItem], list[Skipped]]:
    items, skipped = [], []
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long LaTeX questions
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"question", "choices", "answer"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing CSV columns {sorted(missing)}")
        for n, row in enumerate(reader, 1):
            try:
                options = parse_choices(row["choices"] or "")
                answer = (row["answer"] or "").strip()
                if len(answer) != 1 or not answer.isalpha():
                    raise ValueError(f"answer {answer!r} is not a letter")
                index = ord(answer.upper()) - ord("A")
                items.append(
                    _checked(str(row.get("id") or n), row["question"] or "", options, index)
                )
            except (ValueError, SyntaxError, MemoryError) as exc:
                skipped.append(Skipped(n, f"{type(exc).__name__}: {exc}"))
    return items, skipped


def read_items(path: Path) -> tuple[list[GoldItem], list[Skipped]]:
    """ARC jsonl (``.jsonl``/``.json``) or mcqa CSV (``.csv``), by extension."""
    if path.suffix.lower() == ".csv":
        return read_mcqa_csv(path)
    return read_arc(path)
