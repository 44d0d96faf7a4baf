"""Tests for service.scoring.splitting (docs/methods.md A.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.scoring.splitting import (
    SPLIT_MARKER,
    SplitResult,
    choose_split,
    has_structure,
    heuristic_split,
    needs_model,
    normalize_ws,
    parse_model_split,
)

# --- heuristic_split: examples ---------------------------------------------------------


def test_blank_lines_split_paragraphs_and_strip() -> None:
    text = "  First step.\nstill first\n\n\n   Second step.  \n \t\nThird.\n\n"
    assert heuristic_split(text) == ["First step.\nstill first", "Second step.", "Third."]


def test_empty_and_whitespace_text_give_no_steps() -> None:
    assert heuristic_split("") == []
    assert heuristic_split(" \n\n\t \n") == []


def test_numbered_lines_split_without_blank_lines() -> None:
    text = "Intro line\n1. first\n2) second\nStep 3: third\n  step 4. fourth\nSTEP 5) fifth"
    assert heuristic_split(text) == [
        "Intro line",
        "1. first",
        "2) second",
        "Step 3: third",
        "step 4. fourth",
        "STEP 5) fifth",
    ]


def test_numbered_step_keeps_its_continuation_lines() -> None:
    text = "1. compute 3 + 4\n   = 7\n2. double it"
    assert heuristic_split(text) == ["1. compute 3 + 4\n   = 7", "2. double it"]


def test_decimal_number_at_line_start_is_not_a_step() -> None:
    text = "The rate is\n1.5 per hour\n12 eggs remain"
    assert heuristic_split(text) == [text]


def test_fenced_code_block_is_never_cut() -> None:
    code = "```python\nx = 1\n\n1. not a step\n\ny = 2\n```"
    text = f"Write code:\n{code}\nDone.\n\nNext step."
    assert heuristic_split(text) == [f"Write code:\n{code}\nDone.", "Next step."]


def test_tilde_fence_ignores_backtick_lines_and_needs_long_enough_closer() -> None:
    code = "~~~~\na\n\n```\n~~~\n\nb\n~~~~~"
    text = f"{code}\n\nafter"
    assert heuristic_split(text) == [code, "after"]


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "before\n\n```\ncode\n\n2. more code"
    assert heuristic_split(text) == ["before", "```\ncode\n\n2. more code"]


def test_display_math_dollars_is_never_cut() -> None:
    math_block = "$$\na = b\n\n1. + c\n$$"
    text = f"So\n{math_block}\n\nThen."
    assert heuristic_split(text) == [f"So\n{math_block}", "Then."]


def test_display_math_brackets_is_never_cut() -> None:
    text = "Hence \\[\nx^2\n\n= 4\n\\] so x = 2.\n\nFinally."
    assert heuristic_split(text) == ["Hence \\[\nx^2\n\n= 4\n\\] so x = 2.", "Finally."]


def test_unclosed_display_math_does_not_glue_the_rest() -> None:
    text = "It costs $$\n\nthen\n\nmore"
    assert heuristic_split(text) == ["It costs $$", "then", "more"]


def test_latex_line_break_spacing_is_not_display_math() -> None:
    # "\\[2pt]" is a LaTeX line break with spacing, not an opening "\[".
    text = "a \\\\[2pt]\n\nb\n\n\\]"
    assert heuristic_split(text) == ["a \\\\[2pt]", "b", "\\]"]


def test_many_unclosed_openers_stay_separate() -> None:
    text = "\n\n".join(["\\[ x"] * 300 + ["$$ y"])
    assert heuristic_split(text, max_steps=1000) == ["\\[ x"] * 300 + ["$$ y"]


def test_dollars_inside_code_do_not_open_math() -> None:
    text = "```\necho $$\n```\n\nmiddle\n\nlast $$ x $$"
    assert heuristic_split(text) == ["```\necho $$\n```", "middle", "last $$ x $$"]


# --- heuristic_split: the step cap ------------------------------------------------------


def test_cap_merges_shortest_adjacent_pair() -> None:
    text = "aaaa\n\nb\n\nc\n\ndddd"
    assert heuristic_split(text, max_steps=3) == ["aaaa", "b\n\nc", "dddd"]


def test_cap_merge_ties_go_leftmost() -> None:
    assert heuristic_split("a\n\nb\n\nc", max_steps=2) == ["a\n\nb", "c"]


def test_cap_merges_repeatedly_down_to_one() -> None:
    assert heuristic_split("a\n\nbb\n\nc\n\ndd", max_steps=1) == ["a\n\nbb\n\nc\n\ndd"]


def test_cap_merge_uses_updated_lengths() -> None:
    # After "b"+"c" (len 2) merge, "b\n\nc" is long, so "ee"+"f" (len 3) goes next, not b/c again.
    text = "aaaaa\n\nb\n\nc\n\nee\n\nf"
    assert heuristic_split(text, max_steps=3) == ["aaaaa", "b\n\nc", "ee\n\nf"]


@pytest.mark.parametrize("bad", [0, -1])
def test_max_steps_below_one_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match="max_steps"):
        heuristic_split("a", max_steps=bad)
    with pytest.raises(ValueError, match="max_steps"):
        parse_model_split("a", "a[SPLIT]", max_steps=bad)


def _naive_merge(pieces: list[str], max_steps: int) -> list[str]:
    """Reference implementation of the cap: rescan all pairs after every merge."""
    out = list(pieces)
    while len(out) > max_steps:
        i = min(range(len(out) - 1), key=lambda k: len(out[k]) + len(out[k + 1]))
        out[i : i + 2] = [out[i] + "\n\n" + out[i + 1]]
    return out


@given(
    pieces=st.lists(st.text(alphabet="xyz", min_size=1, max_size=12), min_size=1, max_size=40),
    max_steps=st.integers(min_value=1, max_value=45),
)
def test_cap_matches_naive_reference(pieces: list[str], max_steps: int) -> None:
    text = "\n\n".join(pieces)
    assert heuristic_split(text, max_steps) == _naive_merge(pieces, max_steps)


# --- heuristic_split: properties on generated documents ---------------------------------

_words = st.text(alphabet="abcdefghij", min_size=1, max_size=6)
_lines = st.lists(_words, min_size=1, max_size=6).map(" ".join)
_paragraphs = st.lists(_lines, min_size=1, max_size=3).map("\n".join)
_numbered = st.builds(
    lambda n, fmt, body: fmt.format(n=n, body=body),
    st.integers(min_value=1, max_value=30),
    st.sampled_from(["{n}. {body}", "{n}) {body}", "Step {n}: {body}", "step {n}. {body}"]),
    _lines,
)
_code_lines = st.one_of(_lines, st.sampled_from(["", "  ", "1. x = 1", "Step 2: y", "$$", "  z"]))
_separators = st.sampled_from(["\n", "\n\n", "\n\n\n", "\n \t\n"])


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A text of paragraphs, numbered lines and fenced code blocks, plus its code blocks."""
    kinds = draw(st.lists(st.sampled_from(["para", "num", "code"]), min_size=1, max_size=12))
    parts: list[str] = []
    blocks: list[str] = []
    for kind in kinds:
        if kind == "para":
            parts.append(draw(_paragraphs))
        elif kind == "num":
            parts.append(draw(_numbered))
        else:
            fence = draw(st.sampled_from(["```", "~~~", "````"]))
            body = draw(st.lists(_code_lines, max_size=5))
            # The id line makes each block unique, so "appears once" is well defined.
            block = "\n".join([fence + "text", f"# block {len(blocks)}", *body, fence])
            blocks.append(block)
            parts.append(block)
    separators = draw(st.lists(_separators, min_size=len(parts), max_size=len(parts)))
    text = draw(st.sampled_from(["", "  \n"]))
    for part, sep in zip(parts, separators, strict=True):
        text += part + sep
    return text, blocks


