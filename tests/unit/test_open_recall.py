"""Open recall's reading of free-form answers (docs/methods.md B.8): the forms real models write."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from service.scoring import open_recall
from service.scoring.open_recall import first_sentence, match, normalize

POOL = Path(__file__).resolve().parents[2] / "data" / "popmcq" / "pool.jsonl"
CANBERRA = (["Canberra"], ["Sydney", "Melbourne", "Auckland"])


@pytest.mark.parametrize(
    "answer",
    [
        "Canberra",
        "canberra",
        "Canberra, Australia",
        "It is Canberra.",
        " The capital of Australia is Canberra.",
        "CANBERRA!",
        "Canberra. Sydney is the largest city.",  # a second sentence is not read
        "Canberra\nSydney",  # nor a second line
    ],
)
def test_forms_of_the_right_answer_are_known(answer: str) -> None:
    r = match(answer, *CANBERRA)
    assert (r.known, r.matched, r.distractor) == (True, "Canberra", None)


@pytest.mark.parametrize(
    ("answer", "distractor"),
    [
        ("Sydney", "Sydney"),
        ("Sydney, not Canberra", "Sydney"),
        ("Canberra or Melbourne", "Melbourne"),
    ],
)
def test_a_wrong_candidate_in_the_answer_is_not_known(answer: str, distractor: str) -> None:
    r = match(answer, *CANBERRA)
    assert not r.known
    assert r.distractor == distractor


@pytest.mark.parametrize(
    "answer", ["", "   ", "I don't know.", "Canberr", "Canberras", "The answer is Can berra"]
)
def test_no_whole_word_match_is_not_known(answer: str) -> None:
    r = match(answer, *CANBERRA)
    assert (r.known, r.matched) == (False, None)


def test_accents_case_articles_and_number_words_are_normalised() -> None:
    assert normalize("Brasília") == normalize("BRASILIA") == "brasilia"
    assert normalize("The Nile") == normalize("nile") == "nile"
    assert normalize("a hexagon has six sides") == "hexagon has 6 sides"
    assert normalize("Two") == normalize("2") == "2"
    assert normalize("Gabriel García Márquez") == "gabriel garcia marquez"
    assert normalize("Nur-Sultan") == "nur sultan"
    assert match("It has six sides.", ["6"], ["5", "8"]).known
    assert match("The smallest prime is two, not one.", ["2"], ["1", "3"]).distractor == "1"


def test_an_alias_matches_and_is_named() -> None:
    r = match("Van Gogh painted it", ["Vincent van Gogh", "Van Gogh"], ["Claude Monet"])
    assert (r.known, r.matched) == (True, "Van Gogh")


def test_a_distractor_inside_the_matched_answer_does_not_count() -> None:
    """A wrong name can sit inside the right one ('Kenya' inside 'Mount Kenya'): it vetoes
    only where it occurs outside the matched words."""
    r = match("Mount Kenya", ["Mount Kenya"], ["Kenya", "Mount Kilimanjaro"])
    assert (r.known, r.distractor) == (True, None)
    r = match("Kenya, near Mount Kenya", ["Mount Kenya"], ["Kenya"])
    assert (r.known, r.distractor) == (False, "Kenya")


def test_first_sentence_keeps_decimals_and_reads_the_first_nonblank_line() -> None:
    assert first_sentence("\n\n 3.14 is pi. More.") == "3.14 is pi."
    assert first_sentence("") == ""


def test_binomial_standard_error() -> None:
    assert open_recall.binomial_se(5, 10) == pytest.approx(math.sqrt(0.25 / 10))
    assert open_recall.binomial_se(0, 4) == 0.0
    assert math.isnan(open_recall.binomial_se(0, 0))


def test_the_shipped_pool_names_its_answers_findable() -> None:
    """Every pool answer and alias matches itself, no alias is also a wrong candidate of its
    question, and the answer itself is never spoiled by one of its own candidates."""
    rows = [json.loads(line) for line in POOL.read_text(encoding="utf-8").splitlines() if line]
    assert sum(bool(r.get("aliases")) for r in rows) >= 20
    for r in rows:
        names = [r["answer"], *r.get("aliases", [])]
        wrong = {normalize(c) for c in r["candidates"]}
        assert not wrong & {normalize(n) for n in names}, r["id"]
        for name in names:
            assert match(name, names, r["candidates"]).known, (r["id"], name)
