"""`verifier bench load` and `verifier bench tradeoff` in their smoke modes (seconds, 4
questions) against the session's server, through the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.engine


def bench(name: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "service.cli", "bench", name, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def png_shape(path: Path) -> tuple[int, ...]:
    import matplotlib.image

    return tuple(matplotlib.image.imread(str(path)).shape)


def test_load_smoke(server: Any, tmp_path: Path) -> None:
    out, plot = tmp_path / "load.json", tmp_path / "load.png"
    stdout = bench(
        "load", "--smoke", "--url", server.url, "--output", str(out), "--plot", str(plot)
    )
    result = json.loads(out.read_text())
    assert result["scheduled"] == 4  # 2 req/s for 2 s
    assert result["answered"] == result["ok"] == 4, result["status_counts"]
    assert result["errors"] == 0
    assert result["errors_by_status"] == {}
    assert result["status_counts"] == {"200": 4}
    assert result["throughput_ok_per_s"] > 0
    for key in ("latency_ms", "service_latency_ms", "send_lag_ms"):
        stats = result[key]
        assert set(stats) == {"p50", "p95", "p99", "mean", "max"}
        assert all(isinstance(v, float) and v >= 0 for v in stats.values())
    lat = result["latency_ms"]
    assert lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    samples = result["samples"]
    assert [s["index"] for s in samples] == [0, 1, 2, 3]
    assert [s["scheduled_s"] for s in samples] == [0.0, 0.5, 1.0, 1.5]
    for s in samples:
        # counted from the scheduled send, so never shorter than from the actual send
        assert s["latency_ms"] >= s["service_latency_ms"] > 0
    assert "p99" in stdout
    height, width, _ = png_shape(plot)
    assert (height, width) == (450, 1200)


def test_load_refuses_a_remote_target(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service.cli", "bench", "load", "--smoke", "--url",
         "http://192.0.2.1:8000", "--output", str(tmp_path / "x.json")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "not a loopback address" in result.stderr
    assert not (tmp_path / "x.json").exists()


def test_tradeoff_smoke(server: Any, tmp_path: Path) -> None:
    out, plot = tmp_path / "tradeoff.json", tmp_path / "tradeoff.png"
    stdout = bench(
        "tradeoff", "--smoke", "--base-url", server.url, "--output", str(out),
        "--plot", str(plot),
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["n_questions"] == 4
    assert result["model"] == "SmolLM2-135M-Instruct"
    assert result["config"]["n"] == [1, 2, 4]
    names = list(result["evaluators"])
    assert names == [
        "direct outcome",
        "reasoning outcome (4 tokens)",
        "reasoning outcome (8 tokens)",
        "process",
        "fused",
    ]
    for rows in result["evaluators"].values():
        assert list(rows) == ["1", "2", "4"]
        tokens = [rows[n]["tokens_per_question"] for n in ("1", "2", "4")]
        assert 0 < tokens[0] < tokens[1] < tokens[2]  # more candidates cost more
        for row in rows.values():
            assert 0.0 <= row["accuracy"] <= 1.0
    # With one candidate every evaluator picks it: accuracy is that of the first candidate.
    first = [item["correct"][0] for item in result["items"]]
    for rows in result["evaluators"].values():
        assert rows["1"]["accuracy"] == pytest.approx(sum(first) / 4)
    budgets = result["evaluators"]
    # A larger rationale budget never costs fewer generated tokens... in total tokens per
    # question it is at least as much as direct judging of the same candidates.
    assert (
        budgets["reasoning outcome (8 tokens)"]["4"]["tokens_per_question"]
        >= budgets["direct outcome"]["4"]["tokens_per_question"]
    )
    base = result["baselines"]
    assert list(base) == ["1", "2", "4"]
    for b in base.values():
        assert b["random"] <= b["oracle"]
        assert b["majority"] <= b["oracle"]
    assert base["1"]["random"] == base["1"]["oracle"] == pytest.approx(sum(first) / 4)
    items = result["items"]
    assert len(items) == 4
    for item in items:
        assert sorted(item["order"]) == [0, 1, 2, 3]
        assert set(item["scores"]) == set(names)
        assert all(len(v) == 4 for v in item["scores"].values())
    assert set(result["wall_s"]) == set(names)
    assert "| fused | 4 |" in stdout
    height, width, _ = png_shape(plot)
    assert (height, width) == (500, 1300)
