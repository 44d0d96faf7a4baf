"""MCQ audits through a real server and engine: /v1/mcq/audit, /v1/mcq/popmcq and the evals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from matplotlib import image
from typer.testing import CliRunner

from service.evals.audits import DEFAULT_POOL
from service.evals.cli import eval_app
from service.evals.data import read_arc
from service.scoring import audit, open_recall, popmcq, tagging
from service.scoring.popmcq_build import MID_BAND

BOTH = "ABCDEFGHIJ"


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=300)


@pytest.fixture(scope="module")
def arc8(data_dir: Path) -> list[dict[str, Any]]:
    items, _ = read_arc(data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    return [
        {
            "id": it.id,
            "question": it.question,
            "options": it.options,
            "answer_index": it.answer_index,
        }
        for it in items[:8]
    ]


@pytest.fixture(scope="module")
def audited(server: Any, arc8: list[dict[str, Any]]) -> dict[str, Any]:
    r = post(server.url, "/v1/mcq/audit", {"items": arc8, "reasoning_tokens": 32})
    assert r.status_code == 200, r.text
    return r.json()


def test_audit_of_8_arc_items_in_four_conditions(
    audited: dict[str, Any], arc8: list[dict[str, Any]]
) -> None:
    assert [it["id"] for it in audited["items"]] == [it["id"] for it in arc8]
    for item, res in zip(arc8, audited["items"], strict=True):
        k = len(item["options"])
        assert set(res["conditions"]) == set(audit.CONDITIONS)
        for cond, c in res["conditions"].items():
            assert len(c["probs"]) == k
            assert abs(sum(c["probs"]) - 1) < 1e-6
            assert c["answer_index"] == max(range(k), key=lambda i: (c["probs"][i], -i))
            assert c["answer_letter"] == BOTH[c["answer_index"]]
            assert c["correct"] == (c["answer_index"] == item["answer_index"])
            if cond.endswith("_reason"):
                assert c["parsed_index"] == audit.extract_answer(c["rationale"], k)
                assert c["parse_ok"] == (c["parsed_index"] is not None)
            else:
                assert c["parsed_index"] is None
                assert c["rationale"] is None
    usage = audited["usage"]
    assert sum(audited["tokens_by_condition"].values()) == usage["total_tokens"]
    # 2 reason conditions x 8 items, each rationale within 32 tokens, plus 1 token per read
    assert usage["generated_tokens"] <= 2 * 8 * 32 + 6 * 8


def test_audit_summary_matches_the_items(audited: dict[str, Any]) -> None:
    items, s = audited["items"], audited["summary"]
    assert s["n_items"] == 8
    for cond in audit.CONDITIONS:
        got = s["conditions"][cond]
        assert got["accuracy"] == pytest.approx(
            sum(it["conditions"][cond]["correct"] for it in items) / 8
        )
        assert got["chance"] == pytest.approx(sum(1 / it["k"] for it in items) / 8)
    for mode in ("full", "choices_only"):
        base = [it["conditions"][f"{mode}_base"] for it in items]
        reason = [it["conditions"][f"{mode}_reason"] for it in items]
        b, c, p = popmcq.mcnemar_exact([r["correct"] for r in reason], [x["correct"] for x in base])
        eff = s["reasoning_effect"][mode]
        assert (eff["only_reason_right"], eff["only_base_right"]) == (b, c)
        assert eff["p_value"] == pytest.approx(p)
        same = sum(
            x["answer_index"] == r["answer_index"] for x, r in zip(base, reason, strict=True)
        )
        assert eff["retention"] == pytest.approx(same / 8)
    flagged = [
        it["id"]
        for it in items
        if it["conditions"]["choices_only_base"]["correct"]
        and max(it["conditions"]["choices_only_base"]["probs"]) >= 0.8
    ]
    assert [a["id"] for a in s["artifacts"]] == flagged


def test_choices_only_never_sees_the_question(
    server: Any, arc8: list[dict[str, Any]], prob_tol: float
) -> None:
    """Another question text changes full-condition reads, never choices-only ones."""
    swapped = [{**it, "question": "Which option names a colour of the sky at noon?"} for it in arc8]
    body = {"conditions": ["full_base", "choices_only_base"]}
    a = post(server.url, "/v1/mcq/audit", {"items": arc8, **body}).json()
    b = post(server.url, "/v1/mcq/audit", {"items": swapped, **body}).json()
    full_moved = 0.0
    for x, y in zip(a["items"], b["items"], strict=True):
        px, py = (
            x["conditions"]["choices_only_base"]["probs"],
            y["conditions"]["choices_only_base"]["probs"],
        )
        # the same prompt read twice: equal within the dtype's tolerance
        assert max(abs(u - v) for u, v in zip(px, py, strict=True)) <= prob_tol
        fx, fy = x["conditions"]["full_base"]["probs"], y["conditions"]["full_base"]["probs"]
        full_moved = max(full_moved, *(abs(u - v) for u, v in zip(fx, fy, strict=True)))
    assert full_moved > prob_tol  # the check above would see a question that leaked


def test_audit_idk_perturbations_and_tagging(server: Any, arc8: list[dict[str, Any]]) -> None:
    body = {
        "items": arc8[:3],
        "reasoning_tokens": 24,
        "idk": True,
        "perturbations": True,
        "tag_strategies": True,
        "conditions": ["full_base", "choices_only_base", "choices_only_reason"],
    }
    r = post(server.url, "/v1/mcq/audit", body)
    assert r.status_code == 200, r.text
    out = r.json()
    for item, res in zip(arc8[:3], out["items"], strict=True):
        k = len(item["options"])
        for c in res["conditions"].values():
            assert len(c["probs"]) == k + 1  # the IDK option is last
            assert c["idk"] == (c["answer_index"] == k)
        assert set(res["perturbations"]) == {"full_base", "choices_only_base"}
        for cond, kinds in res["perturbations"].items():
            assert set(kinds) == set(audit.PERTURBATIONS)
            for p in kinds.values():
                assert p["changed"] == (
                    p["answer_index"] != res["conditions"][cond]["answer_index"]
                )
                assert 0 <= p["inserted_at"] <= k
        tags = res["tags"]
        assert set(tags) == set(tagging.LABELS)
        for t in tags.values():
            assert 0 <= t["prob"] <= 1
            assert t["value"] == (t["prob"] > 0.5)
            assert (t["evidence"] is not None) == t["value"]
    s = out["summary"]
    assert s["tagging"]["n"] == 3
    assert "small model" in s["tagging"]["note"]
    assert set(s["perturbations"]) == {"full_base", "choices_only_base"}
    assert {"full_base_perturbed", "choices_only_base_perturbed", "tagging"} <= set(
        out["tokens_by_condition"]
    )


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"answer_index": 9}, "outside"),
        ({"options": [f"o{i}" for i in range(10)], "answer_index": 0, "idk": True}, "too many"),
        ({"tag_strategies": True, "conditions": ["full_base"]}, "choices_only_reason"),
        ({"reasoning_tokens": 5000}, "MAX_REASONING_TOKENS"),
        ({"conditions": ["full_base", "full_base"]}, "repeat"),
    ],
)
def test_audit_refusals(server: Any, change: dict[str, Any], needle: str) -> None:
    change = dict(change)
    item = {"question": "q?", "options": ["a", "b", "c"], "answer_index": 0}
    for key in ("options", "answer_index"):
        if key in change:
            item[key] = change.pop(key)
    r = post(server.url, "/v1/mcq/audit", {"items": [item], **change})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request"
    assert needle in err["message"]


# --- PopMCQ --------------------------------------------------------------------------------------


def _pool(n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DEFAULT_POOL.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 60
    assert all(len(r["candidates"]) >= 12 for r in rows)
    return [
        {
            "id": r["id"],
            "question": r["question"],
            "answer": {"text": r["answer"]},
            "aliases": r.get("aliases", []),
            "candidates": [{"text": c} for c in r["candidates"]],
        }
        for r in rows[:n]
    ]


def test_popmcq_with_the_model_popularity(server: Any) -> None:
    body = {"items": _pool(10), "return_items": True, "seed": 3}
    r = post(server.url, "/v1/mcq/popmcq", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["n_items"] == 10
    assert out["n_kept"] + len(out["dropped"]) == 10
    assert out["n_calibration"] == len(out["calibration_ids"]) >= 1
    scored_ids = {it["item_id"] for it in out["items"]}
    assert not scored_ids & set(out["calibration_ids"])  # the fitting split is never scored
    assert len(scored_ids) == out["n_scored"]
    assert set(out["table"]) == {"none", "popdebias", "pride", "contextual"}
    for method, cells in out["table"].items():
        for strategy, cell in cells.items():
            rows = [it for it in out["items"] if it["strategy"] == strategy]
            assert cell["n"] == len(rows) == out["built"][strategy]
            if not rows:
                continue
            choices = [
                popmcq.Choice(
                    correct=it["chosen"][method] == it["answer_index"],
                    pop_chosen=it["popularity"][it["chosen"][method]],
                    pop_gold=it["popularity"][it["answer_index"]],
                    confidence=0.0,
                )
                for it in rows
            ]
            assert cell["accuracy"] == pytest.approx(popmcq.accuracy(choices))
            assert cell["hpsr"] == pytest.approx(popmcq.hpsr(choices))
            assert cell["pop_gap"] == pytest.approx(popmcq.pop_gap(choices))
    for it in out["items"]:
        gold = it["popularity"][it["answer_index"]]
        others = [p for i, p in enumerate(it["popularity"]) if i != it["answer_index"]]
        if it["strategy"] == "S2":
            assert all(p > gold for p in others)
        if it["strategy"] == "S5":
            assert all(p < gold for p in others)
        if it["strategy"] == "S6":
            assert it["answer_index"] == 3
            assert it["options"][3] == "None of the above"
        if it["strategy"] == "S4":
            assert sum(MID_BAND[0] < p <= MID_BAND[1] for p in others) >= 2


def test_popmcq_open_recall_rescores_the_known_questions(server: Any) -> None:
    """Open recall (docs/methods.md B.8): every question answered without options; the known
    flags follow from the answers by the documented match, and table_known is the table
    recomputed on the scored items of known questions only."""
    pool = _pool(24)[12:]  # rows with aliases among them
    assert any(it["aliases"] for it in pool)
    body = {
        "items": pool,
        "open_recall": True,
        "open_recall_tokens": 16,
        "methods": ["none", "pride"],
        "return_items": True,
        "seed": 3,
    }
    r = post(server.url, "/v1/mcq/popmcq", body)
    assert r.status_code == 200, r.text
    out = r.json()
    recall = out["open_recall"]
    assert recall["n"] == len(pool) == len(recall["items"])
    assert recall["max_tokens"] == 16
    assert [it["item_id"] for it in recall["items"]] == [p["id"] for p in pool]
    for it, p in zip(recall["items"], pool, strict=True):
        names = [p["answer"]["text"], *p["aliases"]]
        m = open_recall.match(it["answer"], names, [c["text"] for c in p["candidates"]])
        assert (it["known"], it["matched"], it["distractor"], it["read"]) == (
            m.known,
            m.matched,
            m.distractor,
            m.read,
        )
    assert any(it["answer"].strip() for it in recall["items"])  # the model did answer
    known = {it["item_id"] for it in recall["items"] if it["known"]}
    assert recall["n_known"] == len(known)
    assert recall["known_rate"] == pytest.approx(len(known) / len(pool))
    scored = out["items"]
    assert recall["n_scored_known"] == len({it["item_id"] for it in scored} & known)
    assert set(out["table_known"]) == {"none", "pride"}
    for method, cells in out["table_known"].items():
        for strategy, cell in cells.items():
            rows = [it for it in scored if it["strategy"] == strategy and it["item_id"] in known]
            assert cell["n"] == len(rows)
            hits = sum(it["chosen"][method] == it["answer_index"] for it in rows)
            if rows:
                assert cell["accuracy"] == pytest.approx(hits / len(rows))
                assert cell["accuracy_se"] == pytest.approx(
                    open_recall.binomial_se(hits, len(rows))
                )
            else:
                assert cell["accuracy"] is None
    # Without open recall neither field is there and nothing is generated.
    r = post(server.url, "/v1/mcq/popmcq", {**body, "open_recall": False})
    assert r.status_code == 200, r.text
    plain = r.json()
    assert plain["open_recall"] is None
    assert plain["table_known"] is None
    assert plain["usage"]["generated_tokens"] < out["usage"]["generated_tokens"]


def test_popmcq_given_popularity_and_refusals(server: Any) -> None:
    items = []
    for i in range(6):
        cands = [{"text": f"city {i}-{j}", "popularity": j / 10} for j in range(10)]
        items.append(
            {
                "id": f"q{i}",
                "question": f"Capital number {i}?",
                "answer": {"text": f"gold {i}", "popularity": 0.35},
                "candidates": cands,
            }
        )
    r = post(
        server.url, "/v1/mcq/popmcq", {"items": items, "popularity": "given", "methods": ["none"]}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["n_kept"] == 6
    assert set(out["built"]) == set(out["skipped"]) == {"S1", "S2", "S3", "S4", "S5", "S6"}
    bad = [{**items[0], "answer": {"text": "x"}}, items[1]]
    r = post(server.url, "/v1/mcq/popmcq", {"items": bad, "popularity": "given"})
    assert r.status_code == 422
    assert "popularity" in r.json()["error"]["message"]
    # Open recall needs each item's gold answer; an alias must say something.
    no_gold = {k: v for k, v in items[0].items() if k != "answer"}
    for broken, field in ((no_gold, "items.0.answer"), ({**items[0], "aliases": [" "]}, "aliases")):
        body = {"items": [broken, items[1]], "popularity": "given", "open_recall": True}
        r = post(server.url, "/v1/mcq/popmcq", body)
        assert r.status_code == 422, r.text
        assert field in r.json()["error"]["message"], r.text


# --- the eval commands ----------------------------------------------------------------------------


def test_eval_commands_write_json_and_png(server: Any, tmp_path: Path, data_dir: Path) -> None:
    runner = CliRunner()
    pool = tmp_path / "pool.jsonl"
    lines = DEFAULT_POOL.read_text(encoding="utf-8").splitlines()[:8]
    pool.write_text("\n".join([*lines, "{not json", '{"question": "q", "answer": "a"}']) + "\n")
    out = tmp_path / "pop.json"
    args = ["popmcq", "--output", str(out), "--data", str(pool), "--url", server.url]
    res = runner.invoke(eval_app, [*args, "--open-recall", "--variants"])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert [s["row"] for s in report["skipped_rows"]] == [9, 10]  # counted, not dropped
    assert report["n_items"] == 8
    assert report["config"]["open_recall"] is True
    assert "S2 none" in res.output
    recall = report["open_recall"]
    assert f"open recall: {recall['n_known']} of 8 known" in res.output
    assert set(report["table_known"]) == set(report["table"])
    # The variants are cross-validated on the scored items' raw reads: `none` is the table's.
    variants = report["variants"]
    assert set(variants["table"]) == {"none", "grid", "entropy", "margin"}
    for strategy, cell in variants["table"]["none"].items():
        assert cell["n"] == report["table"]["none"][strategy]["n"]
        assert cell["accuracy"] == pytest.approx(report["table"]["none"][strategy]["accuracy"])
    assert "meets the bar" in res.output
    assert image.imread(str(out.with_suffix(".png"))).shape[0] > 100

    out = tmp_path / "co.json"
    res = runner.invoke(
        eval_app,
        [
            "choices-only",
            "--output", str(out),
            "--data", str(data_dir / "arc" / "ARC-Challenge-Dev.jsonl"),
            "--limit", "5",
            "--chunk", "2",
            "--reasoning-tokens", "16",
            "--url", server.url,
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["n_items"] == 5
    assert set(report["summary"]["conditions"]) == set(audit.CONDITIONS)
    assert report["items_per_s"] > 0
    assert set(report["tokens_per_item_by_condition"]) == set(audit.CONDITIONS)
    assert image.imread(str(out.with_suffix(".png"))).shape[0] > 100


def test_a_judge_predicts_each_trace_letter_and_the_summary_counts_it(
    server: Any, arc8: list[dict[str, Any]]
) -> None:
    body = {
        "items": arc8,
        "conditions": ["full_reason", "choices_only_reason"],
        "reasoning_tokens": 32,
        "predictability": True,
    }
    r = post(server.url, "/v1/mcq/audit", body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["tokens_by_condition"]["predictability"] > 0
    for cond in ("full_reason", "choices_only_reason"):
        rows = [it["conditions"][cond] for it in answer["items"]]
        for c in rows:
            p = c["prediction"]
            assert p["trace_empty"] == (audit.stripped_trace(c["rationale"]) == "")
            if p["trace_empty"]:
                assert p["predicted_index"] is None
                continue
            assert 0 <= p["predicted_index"] < len(c["probs"])
            assert p["predicted_letter"] == BOTH[p["predicted_index"]]
            assert 0 < p["probability"] <= 1
            assert p["agrees"] == (p["predicted_index"] == c["answer_index"])
        read = [c["prediction"] for c in rows if not c["prediction"]["trace_empty"]]
        agree = sum(p["agrees"] for p in read)
        got = answer["summary"]["conditions"][cond]["predictability"]
        assert (got["n"], got["n_empty"]) == (len(read), len(rows) - len(read))
        if read:
            assert got["agreement"] == pytest.approx(agree / len(read))
            assert (got["ci_low"], got["ci_high"]) == pytest.approx(audit.wilson(agree, len(read)))
    refused = post(
        server.url, "/v1/mcq/audit", {**body, "conditions": ["full_base"], "predictability": True}
    )
    assert refused.status_code == 422
    assert "predictability needs a reason condition" in refused.json()["error"]["message"]


def test_choices_only_traces_get_an_inferred_question_and_the_summary_counts_them(
    server: Any, arc8: list[dict[str, Any]]
) -> None:
    """Mechanics on the 135M model: each choices-only trace gets a question or none, a match
    probability exactly when it has a question, and the summary is recomputed from the rows."""
    body = {
        "items": arc8,
        "conditions": ["choices_only_reason"],
        "reasoning_tokens": 48,
        "inferred_question": True,
    }
    r = post(server.url, "/v1/mcq/audit", body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["trace_judge"] == answer["model"]
    assert answer["tokens_by_condition"]["inferred_question"] > 0
    rows = [it["conditions"]["choices_only_reason"] for it in answer["items"]]
    found = [c["inferred_question"] for c in rows]
    for f in found:
        assert (f["question"] is None) == (f["match_probability"] is None)
        if f["question"] is not None:
            assert f["question"].strip()
            assert "\n" not in f["question"]
            assert 0 < f["match_probability"] < 1
            assert f["matches"] == (f["match_probability"] >= 0.5)
    got = answer["summary"]["inferred_question"]
    asked = [(c["correct"], f) for c, f in zip(rows, found, strict=True) if f["question"]]
    assert (got["n"], got["n_inferred"]) == (len(rows), len(asked))
    for key, want in (("correct", True), ("incorrect", False)):
        part = [f for c, f in asked if c is want]
        assert got[key]["n"] == len(part)
        if part:
            rate = sum(f["matches"] for f in part) / len(part)
            assert got[key]["match_rate"] == pytest.approx(rate)
