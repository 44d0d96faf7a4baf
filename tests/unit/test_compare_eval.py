"""`verifier eval compare` without a server: labelled pairs, the metrics, the report, the CLI.

Reads are made by hand; HTTP is replaced by `httpx.MockTransport`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner
from verifier_client import models

from service.evals import cli
from service.evals import compare as ev
from service.evals.compare import JudgedPair, LabelledPair, PairRead
from service.evals.report import compare_rows as report_rows
from service.scoring.bestofn import BestOfNItem, Candidate
from tests.support.compare_answers import SOLVERS, pair_answer, write_solutions


def item(q: int, *correct: bool) -> BestOfNItem:
    cands = tuple(Candidate(s, f"{s} on q{q}", ok) for s, ok in zip(SOLVERS, correct, strict=False))
    return BestOfNItem(f"q{q}", "A: 1", cands)


def usage(prompt: int, generated: int, calls: int = 2) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "generated_tokens": generated,
        "cached_tokens": 0,
        "total_tokens": prompt + generated,
        "engine_calls": calls,
        "cached_judgments": 0,
    }


def judge(pairs: list[LabelledPair], prob_a: Any) -> list[JudgedPair]:
    """Judged pairs from a judge that gives letter A ``prob_a(pair, order)`` in each order;
    the scores are the swap request's mean preference, as the service's win rate."""
    out = []
    for k, pair in enumerate(pairs):
        reads = [PairRead(o, (prob_a(pair, o), 1 - prob_a(pair, o))) for o in ((0, 1), (1, 0))]
        p01 = (reads[0].probabilities[0] + reads[1].probabilities[1]) / 2
        out.append(
            JudgedPair(
                index=k,
                pair=pair,
                scores=[p01, 1 - p01],
                ranking=[0, 1] if p01 >= 0.5 else [1, 0],
                preferences=[[None, p01], [1 - p01, None]],
                reads=reads,
                usage=models.Usage(**usage(100, 2)),
            )
        )
    return out


ITEMS = [
    item(0, True, False, False, True),  # 2 x 2 = 4 pairs
    item(1, True, True, True, True),  # none: no wrong solution
    item(2, False, False, False, False),  # none: no correct solution
    item(3, False, True, False, False),  # 1 x 3 = 3 pairs
]


def test_pairs_are_every_correct_wrong_pair_with_the_correct_one_first_every_other_time() -> None:
    pairs = ev.build_pairs(ITEMS)
    assert len(pairs) == 7
    assert [p.question_index for p in pairs] == [0, 0, 0, 0, 3, 3, 3]
    assert [p.correct for p in pairs] == [0, 1, 0, 1, 0, 1, 0]
    for p in pairs:
        flags = {c.solver_name: c.is_correct for c in ITEMS[p.question_index].candidates}
        assert flags[p.solvers[p.correct]]
        assert not flags[p.solvers[1 - p.correct]]
        assert p.responses == tuple(f"{s} on q{p.question_index}" for s in p.solvers)
    # in file and solver order: correct 6b_finetuning against each wrong one, then 175b_verif.
    assert [frozenset(p.solvers) for p in pairs[:4]] == [
        frozenset({"6b_finetuning", "6b_verification"}),
        frozenset({"6b_finetuning", "175b_finetuning"}),
        frozenset({"175b_verification", "6b_verification"}),
        frozenset({"175b_verification", "175b_finetuning"}),
    ]
    assert ev.build_pairs(ITEMS) == pairs  # deterministic
    assert ev.build_pairs(ITEMS, 5) == pairs[:5]
    with pytest.raises(ValueError, match="limit"):
        ev.build_pairs(ITEMS, 0)


def test_a_judge_that_always_prefers_a_is_at_chance_and_never_consistent() -> None:
    pairs = ev.build_pairs(ITEMS, 6)  # an even number: balanced
    report = ev.summarize(judge(pairs, lambda pair, order: 0.9))
    assert report["accuracy_first_order"] == 0.5
    assert report["position_consistency"] == 0.0
    assert report["first_position_rate"] == pytest.approx(0.9)
    # over both orders its preferences cancel: a tie on every pair, and a tie is no pick
    assert report["accuracy_debiased"] == 0.0
    assert {i["pick_debiased"] for i in report["items"]} == {None}
    assert [i["pick_first_order"] for i in report["items"]] == [0] * 6


def test_a_judge_that_knows_is_right_and_consistent_in_both_orders() -> None:
    pairs = ev.build_pairs(ITEMS)

    def prob_a(pair: LabelledPair, order: tuple[int, ...]) -> float:
        return 0.8 if order[0] == pair.correct else 0.3

    report = ev.summarize(judge(pairs, prob_a))
    assert (report["accuracy_debiased"], report["accuracy_first_order"]) == (1.0, 1.0)
    assert report["position_consistency"] == 1.0
    assert report["first_position_rate"] == pytest.approx(0.55)
    assert report["n_pairs"] == 7
    assert report["n_questions"] == 2


def test_picks_read_the_request_order_and_ties_are_no_pick() -> None:
    swapped_first = [PairRead((1, 0), (0.7, 0.3)), PairRead((0, 1), (0.4, 0.6))]
    assert ev.first_order_pick(swapped_first) == 1  # the (0, 1) read, wherever it is listed
    assert ev.read_pick(swapped_first[0]) == 1
    assert ev.pair_consistent(swapped_first) is True
    tie = [PairRead((0, 1), (0.5, 0.5)), PairRead((1, 0), (0.5, 0.5))]
    assert ev.first_order_pick(tie) is None
    assert ev.pair_consistent(tie) is False
    assert ev.debiased_pick([0.5, 0.5]) is None
    assert ev.debiased_pick([0.2, 0.8]) == 1
    with pytest.raises(ValueError, match="request order"):
        ev.first_order_pick([PairRead((1, 0), (0.7, 0.3))])
    assert ev.first_position_rate([]) is None


def test_a_refused_pair_is_wrong_and_left_out_of_the_rates_and_costs() -> None:
    pairs = ev.build_pairs(ITEMS, 2)
    (good,) = judge(pairs[:1], lambda pair, order: 0.8 if order[0] == pair.correct else 0.3)
    failed = JudgedPair(index=1, pair=pairs[1], error="HTTP 422 invalid_request: m")
    report = ev.summarize([good, failed])
    assert report["n_failed"] == 1
    assert (report["accuracy_debiased"], report["accuracy_first_order"]) == (0.5, 0.5)
    assert report["position_consistency"] == 1.0
    assert report["first_position_rate"] == pytest.approx(0.55)
    assert report["tokens_per_pair"] == {
        "swap": {"total_tokens": 102.0, "prompt_tokens": 100.0, "generated_tokens": 2.0},
        "one_order": {"total_tokens": 51.0, "prompt_tokens": 50.0, "generated_tokens": 1.0},
    }
    assert report["items"][1] == {
        "index": 1,
        "question_index": 0,
        "solvers": list(pairs[1].solvers),
        "correct": 1,
        "scores": None,
        "ranking": None,
        "preferences": None,
        "reads": [],
        "pick_debiased": None,
        "pick_first_order": None,
        "correct_debiased": False,
        "correct_first_order": False,
        "consistent": None,
        "error": "HTTP 422 invalid_request: m",
    }
    json.dumps(report, allow_nan=False)


def fake_compare_server(seen: list[dict[str, Any]]) -> httpx.MockTransport:
    """A judge that always prefers letter A (0.75); the second pair is refused."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if len(seen) == 2:
            err = {"type": "invalid_request", "message": "too long"}
            return httpx.Response(422, json={"error": err})
        answer = pair_answer(
            0.5,
            results=[
                {"index": 1, "reward": 0, "score": 0.5},
                {"index": 0, "reward": 0, "score": 0.5},
            ],
            position_consistency=0.0,
            first_position_rate=0.75,
            reads=[
                {"order": [0, 1], "probabilities": [0.75, 0.25]},
                {"order": [1, 0], "probabilities": [0.75, 0.25]},
            ],
            usage=usage(300, 2),
        )
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handler)