@given(doc=_documents(), max_steps=st.integers(min_value=1, max_value=20))
def test_split_preserves_text_up_to_whitespace(doc: tuple[str, list[str]], max_steps: int) -> None:
    text, _ = doc
    steps = heuristic_split(text, max_steps)
    assert normalize_ws(" ".join(steps)) == normalize_ws(text)
    assert 1 <= len(steps) <= max_steps
    assert all(step and step == step.strip() for step in steps)


@given(doc=_documents(), max_steps=st.integers(min_value=1, max_value=20))
def test_every_code_block_lands_whole_in_exactly_one_step(
    doc: tuple[str, list[str]], max_steps: int
) -> None:
    text, blocks = doc
    steps = heuristic_split(text, max_steps)
    for block in blocks:
        assert sum(step.count(block) for step in steps) == 1


@given(doc=_documents())
def test_uncapped_split_separates_every_numbered_line(doc: tuple[str, list[str]]) -> None:
    text, _ = doc
    steps = heuristic_split(text, max_steps=1000)
    for step in steps:
        first, *rest = step.split("\n")
        # Outside code blocks, a numbered line may only open a step, never continue one.
        if "```" not in step and "~~~" not in step:
            assert not any(line[:1].isdigit() or line.lower().startswith("step") for line in rest)
        assert first.strip()


