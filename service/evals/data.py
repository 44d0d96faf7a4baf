"""Every reader of the evaluation data sets (data/SOURCES.md): strict rows, readable errors.

The scoring layer does no file I/O; the evals, the benchmarks and the tests read through here.

- GSM8K example solutions (Best-of-N, docs/methods.md A.5): `load_gsm8k_solutions`, a JSONL
  file whose every line is a `SolutionsRow`; a bad line raises ValueError naming its number and
  each bad field.
- ProcessBench (docs/methods.md A.7): `load_processbench`, a JSON array of `ProcessBenchRow`.
- Multiple-choice data (docs/methods.md D): `read_items` returns the items it could read and the
  rows it skipped, each with its reason; a row is never dropped silently.

  - ARC: ``{id, question: {stem, choices: [{text, label}]}, answerKey}``; keys are letters or
    digits 1-4, mapped by position.
  - CSV: header ``question, choices, answer``; ``choices`` is a numpy-array repr string (items
    quoted with ' or ", separated by spaces or newlines, LaTeX backslashes and control
    characters escaped as Python escapes); ``answer`` a letter. 2-10 options.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from service.scoring.bestofn import SOLVER_ORDER, BestOfNItem, Candidate
from service.scoring.metrics_eval import ProcessBenchItem

# The option counts the service accepts. Spelled here, not read from the client's models: the
# benchmarks read data too and `verifier serve` loads them; tests/unit/test_mcq_data.py checks
# these against verifier_client.models.
MIN_OPTIONS: Final = 2
MAX_OPTIONS: Final = 10


class DataRow(BaseModel):
    """A row read from a data file: types are checked, not coerced ("yes" is no bool)."""

    model_config = ConfigDict(strict=True, frozen=True)


def row_error(exc: ValidationError) -> str:
    """One line per bad row: ``field 'a.b': <what is wrong>; ...``.

    Example:
        >>> try:
        ...     DataRow.model_validate([])
        ... except ValidationError as exc:
        ...     row_error(exc)
        'Input should be a valid dictionary or instance of DataRow'
    """
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"field {loc!r}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")


# --- GSM8K example solutions (Best-of-N) -----------------------------------------------------


class SolverEntry(DataRow):
    """One solver's entry in a row: ``{"is_correct": bool, "solution": str}``."""

    is_correct: bool
    solution: str


class SolutionsRow(DataRow):
    """One line of ``example_model_solutions.jsonl``; a solver entry per `SOLVER_ORDER` name."""

    question: str
    ground_truth: str
    finetuning_6b: SolverEntry = Field(alias="6b_finetuning")
    verification_6b: SolverEntry = Field(alias="6b_verification")
    finetuning_175b: SolverEntry = Field(alias="175b_finetuning")
    verification_175b: SolverEntry = Field(alias="175b_verification")

    def to_item(self) -> BestOfNItem:
        entries = (
            self.finetuning_6b,
            self.verification_6b,
            self.finetuning_175b,
            self.verification_175b,
        )
        candidates = tuple(
            Candidate(name, e.solution, e.is_correct)
            for name, e in zip(SOLVER_ORDER, entries, strict=True)
        )
        return BestOfNItem(self.question, self.ground_truth, candidates)


def parse_gsm8k_row(row: Mapping[str, object]) -> BestOfNItem:
    """Build a `BestOfNItem` from one decoded line of ``example_model_solutions.jsonl``.

    A bad row raises ValueError naming each bad field, e.g. ``field '6b_finetuning.solution':
    Field required``.
    """
    try:
        return SolutionsRow.model_validate(row).to_item()
    except ValidationError as exc:
        raise ValueError(row_error(exc)) from exc


def load_gsm8k_solutions(path: Path, limit: int | None = None) -> list[BestOfNItem]:
    """Read up to `limit` items (all when None) from a GSM8K example-solutions JSONL file."""
    _check_limit(limit)
    items: list[BestOfNItem] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if limit is not None and len(items) >= limit:
                break
            if not line.strip():
                continue
            try:
                items.append(parse_gsm8k_row(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from exc
    return items


# --- ProcessBench ----------------------------------------------------------------------------


class ProcessBenchRow(DataRow):
    """One object of a ProcessBench JSON array (docs/methods.md A.7)."""

    id: str
    generator: str
    problem: str
    steps: list[str]
    final_answer_correct: bool
    label: int

    @field_validator("label")
    @classmethod
    def _step_index(cls, label: int, info: ValidationInfo) -> int:
        steps = info.data.get("steps")  # absent when the steps were invalid themselves
        if steps is not None and not -1 <= label < len(steps):
            raise ValueError(f"must be an int in [-1, {len(steps) - 1}], got {label}")
        return label

    def to_item(self) -> ProcessBenchItem:
        return ProcessBenchItem(
            id=self.id,
            generator=self.generator,
            problem=self.problem,
            steps=tuple(self.steps),
            final_answer_correct=self.final_answer_correct,
            label=self.label,
        )


def parse_processbench_item(obj: Mapping[str, object]) -> ProcessBenchItem:
    """Build a `ProcessBenchItem` from one decoded JSON object, validating every field.

    A bad object raises ValueError naming each bad field, e.g. ``field 'label': ...``.
    """
    try:
        return ProcessBenchRow.model_validate(obj).to_item()
    except ValidationError as exc:
        raise ValueError(row_error(exc)) from exc


def load_processbench(path: Path, limit: int | None = None) -> list[ProcessBenchItem]:
    """Read up to `limit` items (all when None) from a ProcessBench JSON array file."""
    _check_limit(limit)
    with path.open(encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON array of items (docs/methods.md A.7)")
    rows = data if limit is None else data[:limit]
    items: list[ProcessBenchItem] = []
    for index, row in enumerate(rows):
        try:
            items.append(parse_processbench_item(row))
        except ValueError as exc:
            raise ValueError(f"{path}: item {index}: {exc}") from exc
    return items


# --- multiple-choice questions (ARC jsonl, mcqa CSV) -----------------------------------------


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


# --- HumanEval (code verification, docs/methods.md L) -----------------------------------------


class HumanEvalRow(DataRow):
    """One task of HumanEval.jsonl.gz: the function's signature and docstring (``prompt``), a
    reference body, the ``check(candidate)`` test and the function's name."""

    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def canonical(self) -> str:
        return self.prompt + self.canonical_solution

    @property
    def broken(self) -> str:
        """The reference with its return statements removed (it runs, and returns None)."""
        return self.prompt + without_returns(self.canonical_solution)

    @property
    def check(self) -> str:
        """The assertion case: the test's ``check`` called on the function."""
        return f"{self.test}\ncheck({self.entry_point})\n"


def load_humaneval(path: Path, limit: int | None = None) -> list[HumanEvalRow]:
    """The first ``limit`` tasks of a HumanEval JSONL file (gzipped when it ends in .gz)."""
    import gzip

    _check_limit(limit)
    opener = gzip.open if path.suffix == ".gz" else open
    rows: list[HumanEvalRow] = []
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if limit is not None and len(rows) >= limit:
                break
            if not line.strip():
                continue
            try:
                rows.append(HumanEvalRow.model_validate_json(line))
            except ValidationError as exc:
                raise ValueError(f"{path}:{number}: {row_error(exc)}") from exc
    return rows


_RETURN = re.compile(r"^([ \t]*)return\b.*$", re.MULTILINE)


def without_returns(code: str) -> str:
    """``code`` with every line that starts a return statement replaced by ``pass`` (the broken
    solutions of the code eval: they run, and return None)."""
    return _RETURN.sub(r"\1pass", code)
