"""How eval results print: table cells, tables and the rows of each eval's result, and the
strict JSON writer. Pure formatting of the result dicts the evals return."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

POPMCQ_COLUMNS: Final = (
    "n",
    "accuracy",
    "accuracy_se",
    "rho",
    "rho_relative",
    "hpsr",
    "pop_gap",
    "confidence",
)


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: floats with `digits` decimals, None as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def make_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A table with the first column left-justified (names) and the rest right-justified."""
    table = Table(*header, box=None, pad_edge=False)
    for column in table.columns[1:]:
        column.justify = "right"
    for row in rows:
        table.add_row(*row)
    return table


def print_table(table: Table) -> None:
    """Print `table` to stdout; into a pipe or a file at its natural width, never wrapped."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.measure(table).maximum, 1))
    console.print(table)


def token_rows(usage: dict[str, int]) -> list[tuple[str, str]]:
    """Rows of the token split."""
    names = ("total_tokens", "prompt_tokens", "generated_tokens", "cached_tokens", "engine_calls")
    return [(name, fmt(usage.get(name, 0))) for name in names]


def processbench_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Table rows of a ProcessBench result (accuracies and F1 in percent)."""
    metric = result["metric"]
    rows = [(name, fmt(metric[name])) for name in ("f1", "acc_err", "acc_corr")]
    rows += [
        ("n_err", fmt(metric["n_err"])),
        ("n_corr", fmt(metric["n_corr"])),
        ("n_failed", fmt(result["n_failed"])),
        ("wall_s", fmt(result["wall_s"])),
    ]
    return rows + token_rows(result["usage"])


def bestofn_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Table rows of a Best-of-N result (accuracies as fractions)."""
    names = ("selection_accuracy", "random_accuracy", "first_accuracy", "oracle_accuracy")
    rows = [(name, fmt(result[name], 4)) for name in names]
    rows += [
        ("n_items", fmt(result["n_items"])),
        ("n_failed", fmt(result["n_failed"])),
        ("wall_s", fmt(result["wall_s"])),
    ]
    return rows + token_rows(result["eval_tokens"])


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write `result` as strict JSON (no NaN), creating the parent folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def compare_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Table rows of a pairwise comparison result (accuracies and rates as fractions)."""
    names = (
        "accuracy_debiased",
        "accuracy_first_order",
        "position_consistency",
        "first_position_rate",
    )
    rows = [(name, fmt(result[name], 4)) for name in names]
    rows += [
        ("n_pairs", fmt(result["n_pairs"])),
        ("n_questions", fmt(result["n_questions"])),
        ("n_failed", fmt(result["n_failed"])),
        ("wall_s", fmt(result["wall_s"])),
    ]
    for cost, label in (("swap", "both orders"), ("one_order", "one order (half)")):
        per = result["tokens_per_pair"][cost]
        rows += [(f"{k} / pair, {label}", fmt(per[k], 1)) for k in per]
    return rows + token_rows(result["eval_tokens"])


def reference_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Table rows of a verification result: per verifier, its metrics and costs."""
    rows: list[tuple[str, str]] = []
    for name, r in result["verifiers"].items():
        metrics = ("n", "decided_share", "decided_by_rule_share", "accuracy", "precision", "recall")
        rows += [(f"{name} {m}", fmt(r[m], 4)) for m in metrics]
        rows += [(f"{name} reason {k}", fmt(v)) for k, v in sorted(r["reasons"].items())]
        rows += [
            (f"{name} disagreements", fmt(r["n_disagreements"])),
            (
                f"{name} engine calls, tokens per judgment",
                f"{fmt(r['engine_calls_per_judgment'], 3)}, {fmt(r['tokens_per_judgment'], 1)}",
            ),
            (f"{name} judgments / s", fmt(r["checks_per_s"], 1)),
        ]
    return rows


def code_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Pass rates per candidate kind, the tests' and the judge's agreement, Best-of-N."""
    rows = [("tasks", fmt(result["n_tasks"]))]
    rows += [
        (f"pass rate {k} (n={result['n'][k]})", fmt(v, 4)) for k, v in result["pass_rate"].items()
    ]
    rows.append(("tests agree with labels", fmt(result["tests_agreement"], 4)))
    if "judge_accuracy" in result:
        rows.append(
            (
                "judge accuracy, AUROC",
                f"{fmt(result['judge_accuracy'], 4)}, {fmt(result['judge_auroc'], 4)}",
            )
        )
    bon = result["best_of_n"]
    if bon is not None:
        rows.append(
            (
                "best-of-n: random, judge pick, oracle",
                f"{fmt(bon['random'], 4)}, {fmt(bon['judge_pick'], 4)}, {fmt(bon['oracle'], 4)}",
            )
        )
    rows.append(("candidates / s", fmt(result["runs_per_s"], 1)))
    return rows


