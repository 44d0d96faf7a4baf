"""Every `verifier bench <name>` in its smoke mode (seconds, a few items), through the command
line: each exits 0 and writes a record that says where and on what it ran; the mechanics of
the published ones are checked further. Benchmarks that only talk to a service use the
session's server (``--url``); the others start what they compare."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadtests.cli import SCRIPTS

pytestmark = pytest.mark.engine

URL = "{url}"  # replaced by the session server's URL
# name -> the smoke mode's extra arguments. Every `verifier bench` name must be here.
SMOKE_ARGS: dict[str, list[str]] = {
    "load": ["--url", URL],
    "tradeoff": ["--base-url", URL],
    "rewards": ["--url", URL],
    "rewards-mixed": ["--url", URL],
    "code": ["--url", URL],
    "group-calls": ["--url", URL],
    "precision": ["--url", URL],
    "schema-fuzz": ["--url", URL],
    "mcq-audit": ["--url", URL],
    "redis-loss": [],
    "judgment-cache": ["--url", URL],
    "memory-soak": ["--url", URL],
    "overload": ["--url", URL],
    "queue-overhead": [],
    "process-modes": ["--url", URL],
    # These start engines of their own (what they compare the service with, or a service whose
    # Redis they kill): a minute or more each on a 2-core CPU, so they run with
    # `pytest -m bench_engine`, outside the default run that CI keeps under 30 minutes.
    "redis-loss-http": [],
    "remote-agreement": ["--url", URL],
    "pooling": ["--skip-prm"],
    "queue-latency": [],
    "mcq-throughput": [],
    "judge-throughput": ["--url", URL],
    "remote-engine": [],
    "mixed-load": ["--url", URL],
    "models": [],
}
OWN_ENGINES = {
    "redis-loss-http",
    "remote-agreement",
    "pooling",
    "queue-latency",
    "mcq-throughput",
    "judge-throughput",
    "remote-engine",
    "mixed-load",
    "models",
}
NAMES = ["load", "tradeoff", *(m.replace("_", "-") for m in SCRIPTS)]
PARAMS = [pytest.param(n, marks=pytest.mark.bench_engine) if n in OWN_ENGINES else n for n in NAMES]


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


def test_every_benchmark_has_a_smoke_mode_here() -> None:
    assert sorted(SMOKE_ARGS) == sorted(NAMES)


@pytest.mark.parametrize("name", PARAMS)
def test_smoke(name: str, server: Any, tmp_path: Path) -> None:
    args = [a.replace(URL, server.url) for a in SMOKE_ARGS[name]]
    stdout = bench(name, "--smoke", "--out", str(tmp_path), *args)
    module = name.replace("-", "_")
    path = tmp_path / f"{module}.smoke.json"
    assert f"wrote {path}" in stdout
    rec = json.loads(path.read_text())
    assert rec["benchmark"] == module
    assert rec["smoke"] is True
    assert len(rec["commit"]) == 40
    assert isinstance(rec["dirty"], bool)
    machine = rec["machine"]
    assert machine["nproc"] >= 1
    assert machine["cpu"]
    assert set(machine["cpu_flags"]) <= {
        "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16", "asimd"
    }  # fmt: skip
    assert len(machine["load_average_at_end"]) == 3
    assert rec["dtype"] in ("float32", "bfloat16", "float16", "auto")
    tail = ["--smoke", "--out", str(tmp_path), *args]
    assert rec["argv"][-len(tail) :] == tail
    assert rec["results"], "a record without figures"
    check = CHECKS.get(module)
    if check is not None:
        check(rec["results"], stdout, tmp_path)


def check_load(result: dict[str, Any], stdout: str, out: Path) -> None:
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
    height, width, _ = png_shape(out / "load.smoke.png")
    assert (height, width) == (450, 1200)


def test_load_refuses_a_remote_target(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service.cli", "bench", "load", "--smoke", "--url",
         "http://192.0.2.1:8000", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "not a loopback address" in result.stderr
    assert list(tmp_path.iterdir()) == []


def check_tradeoff(result: dict[str, Any], stdout: str, out: Path) -> None:
    assert result["n_questions"] == 2
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
        assert rows["1"]["accuracy"] == pytest.approx(sum(first) / 2)
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
    assert base["1"]["random"] == base["1"]["oracle"] == pytest.approx(sum(first) / 2)
    items = result["items"]
    assert len(items) == 2
    for item in items:
        assert sorted(item["order"]) == [0, 1, 2, 3]
        assert set(item["scores"]) == set(names)
        assert all(len(v) == 4 for v in item["scores"].values())
    assert set(result["wall_s"]) == set(names)
    assert "| fused | 4 |" in stdout
    height, width, _ = png_shape(out / "tradeoff.smoke.png")
    assert (height, width) == (500, 1300)


def check_rewards(result: dict[str, Any], stdout: str, out: Path) -> None:
    """The mechanics of the reward bursts (never the 135M judge's accuracy)."""
    cfg = json.loads((out / "rewards.smoke.json").read_text())["config"]
    assert (cfg["prompts"], cfg["completions"], cfg["bursts"]) == (2, 2, 1)
    assert list(result["verifiers"]) == list(result["runs"]) == ["rule", "hybrid", "model"]
    assert cfg["orders"] == [["rule", "hybrid", "model"]]
    for name, s in result["verifiers"].items():
        bursts = result["runs"][name]["bursts"]
        assert len(bursts) == s["bursts"] == 1
        assert s["queries"] == 4 == sum(len(b["rewards"]) for b in bursts)
        for b in bursts:
            assert len(b["decided_by_rule"]) == len(b["is_correct"]) == b["queries"]
            assert b["candidate"] == [0, 1, 0, 1]  # 2 prompts x 2
            assert all(0.0 <= r <= 1.0 for r in b["rewards"])
            assert b["position"] == cfg["orders"][0].index(name)
        # the share decided by rule is what extra_logs said, query by query
        by_rule = sum(sum(b["decided_by_rule"]) for b in bursts)
        assert s["decided_by_rule"] == by_rule
        assert s["decided_by_rule_share"] == pytest.approx(by_rule / s["queries"])
        assert s["decided_by_rule"] + s["decided_by_model"] + s["undecided"] == s["queries"]
        assert 0 <= s["correct"] <= s["queries"] - s["undecided"]
        assert s["accuracy"] == pytest.approx(s["correct"] / s["queries"])
        assert s["engine_calls"] == sum(b["usage"]["engine_calls"] for b in bursts)
        assert s["rewards_per_s"] > 0
        assert 0 < s["latency_ms"]["p50"] <= s["latency_ms"]["p99"]
        assert result["runs"][name]["warmup_wall_s"] > 0
    rule, hybrid, model = (result["verifiers"][v] for v in ("rule", "hybrid", "model"))
    assert rule["engine_calls"] == rule["total_tokens"] == rule["decided_by_model"] == 0
    # hybrid: one direct judgment (one engine call) for each query the rule left undecided
    assert hybrid["undecided"] == 0
    assert hybrid["engine_calls"] == hybrid["decided_by_model"]
    assert model["decided_by_rule"] == model["undecided"] == 0
    assert model["engine_calls"] == model["queries"]
    assert model["total_tokens"] > 0
    cmp_ = result["comparison"]
    assert cmp_["hybrid_over_model_rewards_per_s"] == pytest.approx(
        hybrid["rewards_per_s"] / model["rewards_per_s"]
    )
    assert cmp_["hybrid_minus_model_accuracy"] == pytest.approx(
        hybrid["accuracy"] - model["accuracy"]
    )
    assert len(cmp_["targets"]) == 2
    assert result["rule_check_costs"]["pairs"] == 4
    assert "rule-only >= 1,000 rewards/s per API process" in stdout


def check_group_calls(result: dict[str, Any], stdout: str, out: Path) -> None:
    """The mechanics of the four ways of sending one step (never the machine's speed)."""
    cfg = json.loads((out / "group_calls.smoke.json").read_text())["config"]
    assert (cfg["prompts"], cfg["completions"], cfg["runs"]) == (2, 2, 1)
    assert cfg["judge"] == {"mode": "direct", "verifier": "model", "cache": False}
    modes = ["get_reward", "score", "single", "single_bounded"]
    assert list(result["modes"]) == cfg["modes"] == modes
    assert cfg["orders"] == [modes]
    requests = {"get_reward": 1, "score": 2, "single": 4, "single_bounded": 4}
    for round_ in (result["warmup"], *result["rounds"]):
        assert sorted(round_) == sorted(modes)
        for mode, rec in round_.items():
            assert rec["requests"] == requests[mode]
            assert len(rec["rewards"]) == 4
            assert all(0.0 < r < 1.0 for r in rec["rewards"])  # every one judged by the model
            assert rec["usage"]["engine_calls"] == 4  # cache off: one engine call each
            assert rec["usage"]["prompt_tokens"] > 0
            assert 0 <= rec["usage"]["cached_tokens"] <= rec["usage"]["prompt_tokens"]
    for mode, s in result["modes"].items():
        assert s["requests_per_round"] == requests[mode]
        assert s["rewards"] == 4
        assert s["engine_calls_per_reward"] == 1.0
        assert s["rewards_per_s"] == result["rounds"][0][mode]["rewards_per_s"] > 0
    # each mode judges the same texts behind a question line of its own: their prompts differ
    # by about that line only
    tokens = [s["prompt_tokens_per_reward"] for s in result["modes"].values()]
    assert max(tokens) - min(tokens) < 8
    rate = {m: s["rewards_per_s"] for m, s in result["modes"].items()}
    assert result["comparison"]["get_reward_over_single"] == pytest.approx(
        rate["get_reward"] / rate["single"]
    )
    assert "get_reward / single rewards/s" in stdout


def check_precision(result: dict[str, Any], stdout: str, out: Path) -> None:
    assert result["served_dtype"] in ("float32", "bfloat16")
    assert result["n_reads"] == 2 + 3 + 4  # fixed reads, items alone, the burst
    step = result["logit_grid_step"]
    assert step is None or 0 < step <= 1
    fixed = result["fixed"]
    assert fixed["id"] == "gsm8k-0"
    assert len(fixed["logits"]) == 2
    bv = result["batch_variance"]
    assert (bv["items"], bv["burst_size"]) == (3, 4)
    assert 0 <= bv["max_abs_delta_logit"] < 2  # reads move by a few grid steps, not more
    mcq = result["mcq_audit"]
    assert mcq["items"] == 2
    assert mcq["n_probs"] > 0
    assert 0 <= mcq["max_abs_delta_p"] <= 1
    assert "logit grid step" in stdout
    assert "max |dp|" in stdout


# module -> the further checks of its smoke record's results, its stdout and its --out folder
def check_judge_throughput(result: dict[str, Any], stdout: str, out: Path) -> None:
    """The smoke's two modes (raw, ours) each with a rate, the ratio, and what its engine did
    over its turns, read from vLLM's counters (the raw engine's from the benchmark's process)."""
    (run,) = result["runs"]
    assert run["ours_over_raw"] == pytest.approx(run["ours"] / run["raw"])
    for mode in ("raw", "ours"):
        assert run[mode] > 0
        # every judgment is at least one engine step; a step holds at most the batch's tokens
        assert 0 < 1 / run[f"{mode}_steps_a_judgment"] <= 4  # 4 concurrent clients
        assert 0 < run[f"{mode}_tokens_a_step"] <= 2048
        assert 0 <= run[f"{mode}_cached_share"] < 1
    assert "engine steps a judgment" in stdout


def check_mixed_load(result: dict[str, Any], stdout: str, out: Path) -> None:
    run = result["runs"][0]
    for name in ("ours", "vllm"):
        assert run[name]["reasoning_repeats"] == 0  # every reasoning pair judged once
        counts = run[name]["engine"]["counts"]  # vLLM's own counters over the window
        assert counts["steps"] > 0, counts
        assert counts["generation_tokens"] >= counts["steps"], counts  # a decode a step at least
        assert counts["prompt_tokens"] >= counts["cached_prompt_tokens"] >= 0, counts
    assert "steps/s" in stdout


def check_models(result: dict[str, Any], stdout: str, out: Path) -> None:
    (run,) = result["runs"]
    two = run["servers"]["two"]
    for key in ("judge_alone", "rm_alone", "judge_mixed", "rm_mixed"):
        assert two[key] > 0, two  # each model answered in every window, alone and mixed
    assert two["uss_gib"] > run["servers"]["single"]["uss_gib"] > 0  # two engines weigh more
    assert set(result["median"]) == {
        "routing_p50_ms",
        "judge_two_over_single",
        "judge_mixed_over_alone",
        "rm_mixed_over_alone",
        "share_sum",
    }
    assert "share_sum" in stdout


CHECKS: dict[str, Callable[[dict[str, Any], str, Path], None]] = {
    "load": check_load,
    "tradeoff": check_tradeoff,
    "rewards": check_rewards,
    "group_calls": check_group_calls,
    "precision": check_precision,
    "mixed_load": check_mixed_load,
    "judge_throughput": check_judge_throughput,
    "models": check_models,
}
