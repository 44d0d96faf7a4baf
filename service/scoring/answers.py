"""Rule verification of a final answer against a reference (docs/methods.md E).

Extraction is ours (the answer forms responses end with); equivalence is math-verify's
(fractions, decimals, percentages, units, sets, intervals, LaTeX vs plain). Pure and
synchronous: math-verify can run for unbounded time on a pathological expression and its own
timeout uses signals, so callers run ``check`` in a process they can kill
(service.serving.rules).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

Reason = Literal[
    "equivalent",
    "not_equivalent",
    "no_answer",
    "unparsable_answer",
    "unparsable_reference",
    "timeout",
    "error",
]

# A reference this short and not math is compared as a string (exact, case and spacing
# folded); longer free text cannot be decided by a rule.
MAX_STRING_ANSWER = 64
_LETTER = re.compile(r"^\s*\(?([A-Ja-j])\)?[.:]?\s*$")
_BOXED = "\\boxed"
_PATTERNS = (
    re.compile(r"####\s*(.+?)\s*$", re.MULTILINE),  # GSM8K
    re.compile(r"^\s*ANSWER\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE),
    re.compile(r"the (?:final )?answer is[:\s]*(.+?)\s*(?:\.\s*)?$", re.IGNORECASE | re.MULTILINE),
)
# "A: 18" as the last line (GSM8K's labelled solutions end so); only as the last line, where
# it cannot be an option being listed
_LAST_LINE_A = re.compile(r"^\s*A\s*:\s*(.+?)\s*$")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?%?")


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """The rule's view of one (response, reference) pair; ``equivalent`` None = undecided."""

    extracted: str | None
    reference: str | None
    equivalent: bool | None
    reason: Reason


def _last_boxed(text: str) -> str | None:
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j].strip() or None
    return None


def extract_answer(text: str) -> str | None:
    """The final answer a response states, by the first form that matches: the last
    ``\\boxed{}``, ``#### X``, ``ANSWER: X``, ``The answer is X``, a last line ``A: X``,
    a response that is only a letter, else the last number."""
    boxed = _last_boxed(text)
    if boxed:
        return boxed
    for pattern in _PATTERNS:
        found = pattern.findall(text)
        if found:
            return str(found[-1]).strip() or None
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines and (m := _LAST_LINE_A.match(lines[-1])):
        return m.group(1)
    if _LETTER.match(text):
        return text.strip()
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def reference_answer(reference: str) -> str | None:
    """A gold answer as given, or the final answer of a reference solution (several lines)."""
    ref = reference.strip()
    if "\n" in ref or len(ref) > MAX_STRING_ANSWER:
        return extract_answer(ref)
    return ref or None


def _letter(text: str) -> str | None:
    m = _LETTER.match(text)
    return m.group(1).upper() if m else None


def _fold(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


_WORDS = re.compile(r"[^\W\d_]{2,}(?:[\s.,'-]+[^\W\d_]+)*[.!]?")


def _math(text: str) -> list[object]:
    """math-verify's parse; [] for words (it would read "Paris" as P*a*r*i*s)."""
    if _WORDS.fullmatch(text.strip()):
        return []
    from math_verify import parse

    # Delimited first so LaTeX forms ({1,2}, intervals) parse; then as plain text.
    return list(parse(f"${text}$", parsing_timeout=None) or parse(text, parsing_timeout=None))


def check(response: str, reference: str) -> RuleCheck:
    """Compare the response's final answer with the reference. Runs unbounded: see module doc."""
    # math-verify warns on every call that its signal timeout is off; the caller bounds time
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    ref = reference_answer(reference)
    if ref is None:
        return RuleCheck(None, None, None, "unparsable_reference")
    answer = extract_answer(response)
    if answer is None:
        return RuleCheck(None, ref, None, "no_answer")
    gold_letter = _letter(ref)
    if gold_letter is not None:
        got = _letter(answer)
        if got is None:
            return RuleCheck(answer, ref, None, "unparsable_answer")
        return _decided(answer, ref, got == gold_letter)
    gold = _math(ref)
    if not gold:
        if len(ref) > MAX_STRING_ANSWER:
            return RuleCheck(answer, ref, None, "unparsable_reference")
        return _decided(answer, ref, _fold(answer) == _fold(ref))
    target = _math(answer)
    if not target:
        return RuleCheck(answer, ref, None, "unparsable_answer")
    from math_verify import verify

    return _decided(answer, ref, bool(verify(gold, target, timeout_seconds=None)))


def _decided(answer: str, ref: str, same: bool) -> RuleCheck:
    return RuleCheck(answer, ref, same, "equivalent" if same else "not_equivalent")
