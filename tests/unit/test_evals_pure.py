"""Evaluation harness parts that need no server: client retries, aggregation, CLI helpers.

HTTP is replaced by `httpx.MockTransport`, so the whole harness runs without an engine.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner
from verifier_client import _retry, models

from service.config import Settings
from service.evals import bestofn, cli, processbench
from service.evals.cli import eval_app, resolve_data
from service.evals.common import gather_with_progress, open_client, sum_usage
from service.evals.report import fmt, make_table
from service.scoring.bestofn import BestOfNItem, Candidate
from service.scoring.finite import finite_or_none
from service.scoring.metrics_eval import ProcessBenchItem, processbench_metric

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "processbench3.json"
Handler = Callable[[httpx.Request], httpx.Response]


def error(status: int, error_type: str, message: str = "m", **headers: str) -> httpx.Response:
    body = {"error": {"type": error_type, "message": message}}
    return httpx.Response(status, json=body, headers=headers)


def usage(
    prompt: int, generated: int, cached: int = 0, calls: int = 1, hits: int = 0
) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "generated_tokens": generated,
        "cached_tokens": cached,
        "total_tokens": prompt + generated,
        "engine_calls": calls,
        "cached_judgments": hits,
    }


# --- shared helpers ------------------------------------------------------------------------


def test_sum_usage_adds_every_field() -> None:
    total = sum_usage([models.Usage(**usage(10, 1, 4)), models.Usage(**usage(20, 2, 0, 3, hits=2))])
    assert total == usage(30, 3, 4, 4, hits=2)
    assert sum_usage([]) == usage(0, 0, 0, 0)


def test_finite_or_none() -> None:
    assert finite_or_none(50.0) == 50.0
    assert finite_or_none(math.nan) is None
    nested = {"a": [1.0, math.inf, (-math.inf, 2)], "b": {"c": math.nan}, "n": 3, "s": "nan"}
    expected = {"a": [1.0, None, [None, 2]], "b": {"c": None}, "n": 3, "s": "nan"}
    assert finite_or_none(nested) == expected


async def test_client_bounds_concurrency() -> None:
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"data": []})

    transport = httpx.MockTransport(handler)
    async with open_client("http://svc", 3, transport) as client:
        await asyncio.gather(*(client.list_calibrations() for _ in range(10)))
    assert peak == 3


async def test_gather_keeps_order_and_reports_progress() -> None:
    calls: list[tuple[int, int]] = []

    async def job(i: int) -> int:
        await asyncio.sleep(0.001 * (3 - i))
        return i

    results = await gather_with_progress(
        [job(i) for i in range(3)], lambda d, t: calls.append((d, t))
    )
    assert results == [0, 1, 2]
    assert calls == [(1, 3), (2, 3), (3, 3)]


async def test_gather_cancels_the_rest_on_error() -> None:
    finished: list[int] = []

    async def slow() -> int:
        await asyncio.sleep(5)
        finished.append(1)
        return 1

    async def failing() -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await gather_with_progress([slow(), failing()])
    await asyncio.sleep(0)
    assert finished == []


# --- processbench ----------------------------------------------------------------------------


def pb_item(label: int, n_steps: int = 3, item_id: str = "x") -> ProcessBenchItem:
    steps = tuple(f"step {k}" for k in range(n_steps))
    return ProcessBenchItem(item_id, "g", "p", steps, label == -1, label)


def test_processbench_summary_counts_failures_as_wrong() -> None:
    results = [
        processbench.ItemResult(pb_item(-1), -1, [0.9] * 3, models.Usage(**usage(10, 3))),
        processbench.ItemResult(pb_item(1), 1, [0.9, 0.1, 0.2], models.Usage(**usage(20, 3))),
        processbench.ItemResult(pb_item(0), None, error="HTTP 422 invalid_request: m"),
        processbench.ItemResult(pb_item(2), 0, [0.1] * 3, models.Usage(**usage(5, 3))),
    ]
    summary = processbench.summarize(results)
    expected = processbench_metric([-1, 1, None, 0], [-1, 1, 0, 2], [3, 3, 3, 3])
    assert summary["metric"] == pytest.approx(dict(expected))
    assert summary["metric"]["acc_err"] == pytest.approx(100 / 3)
    assert summary["usage"] == usage(35, 9, 0, 3)
    assert summary["n_failed"] == 1
    assert summary["items"][2] == {
        "id": "x",
        "label": 0,
        "pred": None,
        "step_scores": None,
        "error": "HTTP 422 invalid_request: m",
    }


def test_processbench_summary_reports_an_empty_class_as_null() -> None:
    results = [processbench.ItemResult(pb_item(1), 1, [0.9, 0.1, 0.1], models.Usage())]
    metric = processbench.summarize(results)["metric"]
    assert metric["acc_err"] == 100.0
    assert metric["acc_corr"] is None
    assert metric["f1"] is None
    json.dumps(metric, allow_nan=False)


def test_processbench_options_are_validated_before_any_request() -> None:
    assert processbench.process_options("single_pass", 0.3, 64, True) == {
        "mode": "single_pass",
        "threshold": 0.3,
        "reasoning_tokens": 64,
        "early_stop": True,
    }
    with pytest.raises(ValueError, match="mode"):
        processbench.process_options("psychic", 0.5, 64, False)
    with pytest.raises(ValueError, match="threshold"):
        processbench.process_options("direct", 1.5, 64, False)


def fake_process_server(seen: list[dict[str, Any]]) -> httpx.MockTransport:
    """Predicts the last step as the first error; refuses the problem about eggs with a 422."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if "eggs" in body["question"]:
            return error(422, "invalid_request", "steps[0]: too long")
        n = len(body["steps"])
        return httpx.Response(
            200,
            json={
                "steps": body["steps"],
                "step_scores": [0.9] * (n - 1) + [0.1],
                "step_logits": [2.0] * (n - 1) + [-2.0],
                "aggregate": 0.5,
                "aggregation": "mean_logit",
                "threshold": body["threshold"],
                "first_error_step": n - 1,
                "mode": body["mode"],
                "model": "fake-model",
                "split": {"method_used": "given"},
                "usage": usage(100, 1),
            },
        )

    return httpx.MockTransport(handler)