# --- has_structure / normalize_ws --------------------------------------------------------


def test_has_structure() -> None:
    assert has_structure("one\n\ntwo")
    assert has_structure("1. a\n2. b")
    assert not has_structure("a single line of reasoning with no breaks")
    assert not has_structure("```\na\n\nb\n```")


def test_normalize_ws() -> None:
    assert normalize_ws("  a\n\n b\t\tc \u00a0d  ") == "a b c d"
    assert normalize_ws(" \n ") == ""


# --- parse_model_split --------------------------------------------------------------------

ORIGINAL = "We have 3 eggs.  Then we buy 4 more,\nso 3 + 4 = 7.\nAnswer: 7"


def test_model_split_accepts_an_exact_copy() -> None:
    output = "We have 3 eggs. [SPLIT] Then we buy 4 more, so 3 + 4 = 7.[SPLIT]\nAnswer: 7"
    steps, reason = parse_model_split(ORIGINAL, output, max_steps=8)
    assert reason is None
    assert steps == ["We have 3 eggs.", "Then we buy 4 more,\nso 3 + 4 = 7.", "Answer: 7"]


def test_model_split_accepts_marker_glued_between_words() -> None:
    # Space-joined comparison: the marker replaced the whitespace between two words.
    steps, reason = parse_model_split("alpha beta gamma", "alpha[SPLIT]beta gamma", 8)
    assert (steps, reason) == (["alpha", "beta gamma"], None)


def test_model_split_accepts_marker_inside_a_word() -> None:
    # ""-joined comparison: the marker sits where the original has no whitespace.
    steps, reason = parse_model_split("x=1.y=2", "x=1.[SPLIT]y=2", 8)
    assert (steps, reason) == (["x=1.", "y=2"], None)


def test_model_split_accepts_mixed_boundaries() -> None:
    steps, reason = parse_model_split("a b.c d", "a[SPLIT]b.[SPLIT]c d", 8)
    assert (steps, reason) == (["a", "b.", "c d"], None)


def test_model_split_restores_original_whitespace() -> None:
    original = "Code:\n\n    if x:\n        y()\nDone."
    output = "Code: [SPLIT] if x: y() [SPLIT] Done."
    steps, reason = parse_model_split(original, output, 8)
    assert reason is None
    assert steps == ["Code:", "if x:\n        y()", "Done."]


def test_model_split_rejects_changed_text_with_position() -> None:
    steps, reason = parse_model_split("a b c", "a [SPLIT] b d", 8)
    assert steps is None
    assert reason == "model copy differs from the original at char 4"


def test_model_split_rejects_a_truncated_copy() -> None:
    steps, reason = parse_model_split("a b c d", "a [SPLIT] b", 8)
    assert steps is None
    assert reason == "model copy ends early, at char 3 of 7"


def test_model_split_rejects_extra_text() -> None:
    steps, reason = parse_model_split("a b", "a [SPLIT] b\nHope this helps!", 8)
    assert steps is None
    assert reason is not None
    assert reason.startswith("model copy has extra text")


def test_model_split_rejects_missing_or_only_markers() -> None:
    assert parse_model_split("a b", "a b", 8) == (None, "model output had no split markers")
    assert parse_model_split("a b", " [SPLIT]\n[SPLIT] ", 8) == (
        None,
        "model output contained only split markers",
    )