def rubric_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Per criterion: accuracy and AUROC against its labels; the reward's AUROC."""
    rows = [("cases (questions)", f"{result['n_cases']} ({result['n_questions']})")]
    for name, c in result["criteria"].items():
        rows.append(
            (
                f"{name} (w={fmt(c['weight'], 1)}): accuracy, AUROC",
                f"{fmt(c['accuracy'], 4)}, {fmt(c['auroc'], 4)}",
            )
        )
    rows.append(("reward AUROC vs correct", fmt(result["reward_auroc_correct"], 4)))
    rows.append(("reward AUROC vs all good", fmt(result["reward_auroc_all_good"], 4)))
    rows.append(("rubrics / s", fmt(result["rubrics_per_s"], 2)))
    return rows


def mcq_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Per method: accuracy, chance, RStd, cost per item and the letters it picks."""
    rows = [
        ("items (calibration held out)", f"{result['n_scored']} (+{result['n_calibration']})"),
        ("skipped rows", fmt(len(result["skipped"]))),
    ]
    for name, m in result["methods"].items():
        rows += [
            (f"{name} accuracy", fmt(m["accuracy"], 4)),
            (f"{name} chance", fmt(m["chance"], 4)),
            (f"{name} RStd", fmt(m["rstd"])),
            (f"{name} forward passes / item", fmt(m["forward_passes_per_item"], 3)),
            (f"{name} tokens / item", fmt(m["tokens_per_item"], 1)),
            (
                f"{name} picks",
                " ".join(f"{k}:{v:.2f}" for k, v in m["selection_rates"].items()),
            ),
        ]
        if "lambda" in m.get("fit", {}):
            rows.append((f"{name} lambda", lambda_line(m["fit"])))
    return rows


def lambda_line(fit: dict[str, Any]) -> str:
    """``0.000 (raw -0.746, clipped; question_free)``: the applied lambda and how it was fitted."""
    clipped = ", clipped" if fit.get("clipped") else ""
    return (
        f"{fmt(fit['lambda'], 3)} (raw {fmt(fit.get('lambda_raw'), 3)}{clipped}; "
        f"{fit.get('lambda_fit')})"
    )


def popmcq_grid(result: dict[str, Any], key: str = "table") -> Table:
    """The metrics per strategy and method; ``key="table_known"``: on the open-recall known
    questions only."""
    table = result[key]
    rows = []
    for strategy in next(iter(table.values())):
        for method, cells in table.items():
            cell = cells[strategy]
            rows.append([f"{strategy} {method}", *(fmt(cell.get(c)) for c in POPMCQ_COLUMNS)])
    return make_table(["strategy debias", *POPMCQ_COLUMNS], rows)


def variants_grid(result: dict[str, Any]) -> Table:
    """Held-out accuracy of each cross-validated PopDebias variant per strategy, with the
    standard error of ``none`` (HPSR and the fold lambdas are in the JSON)."""
    cv = result["variants"]
    names = list(cv["table"])
    rows = []
    for strategy, base in cv["table"]["none"].items():
        accs = [fmt(cv["table"][v][strategy]["accuracy"]) for v in names]
        rows.append([strategy, fmt(base["n"]), fmt(base["accuracy_se"]), *accs])
    rows.append(["meets the bar", "", "", "", *(str(cv["meets_bar"][v]) for v in names[1:])])
    return make_table(["strategy", "n", "se", *names], rows)


def open_recall_line(result: dict[str, Any]) -> str:
    """``open recall: 41 of 64 known (0.641 +- 0.060), 30 of them scored``."""
    r = result["open_recall"]
    return (
        f"open recall: {r['n_known']} of {r['n']} known ({fmt(r['known_rate'], 3)} +- "
        f"{fmt(r['known_rate_se'], 3)}), {r['n_scored_known']} of them scored"
    )


def choices_only_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    s = result["summary"]
    rows = [("items", fmt(result["n_items"])), ("skipped rows", fmt(len(result["skipped"])))]
    for cond, c in s["conditions"].items():
        rows.append(
            (f"{cond} accuracy (chance)", f"{fmt(c['accuracy'], 3)} ({fmt(c['chance'], 3)})")
        )
        if c.get("parse_failure_rate") is not None:
            rows.append((f"{cond} parse failures", fmt(c["parse_failure_rate"], 3)))
            rows.append((f"{cond} letter vs ANSWER line disagree", fmt(c["disagreement_rate"], 3)))
        pred = c.get("predictability")
        if pred is not None:
            rows.append(
                (
                    f"{cond} trace predicts the letter (chance; 95% CI; n, empty)",
                    f"{fmt(pred['agreement'], 3)} ({fmt(pred['chance'], 3)}; "
                    f"{fmt(pred['ci_low'], 3)}-{fmt(pred['ci_high'], 3)}; "
                    f"{pred['n']}, {pred['n_empty']})",
                )
            )
        rows.append(
            (f"{cond} tokens / item", fmt(result["tokens_per_item_by_condition"].get(cond), 1))
        )
    for mode, e in s["reasoning_effect"].items():
        rows.append(
            (
                f"{mode}: reason - base (McNemar p)",
                f"{fmt(e['delta'], 3)} (p={fmt(e['p_value'], 3)})",
            )
        )
        rows.append((f"{mode}: answer retention", fmt(e["retention"], 3)))
    rows.append(
        (f"artifacts (choices-only p >= {s['artifact_threshold']})", fmt(len(s["artifacts"])))
    )
    inf = s.get("inferred_question")
    if inf is not None:
        rows.append(("traces inferring a question", f"{inf['n_inferred']} of {inf['n']}"))
        for key in ("correct", "incorrect"):
            m = inf[key]
            rows.append(
                (
                    f"inferred question matches, {key} traces (95% CI; n)",
                    f"{fmt(m['match_rate'], 3)} ({fmt(m['ci_low'], 3)}-{fmt(m['ci_high'], 3)}; "
                    f"{m['n']})",
                )
            )
    rows.append(("items / s", fmt(result["items_per_s"], 3)))
    return rows


CALIBRATION_COLUMNS: Final = (
    "ECE",
    "ECE noise (q90)",
    "Brier",
    "NLL",
    "AUROC (folds)",
    "AUROC pooled",
    "mean p",
)


def calibration_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The run and the maps fitted on the whole set."""
    params = result["parameters"]
    temperature, platt = params["temperature"], params["platt"]
    return [
        ("items (failed)", f"{result['n_items']} ({result['n_failed']})"),
        ("base rate", fmt(result["base_rate"], 3)),
        ("folds, equal-mass bins", f"{result['folds']}, {result['n_bins']}"),
        ("temperature T", _at_bound(fmt(temperature["temperature"], 3), temperature)),
        ("Platt a, b", _at_bound(f"{fmt(platt['a'], 3)}, {fmt(platt['b'], 3)}", platt)),
        ("wall_s", fmt(result["wall_s"])),
        *token_rows(result["usage"]),
    ]