async def test_run_processbench_end_to_end_on_a_fake_service() -> None:
    seen: list[dict[str, Any]] = []
    start = time.perf_counter()
    result = await processbench.run_processbench(
        "http://svc",
        FIXTURE,
        None,
        "direct",
        0.4,
        32,
        True,
        2,
        transport=fake_process_server(seen),
    )
    elapsed = time.perf_counter() - start
    fixture = json.loads(FIXTURE.read_text())
    assert sorted(b["question"] for b in seen) == sorted(f["problem"] for f in fixture)
    for body in seen:
        raw = next(f for f in fixture if f["problem"] == body["question"])
        assert body["steps"] == raw["steps"]
        assert (body["mode"], body["threshold"], body["early_stop"]) == ("direct", 0.4, True)
        assert body["reasoning_tokens"] == 32
    # fixture-0 (label -1) predicted 1: wrong; fixture-1 (eggs) refused: wrong;
    # fixture-2 (label 1, 3 steps) predicted 2: wrong.
    assert [i["pred"] for i in result["items"]] == [1, None, 2]
    assert result["items"][1]["error"] == "HTTP 422 invalid_request: steps[0]: too long"
    assert result["metric"] == {"acc_err": 0.0, "acc_corr": 0.0, "f1": 0.0, "n_err": 2, "n_corr": 1}
    assert result["usage"]["total_tokens"] == 202
    assert result["n_failed"] == 1
    assert result["config"]["model"] == "fake-model"
    assert result["config"]["n_items"] == 3
    assert 0 < result["wall_s"] <= elapsed  # seconds, measured around the run