async def test_run_compare_end_to_end_on_a_fake_service(tmp_path: Path) -> None:
    data = tmp_path / "solutions.jsonl"
    write_solutions(data, [[True, False, True, True], [False] * 4])
    seen: list[dict[str, Any]] = []
    report = await ev.run_compare(
        "http://svc", data, 3, None, 1, transport=fake_compare_server(seen)
    )
    assert len(seen) == 3
    assert seen[0] == {
        "question": "q0",
        "responses": ["6b_finetuning says 0", "6b_verification says 0"],
        "mode": "pairwise",
        "debias": "swap",
        "return_reads": True,
    }
    assert seen[1]["responses"] == ["6b_verification says 0", "175b_finetuning says 0"]
    assert report["n_pairs"] == 3
    assert report["n_failed"] == 1
    assert [i["pick_first_order"] for i in report["items"]] == [0, None, 0]
    assert [i["correct"] for i in report["items"]] == [0, 1, 0]
    assert report["accuracy_first_order"] == pytest.approx(2 / 3)
    assert report["accuracy_debiased"] == 0.0  # equal scores: no pick
    assert report["position_consistency"] == 0.0
    assert report["tokens_per_pair"]["one_order"]["total_tokens"] == 151.0
    assert report["config"]["model"] == "fake-model"
    assert report["config"]["reasoning_tokens"] is None

    seen.clear()
    await ev.run_compare("http://svc", data, 1, 64, 1, transport=fake_compare_server(seen))
    assert seen[0]["reasoning_tokens"] == 64


def test_options_are_validated_before_any_request() -> None:
    assert ev.compare_options(None) == {"mode": "pairwise", "debias": "swap", "return_reads": True}
    with pytest.raises(ValueError, match="reasoning_tokens"):
        ev.compare_options(0)


def test_the_table_lists_both_accuracies_and_both_costs() -> None:
    pairs = ev.build_pairs(ITEMS, 2)
    report = ev.summarize(judge(pairs, lambda pair, order: 0.9))
    report["wall_s"] = 1.5
    rows = dict(report_rows(report))
    assert rows["accuracy_first_order"] == "0.5000"
    assert rows["position_consistency"] == "0.0000"
    assert rows["total_tokens / pair, both orders"] == "102.0"
    assert rows["total_tokens / pair, one order (half)"] == "51.0"


def test_the_cli_reports_an_unreachable_service_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifier_client import _retry

    monkeypatch.setattr(_retry._Wait, "__call__", lambda self, state: 0.0)
    data = tmp_path / "solutions.jsonl"
    write_solutions(data, [[True, False, False, False]])
    out = tmp_path / "o.json"
    args = ["compare", "--data", str(data), "--limit", "1", "--url", "http://127.0.0.1:9"]
    result = CliRunner().invoke(cli.eval_app, [*args, "--output", str(out)])
    assert result.exit_code == 1
    assert "error:" in result.stderr
    assert not out.exists()