def test_model_split_rejects_an_original_containing_the_marker() -> None:
    steps, reason = parse_model_split(f"a {SPLIT_MARKER} b", f"a {SPLIT_MARKER} b", 8)
    assert steps is None
    assert reason is not None


def test_model_split_applies_the_cap() -> None:
    steps, reason = parse_model_split("aaaa b c dddd", "aaaa[SPLIT]b[SPLIT]c[SPLIT]dddd", 3)
    assert (steps, reason) == (["aaaa", "b\n\nc", "dddd"], None)


@given(
    tokens=st.lists(st.text(alphabet="ab.=1", min_size=1, max_size=5), min_size=1, max_size=20),
    gaps=st.lists(st.sampled_from([" ", "\n", "\n\n  "]), min_size=20, max_size=20),
    cuts=st.lists(st.booleans(), min_size=20, max_size=20),
)
def test_model_split_accepts_any_marked_copy(
    tokens: list[str], gaps: list[str], cuts: list[bool]
) -> None:
    original = "".join(tok + gap for tok, gap in zip(tokens, gaps, strict=False))
    copy = ""
    for tok, cut in zip(tokens, cuts, strict=False):
        copy += tok + (f" {SPLIT_MARKER}\n" if cut else " ")
    steps, reason = parse_model_split(original, copy, max_steps=100)
    if not any(cuts[: len(tokens)]):
        assert reason == "model output had no split markers"
        return
    assert reason is None
    assert steps is not None
    assert len(steps) == sum(cuts[: len(tokens) - 1]) + 1
    assert normalize_ws(" ".join(steps)) == normalize_ws(original)
    assert all(step in original for step in steps)


# --- choose_split / needs_model -----------------------------------------------------------

STRUCTURED = "First.\n\nSecond."
FLAT = "First. Second."
FLAT_MODEL = "First. [SPLIT] Second."


def test_choose_heuristic_ignores_model_output() -> None:
    result = choose_split(FLAT, "heuristic", 64, FLAT_MODEL)
    assert result == SplitResult(["First. Second."], "heuristic", None)


def test_choose_model_uses_the_model_split() -> None:
    result = choose_split(STRUCTURED, "model", 64, "First. Second.[SPLIT]")
    # A single piece is allowed; the step is the original slice, blank line included.
    assert result == SplitResult(["First.\n\nSecond."], "model", None)


def test_choose_model_falls_back_with_a_reason() -> None:
    result = choose_split(STRUCTURED, "model", 64, "First.[SPLIT]Third.")
    assert result.steps == ["First.", "Second."]
    assert result.method_used == "heuristic"
    assert result.fallback_reason == "model copy differs from the original at char 7"


def test_choose_model_without_output_falls_back_with_a_reason() -> None:
    result = choose_split(FLAT, "model", 64, None)
    assert result == SplitResult([FLAT], "heuristic", "no model output was provided")


def test_choose_auto_prefers_existing_structure() -> None:
    result = choose_split(STRUCTURED, "auto", 64, "First. Second.[SPLIT]")
    assert result == SplitResult(["First.", "Second."], "heuristic", None)


def test_choose_auto_uses_the_model_on_flat_text() -> None:
    assert choose_split(FLAT, "auto", 64, FLAT_MODEL) == SplitResult(
        ["First.", "Second."], "model", None
    )


def test_choose_auto_without_output_is_a_plain_heuristic_result() -> None:
    assert choose_split(FLAT, "auto", 64, None) == SplitResult([FLAT], "heuristic", None)


def test_choose_auto_bad_model_output_falls_back_with_a_reason() -> None:
    result = choose_split(FLAT, "auto", 64, "First.")
    assert result == SplitResult([FLAT], "heuristic", "model output had no split markers")


def test_needs_model() -> None:
    assert needs_model(FLAT, "model")
    assert needs_model(STRUCTURED, "model")
    assert not needs_model(FLAT, "heuristic")
    assert needs_model(FLAT, "auto")
    assert not needs_model(STRUCTURED, "auto")


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown split method"):
        choose_split(FLAT, "magic", 64, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown split method"):
        needs_model(FLAT, "magic")  # type: ignore[arg-type]