# --- best-of-n -------------------------------------------------------------------------------


def bon_item(*correct: bool) -> BestOfNItem:
    cands = tuple(Candidate(f"s{i}", f"solution {i}", c) for i, c in enumerate(correct))
    return BestOfNItem("q", "A: 1", cands)


def test_pick_is_the_argmax_with_the_lowest_index_on_ties() -> None:
    item = bon_item(False, True, True, False)
    assert bestofn.ScoredItem(0, item, [0.2, 0.7, 0.7, 0.1]).picked == 1
    assert bestofn.ScoredItem(0, item, [0.5, 0.5, 0.5, 0.5]).picked == 0
    assert bestofn.ScoredItem(0, item, [0.1, 0.2, 0.3, 0.9]).picked_correct is False
    unscored = bestofn.ScoredItem(0, item, None, error="e")
    assert (unscored.picked, unscored.picked_correct) == (None, False)


def test_bestofn_summary_counts_failures_as_wrong_picks() -> None:
    scored = [
        bestofn.ScoredItem(0, bon_item(True, False), [0.9, 0.1], models.Usage(**usage(40, 2, 8))),
        bestofn.ScoredItem(1, bon_item(True, True), None, error="HTTP 413 payload_too_large: m"),
    ]
    report = bestofn.summarize(scored)
    assert report["n_items"] == 2
    assert report["selection_accuracy"] == 0.5
    assert report["random_accuracy"] == 0.75
    assert report["oracle_accuracy"] == 1.0
    assert report["eval_tokens"] == usage(40, 2, 8)
    assert report["n_failed"] == 1
    assert report["items"][1] == {
        "index": 1,
        "picked": None,
        "picked_correct": False,
        "scores": None,
        "correct": [True, True],
        "error": "HTTP 413 payload_too_large: m",
    }


