"""PopDebias' fitted lambda through a real server and engine (docs/methods.md B.5).

The sign is the point: a negative lambda adds a popularity prior instead of removing one.
Whatever an estimator returns, what is applied is never below 0, and a clipped fit answers
exactly as no debiasing does. (The default model's question-free slope on the example pool is
negative, about -0.2: a weak judge's letter reads carry no popularity prior to remove.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from service.evals.audits import read_pool


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=600)


# The estimators' sign handling is mechanics: a slice of the pool shows it at a quarter of the
# engine time (the whole pool, 64 items, is read once, by the question-free fit).
ESTIMATOR_ITEMS = 16


def _pool(data_dir: Path) -> list[dict[str, Any]]:
    items, skipped = read_pool(data_dir / "popmcq" / "pool.jsonl")
    assert items
    assert not skipped
    return items


def test_question_free_lambda_is_not_negative_on_the_example_pool(
    server: Any, data_dir: Path
) -> None:
    body = {"items": _pool(data_dir), "methods": ["none", "popdebias"], "seed": 0}
    r = post(server.url, "/v1/mcq/popmcq", body)
    assert r.status_code == 200, r.text
    fit = r.json()["calibration"]["popdebias"]
    assert fit["lambda_fit"] == "question_free"
    assert fit["built_items"] > 0
    assert fit["lambda"] >= 0, fit
    assert fit["lambda"] == max(fit["lambda_raw"], 0.0), fit
    assert fit["clipped"] == (fit["lambda_raw"] < 0), fit
    if fit["lambda"] == 0:
        # Applied as 0, PopDebias is the raw answer: every strategy scores the same.
        table = r.json()["table"]
        for strategy, cell in table["none"].items():
            assert table["popdebias"][strategy]["accuracy"] == cell["accuracy"], strategy
            assert table["popdebias"][strategy]["hpsr"] == cell["hpsr"], strategy


def test_every_estimator_applies_a_lambda_of_at_least_zero(server: Any, data_dir: Path) -> None:
    """items and grid read the questions; a negative slope is reported, and applied as 0."""
    for lambda_fit in ("items", "grid"):
        body = {
            "items": _pool(data_dir)[:ESTIMATOR_ITEMS],
            "methods": ["popdebias"],
            "strategies": ["S1", "S2", "S6"],
            "lambda_fit": lambda_fit,
        }
        r = post(server.url, "/v1/mcq/popmcq", body)
        assert r.status_code == 200, r.text
        fit = r.json()["calibration"]["popdebias"]
        assert fit["lambda_fit"] == lambda_fit
        assert fit["lambda"] == max(fit["lambda_raw"], 0.0), fit
        assert fit["clipped"] == (fit["lambda_raw"] < 0)


def test_a_calibration_reports_its_fit_and_answers_carry_it(server: Any) -> None:
    items = [
        {"question": "Which of these is a fruit?", "options": ["a hammer", "an apple", "a cloud"]},
        {"question": "Which of these can fly?", "options": ["a stone", "a sparrow", "a chair"]},
    ]
    items = [{**it, "popularity": "model"} for it in items]
    grid = post(
        server.url,
        "/v1/mcq/calibrations",
        {"method": "popdebias", "items": items, "lambda_fit": "grid", "answers": [1, 1]},
    )
    assert grid.status_code == 200, grid.text
    params = grid.json()["params"]
    assert params["lambda_fit"] == "grid"
    assert 0.0 <= params["lambda"] <= 10.0
    cal = post(server.url, "/v1/mcq/calibrations", {"method": "popdebias", "items": items}).json()
    assert cal["params"]["lambda_fit"] == "question_free"
    assert cal["params"]["lambda"] == max(cal["params"]["lambda_raw"], 0.0)
    answer = post(
        server.url,
        "/v1/mcq/answer",
        {**items[0], "debias": "popdebias", "calibration_id": cal["id"]},
    ).json()
    assert answer["debias"]["params"]["lambda"] == cal["params"]["lambda"]
    assert answer["debias"]["params"]["lambda_raw"] == cal["params"]["lambda_raw"]


def test_bad_fit_requests_are_refused_with_the_fix(server: Any) -> None:
    item = {"question": "q?", "options": ["a", "b"], "popularity": [0.1, 0.9]}
    cases = [
        ({"method": "popdebias", "items": [item], "lambda_fit": "grid"}, "needs answers"),
        ({"method": "popdebias", "items": [item], "answers": [0]}, "lambda_fit='grid'"),
        (
            {"method": "popdebias", "items": [item], "lambda_fit": "grid", "answers": [2]},
            "outside",
        ),
        (
            {"method": "popdebias_binned", "items": [item], "lambda_fit": "grid", "answers": [0]},
            "popdebias' lambda",
        ),
    ]
    for body, needle in cases:
        r = post(server.url, "/v1/mcq/calibrations", body)
        assert r.status_code == 422, (body, r.text)
        assert needle in r.json()["error"]["message"], r.text
    r = post(
        server.url,
        "/v1/mcq/answer",
        {**item, "debias": "popdebias", "popdebias_lambda": -0.5},
    )
    assert r.status_code == 422
    assert ">= 0" in r.json()["error"]["message"]
