"""Splitting a candidate response into reasoning steps (docs/methods.md A.4).

Pure functions only: the model-based splitter's *prompting* lives elsewhere; this module
parses and checks its output and encodes the heuristic/model/auto policy.

Example:
    >>> heuristic_split("Add the eggs.\\n\\nThen bake.\\n1. Serve.")
    ['Add the eggs.', 'Then bake.', '1. Serve.']
    >>> parse_model_split("a b c", "a b [SPLIT] c", max_steps=8)
    (['a b', 'c'], None)
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final, Literal, get_args

SplitMethod = Literal["heuristic", "model", "auto"]
SPLIT_MARKER: Final = "[SPLIT]"

# A numbered step: "1.", "2)", "Step 3:", "step 3." (a bare "1.5" is a number, not a step).
_STEP_RE: Final = re.compile(r"^\s*(?:step\s*\d+\s*[:.)]|\d+[.)](?=\s|$))", re.IGNORECASE)
_FENCE_OPEN_RE: Final = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# Only closed display math counts; a stray "$$" or "\[" must not glue the rest of the text.
_MATH_OPEN_RE: Final = re.compile(r"\$\$|(?<!\\)\\\[")
_MATH_CLOSE: Final = {"$$": "$$", "\\[": "\\]"}
_NON_WS_RE: Final = re.compile(r"\S+")
_STEP_JOINER: Final = "\n\n"


@dataclass(frozen=True)
class SplitResult:
    """The steps chosen for a response and how they were obtained.

    `method_used` is "heuristic" or "model"; `fallback_reason` is set only when the model
    split was requested (or chosen by "auto") but rejected, so the heuristic was used.

    Example:
        >>> choose_split("one\\n\\ntwo", "heuristic", 64, None)
        SplitResult(steps=['one', 'two'], method_used='heuristic', fallback_reason=None)
    """

    steps: list[str]
    method_used: Literal["heuristic", "model"]
    fallback_reason: str | None


def normalize_ws(text: str) -> str:
    """Collapse every whitespace run to a single space and strip both ends."""
    return " ".join(_NON_WS_RE.findall(text))


def heuristic_split(text: str, max_steps: int = 64) -> list[str]:
    """Split `text` into steps on blank lines and numbered-step lines.

    Fenced code blocks (``` or ~~~) and closed display math (``$$ … $$``, ``\\[ … \\]``) are
    never cut. Pieces are stripped and empty ones dropped; above `max_steps` pieces, the
    adjacent pair with the smallest combined length (leftmost on ties) is merged with a
    blank line until the cap holds.
    """
    _check_max_steps(max_steps)
    return _merge_to_cap(_raw_pieces(text), max_steps)


def has_structure(text: str) -> bool:
    """Whether the heuristic splitter finds more than one step in `text`."""
    return len(heuristic_split(text)) > 1


def parse_model_split(
    original: str, model_output: str, max_steps: int
) -> tuple[list[str] | None, str | None]:
    """Split a model's marked-up copy of `original`; return (steps, None) or (None, reason).

    The copy is cut on SPLIT_MARKER, pieces are stripped and empty ones dropped. The copy is
    accepted when, after whitespace normalisation, the pieces reproduce the original with
    each marker boundary standing for either one whitespace run or nothing. That accepts
    both the " "-joined and the ""-joined comparison (a marker between words, or one the
    model put inside a word) and mixtures of the two. The returned steps are slices of
    `original`, so whitespace the model altered (e.g. code indentation) is restored. An
    original that itself contains the marker text can never match and is rejected.
    """
    _check_max_steps(max_steps)
    if SPLIT_MARKER not in model_output:
        return None, "model output had no split markers"
    pieces = [piece.strip() for piece in model_output.split(SPLIT_MARKER)]
    pieces = [piece for piece in pieces if piece]
    if not pieces:
        return None, "model output contained only split markers"
    target, offsets = _normalized_with_offsets(original)
    spans, reason = _match_pieces(target, pieces)
    if reason is not None:
        return None, reason
    steps = [original[offsets[start] : offsets[end - 1] + 1] for start, end in spans]
    return _merge_to_cap(steps, max_steps), None


def needs_model(text: str, method: SplitMethod) -> bool:
    """Whether the caller must run the model splitter before calling `choose_split`."""
    _check_method(method)
    if method == "auto":
        return not has_structure(text)
    return method == "model"


def choose_split(
    text: str, method: SplitMethod, max_steps: int, model_output: str | None
) -> SplitResult:
    """Apply the splitting policy (docs/methods.md A.4) to `text`.

    - "heuristic": the heuristic split.
    - "model": the parsed model split; on rejection (or no `model_output`) the heuristic
      split with `fallback_reason` set.
    - "auto": the heuristic split when it finds structure; otherwise as "model", except that
      a missing `model_output` silently yields the heuristic split (no fallback reason).
    """
    _check_method(method)
    heuristic = heuristic_split(text, max_steps)
    if method == "heuristic" or (method == "auto" and len(heuristic) > 1):
        return SplitResult(heuristic, "heuristic", None)
    if model_output is None:
        reason = "no model output was provided" if method == "model" else None
        return SplitResult(heuristic, "heuristic", reason)
    steps, reason = parse_model_split(text, model_output, max_steps)
    if steps is None:
        return SplitResult(heuristic, "heuristic", reason)
    return SplitResult(steps, "model", None)


def _check_max_steps(max_steps: int) -> None:
    """Reject a step cap below one."""
    if max_steps < 1:
        raise ValueError(
            f"max_steps must be >= 1, got {max_steps}; use e.g. 64 (docs/methods.md A.4)"
        )


def _check_method(method: str) -> None:
    """Reject an unknown split method name."""
    allowed = get_args(SplitMethod)
    if method not in allowed:
        raise ValueError(f"unknown split method {method!r}; expected one of {allowed}")


def _raw_pieces(text: str) -> list[str]:
    """Cut `text` at blank lines and numbered-step lines outside protected blocks."""
    lines = text.split("\n")
    pieces: list[str] = []
    current: list[str] = []
    for line, glued in zip(lines, _glued_lines(lines), strict=True):
        if glued:
            current.append(line)
            continue
        blank = not line.strip()
        if blank or _STEP_RE.match(line):
            _flush(current, pieces)
        if not blank:
            current.append(line)
    _flush(current, pieces)
    return pieces


def _flush(current: list[str], pieces: list[str]) -> None:
    """Move the accumulated lines into `pieces` as one stripped piece (if non-empty)."""
    piece = "\n".join(current).strip()
    if piece:
        pieces.append(piece)
    current.clear()


def _glued_lines(lines: Sequence[str]) -> list[bool]:
    """Mark lines that continue a fenced code block or display math begun on an earlier line."""
    fences = _fence_spans(lines)
    fenced = {i for first, last in fences for i in range(first, last + 1)}
    glued = [False] * len(lines)
    for first, last in [*fences, *_math_spans(lines, fenced)]:
        for i in range(first + 1, last + 1):
            glued[i] = True
    return glued


def _fence_spans(lines: Sequence[str]) -> list[tuple[int, int]]:
    """Inclusive line ranges of fenced code blocks; an unclosed fence runs to the end."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN_RE.match(lines[i])
        if opening is None:
            i += 1
            continue
        last = _fence_close(lines, i + 1, opening.group(1))
        spans.append((i, last))
        i = last + 1
    return spans


def _fence_close(lines: Sequence[str], start: int, fence: str) -> int:
    """Index of the line closing `fence` (same char, at least as long), else the last line."""
    closer = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for j in range(start, len(lines)):
        if closer.match(lines[j]):
            return j
    return len(lines) - 1


def _math_spans(lines: Sequence[str], fenced: set[int]) -> list[tuple[int, int]]:
    """Inclusive line ranges of closed display math outside code fences."""
    # Blank fenced lines (keeping offsets) so "$$" inside code is not taken for math.
    masked = "\n".join(" " * len(line) if i in fenced else line for i, line in enumerate(lines))
    line_starts = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    spans: list[tuple[int, int]] = []
    for start, end in _math_char_spans(masked):
        first = bisect_right(line_starts, start) - 1
        last = bisect_right(line_starts, end - 1) - 1
        if last > first:
            spans.append((first, last))
    return spans


def _math_char_spans(text: str) -> Iterator[tuple[int, int]]:
    """Char ranges of closed display math, leftmost first (like a lazy regex, but linear)."""
    pos = 0
    unclosed: set[str] = set()
    while (opening := _MATH_OPEN_RE.search(text, pos)) is not None:
        pos = opening.end()
        closer = _MATH_CLOSE[opening.group()]
        # No closer after one opener means none after any later opener of that kind either.
        if opening.group() in unclosed:
            continue
        end = text.find(closer, pos)
        if end < 0:
            unclosed.add(opening.group())
            continue
        pos = end + len(closer)
        yield opening.start(), pos


def _merge_to_cap(pieces: Sequence[str], max_steps: int) -> list[str]:
    """Merge the shortest adjacent pair (leftmost on ties) until at most `max_steps` remain."""
    texts = list(pieces)
    count = len(texts)
    if count <= max_steps:
        return texts
    # Linked list + lazy heap: O(n log n) even for responses with thousands of lines.
    nxt = [*range(1, count), -1]
    prv = [-1, *range(count - 1)]
    heap = [(len(texts[i]) + len(texts[i + 1]), i, i + 1) for i in range(count - 1)]
    heapq.heapify(heap)
    while count > max_steps:
        total, left, right = heapq.heappop(heap)
        if nxt[left] != right or len(texts[left]) + len(texts[right]) != total:
            continue  # stale entry: one side has merged since it was pushed
        texts[left] += _STEP_JOINER + texts[right]
        texts[right] = ""
        nxt[left] = nxt[right]
        nxt[right] = -2  # dead: never equal to a live right-hand index
        if nxt[left] >= 0:
            prv[nxt[left]] = left
            heapq.heappush(heap, (len(texts[left]) + len(texts[nxt[left]]), left, nxt[left]))
        if prv[left] >= 0:
            heapq.heappush(heap, (len(texts[prv[left]]) + len(texts[left]), prv[left], left))
        count -= 1
    return _live_texts(texts, nxt)


def _live_texts(texts: Sequence[str], nxt: Sequence[int]) -> list[str]:
    """Walk the merge linked list from its head (index 0 never dies)."""
    out: list[str] = []
    i = 0
    while i >= 0:
        out.append(texts[i])
        i = nxt[i]
    return out


def _normalized_with_offsets(text: str) -> tuple[str, list[int]]:
    """Whitespace-normalise `text`; also return each output char's offset in `text`."""
    parts: list[str] = []
    offsets: list[int] = []
    for match in _NON_WS_RE.finditer(text):
        if parts:
            parts.append(" ")
            offsets.append(match.start() - 1)
        parts.append(match.group())
        offsets.extend(range(match.start(), match.end()))
    return "".join(parts), offsets


def _match_pieces(target: str, pieces: Sequence[str]) -> tuple[list[tuple[int, int]], str | None]:
    """Locate consecutive `pieces` in normalised `target`; return spans or a mismatch reason."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        norm = normalize_ws(piece)
        # Pieces never start with a space, so consuming one here is forced, not a guess.
        if spans and target.startswith(" ", pos):
            pos += 1
        if not target.startswith(norm, pos):
            where = pos + _common_prefix_len(target, pos, norm)
            if where >= len(target):
                return spans, f"model copy has extra text after the original's end (char {where})"
            return spans, f"model copy differs from the original at char {where}"
        spans.append((pos, pos + len(norm)))
        pos += len(norm)
    if pos != len(target):
        return spans, f"model copy ends early, at char {pos} of {len(target)}"
    return spans, None


def _common_prefix_len(target: str, pos: int, piece: str) -> int:
    """Length of the common prefix of `target[pos:]` and `piece`."""
    n = 0
    for a, b in zip(target[pos:], piece, strict=False):
        if a != b:
            break
        n += 1
    return n
