"""The rule verifier's extraction and equivalence on real answer forms (docs/methods.md E.3
lists where each form comes from), and its hard timeout in a process pool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from service.scoring.answers import check, extract_answer, reference_answer
from service.serving.rules import RuleVerifier


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so x = 2, and the result is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("first \\boxed{3} then \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("48 + 24 = 72\n#### 72", "72"),
        ("Reasoning...\nANSWER: C", "C"),
        ("In total 48 + 24 = 72. The answer is 72.", "72"),
        ("The final answer is: $18", "$18"),
        ("She makes 9 * 2 = $<<9*2=18>>18 every day.\nA: 18", "18"),
        ("(B)", "(B)"),
        ("It costs 3 + 4 = 7 dollars, so 1,250 in all", "1,250"),
        ("no number here", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_a_reference_solution_is_read_for_its_final_answer() -> None:
    assert reference_answer("Janet sells 9 eggs.\nShe makes $18.\nA: 18") == "18"
    assert reference_answer("  72 ") == "72"
    assert reference_answer("   ") is None


# (response, reference, equivalent); sources in docs/methods.md E.3
EQUIVALENT_FORMS = [
    ("The answer is 0.5", "1/2", True),  # fraction vs decimal
    ("The answer is \\frac{3}{4}", "0.75", True),  # LaTeX fraction vs decimal
    ("The answer is 50%", "0.5", True),  # percentage
    ("#### 1,000", "1000", True),  # thousands separator
    ("The answer is 1{,}000", "1000", True),  # LaTeX thousands separator
    ("The answer is -5.0", "-5", True),  # negative, trailing zero
    ("The answer is $18.", "18", True),  # currency sign
    ("\\boxed{10 \\text{ cm}}", "10", True),  # unit in \text
    ("\\boxed{\\{2, 1\\}}", "\\{1, 2\\}", True),  # sets, any order
    ("\\boxed{(1, 2]}", "(1,2]", True),  # interval
    ("\\boxed{5, 3}", "3, 5", True),  # several answers
    ("\\boxed{\\frac{\\sqrt 2}{2}}", "\\sqrt{2}/2", True),  # LaTeX vs plain
    ("The answer is 73", "72", False),
    ("The answer is -5", "5", False),  # the sign matters
    ("ANSWER: b", "B", True),  # letters: exact, case folded
    ("The answer is (C)", "B", False),
    ("The answer is Paris.", "paris", True),  # short strings: exact, folded
    ("The answer is Lyon.", "Paris", False),
]


@pytest.mark.parametrize(("response", "reference", "equivalent"), EQUIVALENT_FORMS)
def test_equivalence_table(response: str, reference: str, equivalent: bool) -> None:
    result = check(response, reference)
    assert result.equivalent is equivalent, result
    assert result.reason == ("equivalent" if equivalent else "not_equivalent")


def test_a_gsm8k_labelled_solution_against_its_reference() -> None:
    reference = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes $18.\nA: 18"
    right = "16 - 3 - 4 = 9 eggs, 9 * 2 = $<<9*2=18>>18\nA: 18"
    wrong = "16 - 3 = 13 eggs, 13 * 2 = $<<13*2=26>>26\nA: 26"
    assert check(right, reference).equivalent is True
    assert check(wrong, reference).equivalent is False


@pytest.mark.parametrize(
    ("response", "reference", "reason"),
    [
        ("I do not know.", "42", "no_answer"),
        ("The answer is unknowable", "42", "unparsable_answer"),
        ("The answer is 42", "   ", "unparsable_reference"),
        ("The answer is 7", "B", "unparsable_answer"),  # a letter question, no letter given
    ],
)
def test_undecided_rows_say_why(response: str, reference: str, reason: str) -> None:
    result = check(response, reference)
    assert result.equivalent is None
    assert result.reason == reason


# A power tower math-verify evaluates for minutes (seen: over 20 s on one core).
PATHOLOGICAL = "The answer is $9^{9^{9^{9}}}$"


# Room for the second worker to finish starting under a loaded machine (the fast checks wait for
# it); the pathological check runs for minutes, so it times out whatever the bound.
TIMEOUT_S = 5.0


def test_a_pathological_expression_times_out_without_stalling_the_others() -> None:
    async def run(verifier: RuleVerifier) -> tuple[list[str], float, float]:
        started = time.monotonic()
        slow = asyncio.ensure_future(verifier.check(PATHOLOGICAL, "5"))
        fast = await verifier.check_many([("The answer is 0.5", "1/2")] * 8)
        fast_s = time.monotonic() - started
        slow_result = await slow
        return [r.reason for r in [*fast, slow_result]], fast_s, time.monotonic() - started

    with RuleVerifier(workers=2, timeout_s=TIMEOUT_S) as verifier:
        verifier.check_sync("warm up", "1")  # the pool's start, not the checks
        reasons, fast_s, total_s = asyncio.run(run(verifier))
        # the pool replaced the killed worker: the next check is answered
        after = verifier.check_sync("The answer is 2", "2")
    assert reasons == ["equivalent"] * 8 + ["timeout"]
    assert fast_s < TIMEOUT_S, "the fast checks waited for the pathological one"
    assert total_s < TIMEOUT_S + 5.0
    assert after.equivalent is True


def test_a_pool_that_cannot_start_makes_checks_undecided_not_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool whose workers cannot start (here: a main module spawn cannot re-import) answers
    "error" and is rebuilt at the next check."""
    with RuleVerifier(workers=1, timeout_s=5.0) as verifier:
        calls: list[int] = []

        def broken(response: str, reference: str) -> Any:
            calls.append(1)
            raise RuntimeError("Unexpected error within the Pool")

        monkeypatch.setattr(verifier, "_submit", broken)
        assert verifier.check_sync("The answer is 2", "2").reason == "error"
        assert asyncio.run(verifier.check("The answer is 2", "2")).reason == "error"
        monkeypatch.undo()
        assert verifier.check_sync("The answer is 2", "2").equivalent is True
    assert calls == [1, 1]