def _at_bound(text: str, fit: dict[str, Any]) -> str:
    return f"{text} (at bound)" if fit.get("at_bound") else text


def calibration_grid(result: dict[str, Any]) -> Table:
    """Held-out figures per method (raw, temperature, Platt)."""
    rows = []
    for method, h in result["held_out"].items():
        m = h["metrics"]
        noise = f"{fmt(h['ece_noise']['mean'], 3)} ({fmt(h['ece_noise']['q90'], 3)})"
        auroc = (h["auroc_folds"], m["auroc"])
        cells = (m["brier"], m["nll"], *auroc, m["mean_probability"])
        rows.append([method, fmt(m["ece"], 3), noise, *(fmt(v, 3) for v in cells)])
    return make_table(["held out", *CALIBRATION_COLUMNS], rows)


DECISION_CALIBRATION_COLUMNS: Final = (
    "T",
    "ECE",
    "ECE noise (q90)",
    "Brier",
    "NLL",
    "AUROC conf.",
    "mean conf.",
)


def decision_calibration_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The run and the temperature fitted per question type on the whole set."""
    temperatures = ", ".join(
        f"{kind} {_at_bound(fmt(t['temperature'], 3), t)}" for kind, t in result["types"].items()
    )
    return [
        (
            "items, questions (failed)",
            f"{result['n_items']}, {result['n_questions']} ({result['n_failed']})",
        ),
        ("raw accuracy", fmt(result["base_rate"], 3)),
        ("folds, equal-mass bins", f"{result['folds']}, {result['n_bins']}"),
        ("temperature T", temperatures),
        ("wall_s", fmt(result["wall_s"])),
        *token_rows(result["usage"]),
    ]


def decision_calibration_grid(result: dict[str, Any]) -> Table:
    """Held-out top-label figures per question type and pooled, raw vs temperature."""
    rows = []
    scopes = [*((kind, t["held_out"], t["temperature"]) for kind, t in result["types"].items())]
    if len(scopes) > 1:  # one type: the pooled figures are its own
        scopes.append(("all", result["held_out"], None))
    for scope, held, t in scopes:
        for method, h in held.items():
            m = h["metrics"]
            noise = f"{fmt(h['ece_noise']['mean'], 3)} ({fmt(h['ece_noise']['q90'], 3)})"
            cells = (m["brier"], m["nll"], m["auroc"], m["mean_probability"])
            temperature = fmt(t, 3) if method == "temperature" and t is not None else ""
            rows.append(
                [
                    f"{scope} {method}",
                    temperature,
                    fmt(m["ece"], 3),
                    noise,
                    *(fmt(v, 3) for v in cells),
                ]
            )
    return make_table(["held out", *DECISION_CALIBRATION_COLUMNS], rows)
