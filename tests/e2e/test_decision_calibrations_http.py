"""Probability calibrations of target ``decisions`` on the real server: fit on ARC items asked
as decisions (a choice and a predicate question each), apply to /v1/decisions, defaults,
refusals (docs/methods.md J.6).

Mechanics only (the default model is near chance on ARC). Decisions are not cached, so a
second read may move within the run's dtype tolerance; every calibrated answer is checked
exactly against the raw read it carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import special

from service.evals.decision_calibration import answer_indexes, arc_decision_examples
from tests.support.calibration_math import ece_of_bins

pytestmark = pytest.mark.engine

FIRST_ITEM = 260  # ARC lines no other calibration test reads
ITEMS = 16  # 2 folds of 8 items: 8 choice and 8 predicate questions to fit each fold on
FOLDS = 2
BINS = 4
SCORE = {
    "type": "score",
    "instructions": "How hard is the question?",
    "levels": [{"label": "easy"}, {"label": "medium"}, {"label": "hard"}],
}


@pytest.fixture(scope="module")
def examples(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    lines = (data_dir / "arc" / "ARC-Challenge-Dev.jsonl").read_text().splitlines()
    path = tmp_path_factory.mktemp("pcal-decisions") / "arc.jsonl"
    path.write_text("\n".join(lines[FIRST_ITEM : FIRST_ITEM + ITEMS + 4]) + "\n")
    built, _ = arc_decision_examples(path, ITEMS)
    assert len(built) == ITEMS
    return [ex for _, ex in built]


def fit(server: Any, examples: list[dict[str, Any]], **options: Any) -> httpx.Response:
    body = {"target": "decisions", "examples": examples, "folds": FOLDS, "bins": BINS, **options}
    return httpx.post(server.url + "/v1/calibrations", json=body, timeout=600)


def decide(server: Any, example: dict[str, Any], **options: Any) -> httpx.Response:
    body = {"model": "m", "input": example["input"], "questions": example["questions"], **options}
    return httpx.post(server.url + "/v1/decisions", json=body, timeout=300)


def decided(server: Any, example: dict[str, Any], **options: Any) -> dict[str, Any]:
    r = decide(server, example, **options)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.fixture(scope="module")
def cal(server: Any, examples: list[dict[str, Any]]) -> dict[str, Any]:
    r = fit(server, examples, name="arc decisions")
    assert r.status_code == 200, r.text
    fitted: dict[str, Any] = r.json()
    return fitted


def label_probs(answer: dict[str, Any]) -> list[float]:
    if answer["type"] == "predicate":
        return [answer["probability"], 1.0 - answer["probability"]]
    return [p["probability"] for p in answer["probabilities"]]


def tempered(probs: list[float], t: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.asarray(special.softmax(np.log(np.asarray(probs)) / t))


def top_label(rows: list[np.ndarray], answers: list[int]) -> tuple[np.ndarray, np.ndarray]:
    conf = np.array([row.max() for row in rows])
    right = np.array([int(np.argmax(row)) == a for row, a in zip(rows, answers, strict=True)])
    return conf, right.astype(float)


def test_a_decisions_fit_reports_a_temperature_per_type_and_what_its_reads_give(
    server: Any,
    examples: list[dict[str, Any]],
    cal: dict[str, Any],
    prob_tol: float,
    logit_tol: float,
) -> None:
    assert cal["id"].startswith("pcal_")
    assert (cal["target"], cal["method"], cal["mode"]) == ("decisions", "temperature", "direct")
    assert cal["examples"] == 2 * ITEMS  # labelled questions
    assert set(cal["types"]) == {"choice", "predicate"}
    temperatures = {k: t["temperature"] for k, t in cal["types"].items()}
    assert {k: cal["parameters"][k] for k in temperatures} == temperatures
    assert all(t > 0 for t in temperatures.values())
    assert cal["usage"]["prompt_tokens"] > 0
    # The same decisions read again, raw; the fit's figures recomputed from them.
    answers = [decided(server, ex, calibration_id="none")["answers"] for ex in examples]
    for q, kind in enumerate(("choice", "predicate")):
        raw = [np.asarray(label_probs(a[q])) for a in answers]
        truth = [answer_indexes(ex)[q] for ex in examples]
        t = temperatures[kind]
        figures = cal["types"][kind]
        assert figures["questions"] == ITEMS
        for m, rows in (
            (figures["fit_set"]["raw"], raw),
            (figures["fit_set"]["calibrated"], [tempered(list(r), t) for r in raw]),
        ):
            conf, _ = top_label(rows, truth)
            assert m["n"] == ITEMS
            assert m["mean_probability"] == pytest.approx(conf.mean(), abs=prob_tol)
            nll = -np.mean([np.log(r[a]) for r, a in zip(rows, truth, strict=True)])
            # a log-probability moves by at most the logit tolerance between two reads
            assert m["nll"] == pytest.approx(nll, abs=logit_tol)
            assert sum(b["count"] for b in m["bins"]) == ITEMS
            assert m["ece"] == pytest.approx(ece_of_bins(m["bins"]))
        held = figures["held_out"]["calibrated"]
        assert held["ece"] == pytest.approx(ece_of_bins(held["bins"]))
    pooled = cal["held_out"]["calibrated"]
    assert pooled["n"] == 2 * ITEMS
    assert pooled["ece"] == pytest.approx(ece_of_bins(pooled["bins"]))
    listed = httpx.get(server.url + "/v1/calibrations").json()["data"]
    assert cal["id"] in [c["id"] for c in listed]


def test_a_calibrated_decision_is_its_raw_read_through_its_type_temperature(
    server: Any, examples: list[dict[str, Any]], cal: dict[str, Any]
) -> None:
    temperatures = {k: t["temperature"] for k, t in cal["types"].items()}
    for ex in examples[:3]:
        questions = [*ex["questions"], SCORE]
        answer = decided(server, {**ex, "questions": questions}, calibration_id=cal["id"])
        assert answer["calibration"] == {
            "id": cal["id"],
            "method": "temperature",
            "parameters": cal["parameters"],
            "applied": True,
            "temperatures": temperatures,
        }
        choice, predicate, score = answer["answers"]
        raw = [p["probability"] for p in choice["raw_probabilities"]]
        mapped = [p["probability"] for p in choice["probabilities"]]
        assert mapped == pytest.approx(tempered(raw, temperatures["choice"]).tolist(), abs=1e-12)
        # the choice is the raw argmax, its confidence the mapped probability of it
        values = [p["value"] for p in choice["probabilities"]]
        assert choice["choice"] == values[int(np.argmax(raw))]
        assert choice["confidence"] == mapped[values.index(choice["choice"])]
        assert np.argsort(mapped, kind="stable").tolist() == np.argsort(raw, kind="stable").tolist()
        p = predicate["raw_probability"]
        want = tempered([p, 1 - p], temperatures["predicate"])[0]
        assert predicate["probability"] == pytest.approx(want, abs=1e-12)
        assert (predicate["probability"] > 0.5) == (p > 0.5)
        # no score question was fitted: its answer is the raw read
        assert (score["raw_score"], score["raw_probabilities"]) == (None, None)
    only_scores = decided(server, {**examples[0], "questions": [SCORE]}, calibration_id=cal["id"])
    assert only_scores["calibration"]["applied"] is False
    plain = decided(server, examples[0], calibration_id="none")
    assert plain["calibration"] is None
    assert plain["answers"][0]["raw_probabilities"] is None


def test_a_decisions_default_applies_in_its_mode_and_goes_with_its_calibration(
    server: Any, examples: list[dict[str, Any]], cal: dict[str, Any]
) -> None:
    url = server.url + "/v1/calibrations"
    put = httpx.put(url + "/defaults/decisions", json={"calibration_id": cal["id"]})
    assert put.status_code == 200, put.text
    ex = examples[0]
    try:
        assert decided(server, ex)["calibration"]["id"] == cal["id"]
        assert decided(server, ex, calibration_id="none")["calibration"] is None
        # a reasoning read is another distribution: the direct default leaves it raw ...
        thought = decided(server, ex, mode="reasoning", reasoning_tokens=8)
        assert thought["calibration"] is None
        # ... and naming the calibration for it is refused before any read
        named = decide(server, ex, mode="reasoning", reasoning_tokens=8, calibration_id=cal["id"])
        assert named.status_code == 422
        assert named.json()["error"]["type"] == "calibration_mismatch"
        assert "fitted on direct judgments" in named.json()["error"]["message"]
    finally:
        assert httpx.delete(url + "/defaults/decisions").status_code == 204
    assert decided(server, ex)["calibration"] is None


def test_a_decisions_calibration_is_refused_where_it_does_not_fit(
    server: Any, examples: list[dict[str, Any]], cal: dict[str, Any]
) -> None:
    ex = examples[0]
    judged = httpx.post(
        server.url + "/v1/judge/outcome",
        json={"question": ex["input"], "response": "A", "calibration_id": cal["id"]},
        timeout=60,
    )
    assert judged.status_code == 422
    assert "target 'decisions', not 'outcome'" in judged.json()["error"]["message"]
    r = decide(server, ex, calibration_id="pcal_unknown")
    assert (r.status_code, r.json()["error"]["type"]) == (422, "unknown_calibration")


@pytest.mark.parametrize(
    ("change", "options", "says"),
    [
        (lambda ex: ex, {"method": "platt"}, "temperature only"),
        (lambda ex: ex[:7], {}, "at least 8"),
        (lambda ex: [{**e, "answers": [e["answers"][0], True]} for e in ex], {}, "every "),
        (
            lambda ex: [{**e, "answers": ["no such option", e["answers"][1]]} for e in ex],
            {},
            "not one of the question's choice values",
        ),
        (lambda ex: [{**e, "answers": e["answers"][:1]} for e in ex], {}, "1 answers for 2"),
        (lambda ex: ex[:12], {}, "leaves 6 labelled"),
        (
            lambda ex: [{"question": e["input"], "response": "A", "label": 1} for e in ex],
            {},
            "not a decisions example",
        ),
    ],
)
def test_a_decisions_fit_that_cannot_be_made_is_refused_and_stores_nothing(
    server: Any, examples: list[dict[str, Any]], change: Any, options: dict[str, Any], says: str
) -> None:
    before = httpx.get(server.url + "/v1/calibrations").json()["data"]
    r = fit(server, change(examples), **options)
    assert r.status_code == 422, r.text
    assert says in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/calibrations").json()["data"] == before


# --- target mcq: the same ARC items asked by /v1/mcq/answer ---------------------------------


@pytest.fixture(scope="module")
def mcq_items(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "question": ex["input"],
            "options": [c["value"] for c in ex["questions"][0]["choices"]],
            "answer_index": answer_indexes(ex)[0],
        }
        for ex in examples
    ]


def mcq_answer(server: Any, item: dict[str, Any], **options: Any) -> httpx.Response:
    body = {"question": item["question"], "options": item["options"], **options}
    return httpx.post(server.url + "/v1/mcq/answer", json=body, timeout=300)


def answered(server: Any, item: dict[str, Any], **options: Any) -> dict[str, Any]:
    r = mcq_answer(server, item, **options)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.fixture(scope="module")
def mcq_cal(server: Any, mcq_items: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"target": "mcq", "examples": mcq_items, "folds": FOLDS, "bins": BINS}
    r = httpx.post(server.url + "/v1/calibrations", json=body, timeout=600)
    assert r.status_code == 200, r.text
    fitted: dict[str, Any] = r.json()
    return fitted


def test_an_mcq_fit_reports_one_temperature_and_what_its_reads_give(
    server: Any,
    mcq_items: list[dict[str, Any]],
    mcq_cal: dict[str, Any],
    prob_tol: float,
    logit_tol: float,
) -> None:
    assert (mcq_cal["target"], mcq_cal["method"], mcq_cal["types"]) == ("mcq", "temperature", None)
    assert mcq_cal["examples"] == ITEMS
    t = mcq_cal["parameters"]["temperature"]
    assert t > 0
    raw = [np.asarray(answered(server, it, calibration_id="none")["probs"]) for it in mcq_items]
    truth = [it["answer_index"] for it in mcq_items]
    for m, rows in (
        (mcq_cal["fit_set"]["raw"], raw),
        (mcq_cal["fit_set"]["calibrated"], [tempered(list(r), t) for r in raw]),
    ):
        conf, _ = top_label(rows, truth)
        assert m["mean_probability"] == pytest.approx(conf.mean(), abs=prob_tol)
        nll = -np.mean([np.log(r[a]) for r, a in zip(rows, truth, strict=True)])
        assert m["nll"] == pytest.approx(nll, abs=logit_tol)
        assert m["ece"] == pytest.approx(ece_of_bins(m["bins"]))
    held = mcq_cal["held_out"]["calibrated"]
    assert held["ece"] == pytest.approx(ece_of_bins(held["bins"]))


def test_a_calibrated_mcq_answer_is_its_read_through_the_temperature(
    server: Any, mcq_items: list[dict[str, Any]], mcq_cal: dict[str, Any], cal: dict[str, Any]
) -> None:
    t = mcq_cal["parameters"]["temperature"]
    info = {"id": mcq_cal["id"], "method": "temperature", "parameters": mcq_cal["parameters"]}
    for item in mcq_items[:3]:
        out = answered(server, item, calibration_id=mcq_cal["id"])
        assert out["calibration"] == info
        before = out["uncalibrated_probs"]
        assert out["probs"] == pytest.approx(tempered(before, t).tolist(), abs=1e-12)
        assert out["answer_index"] == int(np.argmax(before))
        assert out["probs_raw"] == pytest.approx(before, abs=1e-12)  # no debiasing here
    body = {"items": mcq_items[:3], "calibration_id": mcq_cal["id"]}
    batch = httpx.post(server.url + "/v1/mcq/answer/batch", json=body, timeout=300)
    assert batch.status_code == 200, batch.text
    assert batch.json()["calibration"] == info
    for r in batch.json()["results"]:
        assert r["probs"] == pytest.approx(tempered(r["uncalibrated_probs"], t).tolist(), abs=1e-12)
    plain = answered(server, mcq_items[0], calibration_id="none")
    assert (plain["calibration"], plain["uncalibrated_probs"]) == (None, None)
    # a decisions calibration is another target; a probability calibration is no PriDe prior
    other = mcq_answer(server, mcq_items[0], calibration_id=cal["id"])
    assert (other.status_code, other.json()["error"]["type"]) == (422, "calibration_mismatch")
    pride = mcq_answer(server, mcq_items[0], debias="pride", calibration_id=mcq_cal["id"])
    assert pride.status_code == 422
    assert "naming a debiasing calibration" in pride.json()["error"]["message"]


def test_an_mcq_default_applies_until_cleared(
    server: Any, mcq_items: list[dict[str, Any]], mcq_cal: dict[str, Any]
) -> None:
    url = server.url + "/v1/calibrations"
    put = httpx.put(url + "/defaults/mcq", json={"calibration_id": mcq_cal["id"]})
    assert put.status_code == 200, put.text
    try:
        assert answered(server, mcq_items[0])["calibration"]["id"] == mcq_cal["id"]
        assert answered(server, mcq_items[0], calibration_id="none")["calibration"] is None
    finally:
        assert httpx.delete(url + "/defaults/mcq").status_code == 204
    assert answered(server, mcq_items[0])["calibration"] is None
