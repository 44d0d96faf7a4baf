"""PNG plots of the benchmarks (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and in CI
    import matplotlib.pyplot as plt

    return plt


def plot_load(result: dict[str, Any], path: Path) -> None:
    """Latency over the run (by scheduled send time) and its histogram."""
    plt = _pyplot()
    samples = result["samples"]
    ok = [s for s in samples if s["status"].startswith("2")]
    bad = [s for s in samples if not s["status"].startswith("2")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.scatter([s["scheduled_s"] for s in ok], [s["latency_ms"] for s in ok], s=6, label="ok")
    if bad:
        left.scatter(
            [s["scheduled_s"] for s in bad],
            [s["latency_ms"] for s in bad],
            s=10,
            marker="x",
            color="red",
            label="error",
        )
    for name, style in (("p50", ":"), ("p99", "--")):
        value = result["latency_ms"][name]
        if value is not None:
            left.axhline(value, linestyle=style, color="gray", label=f"{name} {value:.0f} ms")
    left.set_xlabel("scheduled send time (s)")
    left.set_ylabel("latency from scheduled send (ms)")
    left.set_title(f"{result['config']['endpoint']} at {result['offered_rate']:.2f} req/s")
    left.legend(loc="upper left")
    right.hist([s["latency_ms"] for s in ok] or [0.0], bins=40)
    right.set_xlabel("latency (ms)")
    right.set_ylabel("requests")
    right.set_title(f"{result['ok']} ok, {result['errors']} errors")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_tradeoff(result: dict[str, Any], path: Path) -> None:
    """Best-of-N accuracy vs evaluation tokens per question (one line per evaluator over N),
    with the random, majority-vote and oracle lines at the largest N; and accuracy vs N."""
    plt = _pyplot()
    ns = result["config"]["n"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for name, rows in result["evaluators"].items():
        tokens = [rows[str(n)]["tokens_per_question"] for n in ns]
        accuracy = [rows[str(n)]["accuracy"] for n in ns]
        left.plot(tokens, accuracy, marker="o", label=name)
        for n, x, y in zip(ns, tokens, accuracy, strict=True):
            left.annotate(f"N={n}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
        right.plot(ns, accuracy, marker="o", label=name)
    styles = {"random": ":", "majority": "-.", "oracle": "--"}
    top = str(ns[-1])
    for name, style in styles.items():
        values = [result["baselines"][str(n)][name] for n in ns]
        left.axhline(
            result["baselines"][top][name], linestyle=style, color="gray", label=f"{name} (N={top})"
        )
        right.plot(ns, values, linestyle=style, color="gray", marker=".", label=name)
    left.set_xscale("log")
    left.set_xlabel("evaluation tokens per question (prompt + generated)")
    left.set_ylabel("Best-of-N selection accuracy")
    left.set_title(f"{result['model']} on {result['n_questions']} GSM8K questions")
    left.legend(fontsize=7, loc="best")
    right.set_xticks(ns)
    right.set_xlabel("N (candidates per question)")
    right.set_ylabel("selection accuracy")
    right.set_title("accuracy vs N")
    right.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
