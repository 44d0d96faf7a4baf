"""/v1/calibrations on the real server: fit on labelled GSM8K solutions, apply, defaults,
refusals (docs/methods.md J).

The default model is weak, so only mechanics are checked: every reported figure recomputed
from the raw reads and the stored parameters, every calibrated answer from its raw logit, the
ranking kept, no engine call to apply a new calibration. Never quality.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import special

from service.evals.data import load_gsm8k_solutions
from tests.support.calibration_math import binary_nll, by_hand_bins, ece_of_bins, pairwise_auroc

pytestmark = pytest.mark.engine

# Questions no other test judges, so the cache counts below see only this module's reads.
FIRST_QUESTION = 1300
QUESTIONS = 5  # 20 solutions, 9 correct
FOLDS = 2
BINS = 4
# A question the math rule decides (no engine call).
RULED = {"question": "What is 2 + 3?", "response": "2 + 3 = 5. The answer is 5.", "reference": "5"}


@pytest.fixture(scope="module")
def examples(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    lines = (data_dir / "gsm8k" / "example_model_solutions.jsonl").read_text().splitlines()
    path = tmp_path_factory.mktemp("pcal") / "solutions.jsonl"
    path.write_text("\n".join(lines[FIRST_QUESTION : FIRST_QUESTION + QUESTIONS]) + "\n")
    return [
        {"question": item.question, "response": c.solution, "label": int(c.is_correct)}
        for item in load_gsm8k_solutions(path, QUESTIONS)
        for c in item.candidates
    ]


def fit(server: Any, examples: list[dict[str, Any]], **options: Any) -> httpx.Response:
    body = {"target": "outcome", "examples": examples, "folds": FOLDS, "bins": BINS, **options}
    return httpx.post(server.url + "/v1/calibrations", json=body, timeout=600)


def judge(server: Any, example: dict[str, Any], **options: Any) -> dict[str, Any]:
    body = {k: example[k] for k in ("question", "response", "reference") if k in example}
    r = httpx.post(server.url + "/v1/judge/outcome", json={**body, **options}, timeout=300)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.fixture(scope="module")
def platt(server: Any, examples: list[dict[str, Any]]) -> dict[str, Any]:
    r = fit(server, examples, method="platt", name="gsm8k platt")
    assert r.status_code == 200, r.text
    cal: dict[str, Any] = r.json()
    return cal


def raw_reads(server: Any, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [judge(server, ex, calibration_id="none") for ex in examples]


def check_metrics(m: dict[str, Any], p: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    """``m`` (a reported CalibrationMetrics) against probabilities ``p`` computed by hand."""
    assert (m["n"], m["base_rate"]) == (len(y), pytest.approx(y.mean()))
    assert m["mean_probability"] == pytest.approx(p.mean())
    assert m["brier"] == pytest.approx(np.mean((p - y) ** 2))
    assert m["nll"] == pytest.approx(binary_nll(p, y), rel=1e-6)
    hand = by_hand_bins(p, y, BINS)
    assert [b["count"] for b in m["bins"]] == [b["count"] for b in hand]
    for got, want in zip(m["bins"], hand, strict=True):
        assert got["mean_predicted"] == pytest.approx(want["mean_predicted"])
        assert got["observed"] == pytest.approx(want["observed"])
    assert m["ece"] == pytest.approx(ece_of_bins(m["bins"]))
    assert m["auroc"] == pytest.approx(pairwise_auroc(z, y))


def test_a_fit_reports_what_its_reads_and_parameters_give(
    server: Any, examples: list[dict[str, Any]], platt: dict[str, Any]
) -> None:
    assert platt["id"].startswith("pcal_")
    assert (platt["target"], platt["method"], platt["mode"]) == ("outcome", "platt", "direct")
    assert (platt["examples"], platt["positives"]) == (20, 9)
    assert (platt["folds"], platt["bins"], platt["binning"]) == (FOLDS, BINS, "equal_mass")
    assert platt["usage"]["engine_calls"] + platt["usage"]["cached_judgments"] == 20
    # The same reads again, raw: all from the judgment cache the fit filled.
    reads = raw_reads(server, examples)
    assert all(r["usage"]["engine_calls"] == 0 for r in reads)
    assert all(r["calibration"] is None and r["raw_score"] is None for r in reads)
    z = np.array([r["logit"] for r in reads])
    y = np.array([ex["label"] for ex in examples])
    a, b = platt["parameters"]["a"], platt["parameters"]["b"]
    assert a > 0
    check_metrics(platt["fit_set"]["raw"], special.expit(z), y, z)
    check_metrics(platt["fit_set"]["calibrated"], special.expit(a * z + b), y, z)
    # k-fold: the raw read is not fitted, so its held-out figures are its fit-set figures;
    # the calibrated ones come from maps fitted without each fold (their bins give the ECE).
    assert platt["held_out"]["raw"] == platt["fit_set"]["raw"]
    held = platt["held_out"]["calibrated"]
    assert sum(b["count"] for b in held["bins"]) == 20
    assert held["ece"] == pytest.approx(ece_of_bins(held["bins"]))


def test_a_calibrated_answer_is_its_raw_read_mapped_with_the_ranking_kept(
    server: Any, examples: list[dict[str, Any]], platt: dict[str, Any]
) -> None:
    a, b = platt["parameters"]["a"], platt["parameters"]["b"]
    raw, calibrated = [], []
    for ex in examples:
        answer = judge(server, ex, calibration_id=platt["id"])
        # Mapped after the cache: applying a calibration costs no engine call.
        assert (answer["usage"]["engine_calls"], answer["usage"]["cached_judgments"]) == (0, 1)
        z = answer["logit"]
        assert answer["raw_score"] == pytest.approx(special.expit(z), abs=1e-12)
        assert answer["score"] == pytest.approx(special.expit(a * z + b), abs=1e-12)
        assert answer["verdict"] == int(answer["score"] >= 0.5)
        assert answer["calibration"] == {
            "id": platt["id"],
            "method": "platt",
            "parameters": platt["parameters"],
        }
        raw.append(answer["raw_score"])
        calibrated.append(answer["score"])
    r, c = np.array(raw), np.array(calibrated)
    assert (np.sign(r[:, None] - r[None, :]) == np.sign(c[:, None] - c[None, :])).all()


def test_a_second_calibration_on_the_same_reads_runs_no_engine_call(
    server: Any, examples: list[dict[str, Any]], platt: dict[str, Any]
) -> None:
    r = fit(server, examples, method="temperature")
    assert r.status_code == 200, r.text
    cal = r.json()
    assert (cal["usage"]["engine_calls"], cal["usage"]["cached_judgments"]) == (0, 20)
    assert cal["fit_set"]["raw"] == platt["fit_set"]["raw"]
    t = cal["parameters"]["temperature"]
    assert t > 0
    answer = judge(server, examples[0], calibration_id=cal["id"])
    assert answer["score"] == pytest.approx(special.expit(answer["logit"] / t), abs=1e-12)
    assert httpx.delete(f"{server.url}/v1/calibrations/{cal['id']}").status_code == 204


def test_a_default_applies_where_it_fits_and_goes_with_its_calibration(
    server: Any, examples: list[dict[str, Any]], platt: dict[str, Any]
) -> None:
    url = server.url + "/v1/calibrations"
    r = fit(server, examples, method="temperature", default=True)
    assert r.status_code == 200, r.text
    cal = r.json()
    assert cal["default"] is True
    assert httpx.get(url + "/defaults").json()["defaults"] == {"outcome": cal["id"]}
    listed = {c["id"]: c["default"] for c in httpx.get(url).json()["data"]}
    assert (listed[cal["id"]], listed[platt["id"]]) == (True, False)
    ex = examples[0]
    assert judge(server, ex)["calibration"]["id"] == cal["id"]
    assert judge(server, ex, calibration_id=platt["id"])["calibration"]["id"] == platt["id"]
    assert judge(server, ex, calibration_id="none")["calibration"] is None
    # Fitted on direct reads: a reasoning answer is left raw, and naming it there is refused.
    reasoning = {"mode": "reasoning", "reasoning_tokens": 4}
    assert judge(server, ex, **reasoning)["calibration"] is None
    refused = httpx.post(
        server.url + "/v1/judge/outcome",
        json={**ex, **reasoning, "calibration_id": cal["id"]},
        timeout=300,
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "calibration_mismatch"
    # A rule's decision is not a read of the model: never mapped.
    ruled = judge(server, RULED)
    assert (ruled["decided_by"], ruled["score"], ruled["calibration"]) == ("rule", 1.0, None)
    # Another default replaces it; deleting the default's calibration clears the mark.
    put = httpx.put(url + "/defaults/outcome", json={"calibration_id": platt["id"]})
    assert put.status_code == 200, put.text
    assert put.json()["defaults"] == {"outcome": platt["id"]}
    assert httpx.delete(url + "/defaults/outcome").status_code == 204
    assert judge(server, ex)["calibration"] is None
    assert httpx.put(url + "/defaults/outcome", json={"calibration_id": cal["id"]}).is_success
    assert httpx.delete(f"{url}/{cal['id']}").status_code == 204
    assert httpx.get(url + "/defaults").json()["defaults"] == {}
    assert judge(server, ex)["calibration"] is None
    assert httpx.get(f"{url}/{cal['id']}").status_code == 404
    gone = httpx.post(
        server.url + "/v1/judge/outcome", json={**ex, "calibration_id": cal["id"]}, timeout=60
    )
    assert gone.status_code == 422
    assert gone.json()["error"]["type"] == "unknown_calibration"
    missing = httpx.put(url + "/defaults/outcome", json={"calibration_id": "pcal_missing123"})
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda ex: ex[:7], "at least 8"),
        (lambda ex: [{**e, "label": 1} for e in ex], "both labels"),
        (lambda ex: [{**ex[0], "label": "1"}, *ex[1:]], "valid integer"),
        (lambda ex: [{**ex[0], "label": True}, *ex[1:]], "valid integer"),
        (lambda ex: [{**ex[0], "label": 2}, *ex[1:]], "0 or 1"),
        (lambda ex: [e for e in ex if e["label"] == 0] + [ex[0] | {"label": 1}], "examples of"),
    ],
)
def test_a_fit_that_cannot_be_made_is_refused_and_stores_nothing(
    server: Any, examples: list[dict[str, Any]], change: Any, says: str
) -> None:
    before = httpx.get(server.url + "/v1/calibrations").json()["data"]
    r = fit(server, change(examples))
    assert r.status_code == 422, r.text
    assert says in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/calibrations").json()["data"] == before


def test_an_unknown_target_is_refused(server: Any, examples: list[dict[str, Any]]) -> None:
    r = fit(server, examples, target="decisions")
    assert r.status_code == 422
    assert "target" in r.json()["error"]["message"]


def test_score_rerank_reward_and_the_trl_hook_map_through_a_calibration(
    server: Any, examples: list[dict[str, Any]], platt: dict[str, Any]
) -> None:
    a, b = platt["parameters"]["a"], platt["parameters"]["b"]
    question = examples[0]["question"]
    responses = [ex["response"] for ex in examples[:4]]  # one question's four solutions
    body = {"question": question, "responses": responses, "method": "outcome"}
    raw = httpx.post(
        server.url + "/v1/score", json={**body, "calibration_id": "none"}, timeout=300
    ).json()
    r = httpx.post(
        server.url + "/v1/score", json={**body, "calibration_id": platt["id"]}, timeout=300
    )
    assert r.status_code == 200, r.text
    scored = r.json()
    assert scored["calibration"]["id"] == platt["id"]
    assert scored["ranking"] == raw["ranking"]
    for got, before in zip(scored["results"], raw["results"], strict=True):
        z = special.logit(before["outcome"])
        assert got["raw_outcome"] == before["outcome"]
        assert got["outcome"] == got["final"] == pytest.approx(special.expit(a * z + b), abs=1e-9)
    docs = {"query": question, "documents": responses, "method": "outcome"}
    ranked = httpx.post(
        server.url + "/v1/rerank", json={**docs, "calibration_id": platt["id"]}, timeout=300
    ).json()
    assert ranked["calibration"]["id"] == platt["id"]
    assert [x["index"] for x in ranked["results"]] == raw["ranking"]
    by_index = {x["index"]: x for x in ranked["results"]}
    for i, before in enumerate(raw["results"]):
        assert by_index[i]["raw_score"] == before["outcome"]
        assert by_index[i]["relevance_score"] == scored["results"][i]["outcome"]
    plain = httpx.post(
        server.url + "/v1/rerank", json={**docs, "calibration_id": "none"}, timeout=300
    ).json()
    assert "calibration" not in plain
    assert all("raw_score" not in x for x in plain["results"])
    fused = httpx.post(
        server.url + "/v1/score",
        json={**body, "method": "fused", "calibration_id": platt["id"]},
        timeout=60,
    )
    assert fused.status_code == 422
    assert "method='outcome'" in fused.json()["error"]["message"]

    queries = [f"Q: {question}\n### Response:\n{text}" for text in responses]
    reward = {"query": queries, "separator": "### Response:", "mode": "direct"}
    out = httpx.post(
        server.url + "/get_reward", json={**reward, "calibration_id": platt["id"]}, timeout=300
    ).json()
    logs = out["extra_logs"]
    assert out["calibration"]["id"] == platt["id"]
    assert logs["decided_by_model"] == [1.0] * 4
    z = np.array(logs["verifier_logit"])
    assert out["scores"] == out["rewards"] == pytest.approx(special.expit(a * z + b), abs=1e-12)
    assert logs["model_score"] == pytest.approx(special.expit(z), abs=1e-12)

    from verifier_client.trl import reward_function

    fn = reward_function(server.url, calibration_id=platt["id"])
    rewards = fn(prompts=[question] * 4, completions=responses)
    assert rewards == pytest.approx([res["outcome"] for res in scored["results"]], abs=1e-9)