def fake_score_server(seen: list[dict[str, Any]]) -> httpx.MockTransport:
    """Scores candidate j as 0.1 * (j + 1), except candidates 1 and 2 tie at the top."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        finals = [0.1, 0.8, 0.8, 0.3]
        results = [{"index": j, "final": f} for j, f in reversed(list(enumerate(finals)))]
        return httpx.Response(
            200,
            json={
                "method": body["method"],
                "alpha": body["alpha"],
                "model": "fake-model",
                "results": results,
                "ranking": [1, 2, 3, 0],
                "usage": usage(50, 4, 10, 4),
            },
        )

    return httpx.MockTransport(handler)


def write_solutions(path: Path, flags: list[list[bool]]) -> None:
    solvers = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
    with path.open("w", encoding="utf-8") as handle:
        for i, row in enumerate(flags):
            line: dict[str, Any] = {"question": f"q{i}", "ground_truth": "A: 1"}
            for solver, ok in zip(solvers, row, strict=True):
                line[solver] = {"is_correct": ok, "solution": f"{solver} says {i}"}
            handle.write(json.dumps(line) + "\n")


async def test_run_bestofn_end_to_end_on_a_fake_service(tmp_path: Path) -> None:
    data = tmp_path / "solutions.jsonl"
    write_solutions(data, [[False, True, False, False], [True, False, True, False], [True] * 4])
    seen: list[dict[str, Any]] = []
    report = await bestofn.run_bestofn(
        "http://svc",
        data,
        2,
        "fused",
        "direct",
        0.25,
        "min",
        16,
        4,
        transport=fake_score_server(seen),
    )
    assert len(seen) == 2
    assert seen[0]["responses"] == [
        "6b_finetuning says 0",
        "6b_verification says 0",
        "175b_finetuning says 0",
        "175b_verification says 0",
    ]
    assert {k: seen[0][k] for k in ("method", "mode", "alpha", "aggregation")} == {
        "method": "fused",
        "mode": "direct",
        "alpha": 0.25,
        "aggregation": "min",
    }
    assert [i["scores"] for i in report["items"]] == [[0.1, 0.8, 0.8, 0.3]] * 2
    assert [i["picked"] for i in report["items"]] == [1, 1]
    assert report["selection_accuracy"] == 0.5
    assert report["random_accuracy"] == pytest.approx((0.25 + 0.5) / 2)
    assert report["eval_tokens"]["total_tokens"] == 108
    assert report["config"]["limit"] == 2


# --- cli -------------------------------------------------------------------------------------


def test_table_aligns_names_left_and_values_right() -> None:
    out = StringIO()
    table = make_table(("metric", "value"), [("f1", "66.67"), ("n_err", "2")])
    Console(file=out, width=80).print(table)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert lines == ["metric  value", "f1      66.67", "n_err       2"]
    assert (fmt(None), fmt(2.0), fmt(0.5, 4), fmt(3)) == ("n/a", "2.00", "0.5000", "3")


@pytest.mark.parametrize(
    ("choices", "request_model", "field"),
    [
        (cli.ProcessMode, models.ProcessRequest, "mode"),
        (cli.OutcomeMode, models.OutcomeRequest, "mode"),
        (cli.ScoreMethod, models.ScoreRequest, "method"),
        (cli.Aggregation, models.ScoreRequest, "aggregation"),
    ],
)
def test_cli_choices_are_the_services(choices: Any, request_model: Any, field: str) -> None:
    assert get_args(choices) == get_args(request_model.model_fields[field].annotation)


def test_resolve_data_prefers_the_given_file() -> None:
    assert resolve_data(Path("x.json"), Path("default.json")) == Path("x.json")
    # No file given: the default under the data-dir setting, not under the working directory.
    assert resolve_data(None, Path("p/d.json")) == Settings().data_dir / "p" / "d.json"


def test_cli_requires_output_and_a_known_mode(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(eval_app, ["processbench", "--data", str(FIXTURE)]).exit_code == 2
    out = str(tmp_path / "o.json")
    bad = runner.invoke(eval_app, ["processbench", "--mode", "psychic", "--output", out])
    assert bad.exit_code == 2


def test_cli_reports_an_unreachable_service_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client still makes every attempt, without its backoff sleeps (9 s of the fast tier):
    # this test is about the CLI's report, the client's retries are tested on their own.
    monkeypatch.setattr(_retry._Wait, "__call__", lambda self, state: 0.0)
    out = tmp_path / "o.json"
    args = ["processbench", "--data", str(FIXTURE), "--url", "http://127.0.0.1:9", "--output"]
    result = CliRunner().invoke(eval_app, [*args, str(out)])
    assert result.exit_code == 1
    assert "error:" in result.stderr
    assert not out.exists()


def test_rubric_cases_make_each_criterion_true_or_false_by_construction() -> None:
    from service.evals import rubric
    from service.scoring.bestofn import BestOfNItem, Candidate

    item = BestOfNItem(
        question="q",
        ground_truth="2 + 2 = <<2+2=4>>4\nA: 4",
        candidates=(
            Candidate("a", "2 * 2 = 5\nA: 5", False),
            Candidate("b", "2 + 2 = <<2+2=4>>4\nA: 4", True),
            Candidate("c", "2 + 2 = 4\nA: 4", True),
        ),
    )
    cases = rubric.build_cases([item])
    assert [(c.form, c.labels["correct"]) for c in cases] == [
        ("as_written", True),
        ("answer_only", True),
        ("sentence", True),
        ("as_written", False),
        ("answer_only", False),
        ("sentence", False),
    ]
    assert {c.reference for c in cases} == {"4"}
    by_form = {c.form: c.response for c in cases[:3]}
    assert by_form == {
        "as_written": "2 + 2 = <<2+2=4>>4\nA: 4",
        "answer_only": "A: 4",
        "sentence": "2 + 2 = <<2+2=4>>4\nSo the answer is 4.",
    }
    with pytest.raises(ValueError, match="no final"):
        rubric.final_answer("it is 4")
