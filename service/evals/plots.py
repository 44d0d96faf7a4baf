"""PNG plots of the audit reports (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here or in CI; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402


def _bars(ax: Any, groups: Sequence[str], series: Mapping[str, Sequence[float | None]]) -> None:
    width = 0.8 / max(1, len(series))
    for j, (name, values) in enumerate(series.items()):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [v if v is not None else 0.0 for v in values], width, label=name)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1)


def popmcq_plot(result: Mapping[str, Any], path: Path) -> None:
    """HPSR and accuracy per strategy, one bar per debiasing method (raw = 'none')."""
    table: Mapping[str, Mapping[str, Any]] = result["table"]
    strategies = list(next(iter(table.values())).keys())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, metric, title in (
        (axes[0], "hpsr", "HPSR (share of choices with popularity > 0.5)"),
        (axes[1], "accuracy", "Accuracy"),
    ):
        series = {m: [table[m][s][metric] for s in strategies] for m in table}
        _bars(ax, strategies, series)
        ax.set_title(title, fontsize=10)
    axes[1].legend(title="debias", fontsize=8)
    fig.suptitle(f"PopMCQ on {result.get('model', '')}: raw vs debiased", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def audit_plot(summary: Mapping[str, Any], path: Path) -> None:
    """Accuracy per condition next to chance, and the letter vs ANSWER-line accuracy."""
    conds = list(summary["conditions"])
    rows = summary["conditions"]
    fig, ax = plt.subplots(figsize=(8, 4), constrained_layout=True)
    series = {
        "accuracy (letter logprobs)": [rows[c]["accuracy"] for c in conds],
        "accuracy (ANSWER: line)": [rows[c].get("accuracy_parsed") for c in conds],
    }
    _bars(ax, ["\n".join(c.rsplit("_", 1)) for c in conds], series)
    chance = [rows[c]["chance"] for c in conds]
    ax.plot(range(len(conds)), chance, "k--", marker="o", label="chance (mean 1/K)")
    ax.legend(fontsize=8)
    ax.set_title(f"Choices-only / reasoning audit, {summary['n_items']} items", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reliability_plot(result: Mapping[str, Any], path: Path) -> None:
    """Reliability diagram of the held-out predictions per method (equal-mass bins: mean
    predicted vs observed frequency, the diagonal is perfect calibration), and their spread."""
    held_out: Mapping[str, Mapping[str, Any]] = result["held_out"]
    fig, (ax, hist) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect")
    for method, h in held_out.items():
        bins = h["metrics"]["bins"]
        ece = h["metrics"]["ece"]
        ax.plot(
            [b["mean_predicted"] for b in bins],
            [b["observed"] for b in bins],
            marker="o",
            label=f"{method} (ECE {ece:.3f})",
        )
    ax.axhline(result["base_rate"], color="grey", linewidth=0.8, linestyle=":", label="base rate")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean predicted P(correct)", ylabel="observed")
    ax.set_title(f"Held-out reliability, {result['folds']}-fold, equal-mass bins", fontsize=10)
    ax.legend(fontsize=8)
    for method in held_out:
        hist.hist(
            [item["held_out"][method] for item in result["items"]],
            bins=20,
            range=(0, 1),
            histtype="step",
            label=method,
        )
    hist.set(xlabel="held-out P(correct)", ylabel="items")
    hist.legend(fontsize=8)
    config = result.get("config", {})
    model, target = config.get("model") or "", config.get("target") or "outcome"
    fig.suptitle(
        f"{target.capitalize()} calibration on {model}: {len(result['items'])} reads",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
