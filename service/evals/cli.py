"""`eval_app`: run the evaluation harnesses against a running service (``verifier eval ...``).

Usage:
    verifier eval processbench --output pb.json [--data FILE] [--limit N] [--mode direct]
        [--threshold 0.5] [--reasoning-tokens 256] [--early-stop/--no-early-stop]
        [--concurrency 8] [--url http://127.0.0.1:8000]
    verifier eval mcq --output mcq.json [--data FILE] [--debias raw,pride,contextual]
        [--limit N] [--calib-ratio 0.05] [--seed 0] [--concurrency 8] [--url ...]
    verifier eval popmcq --output pop.json [--data POOL] [--plot pop.png] [--popularity model]
        [--methods none,popdebias,pride,contextual] [--calib-ratio 0.2] [--seed 0] [--url ...]
    verifier eval choices-only --output co.json [--data FILE] [--limit N] [--plot co.png]
        [--reasoning-tokens 64] [--idk] [--perturbations] [--tag-strategies] [--chunk 8]
        [--concurrency 2] [--url ...]
    verifier eval bestofn --output bon.json [--data FILE] [--limit N] [--method fused]
        [--mode direct] [--alpha 0.5] [--aggregation mean_logit] [--reasoning-tokens 256]
        [--concurrency 8] [--url http://127.0.0.1:8000]
    verifier eval compare --output cmp.json [--data FILE] [--limit PAIRS]
        [--reasoning-tokens 128] [--concurrency 8] [--timeout S] [--url http://127.0.0.1:8000]

The default data files are ``<data_dir>/processbench/gsm8k.json`` and
``<data_dir>/gsm8k/example_model_solutions.jsonl``, with `data_dir` from `Settings`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import httpx
import typer
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from service.config import Settings
from service.scoring.process import Aggregation

# The harnesses (and the client they talk through) load when an eval command runs, so
# `verifier serve`, which shares this CLI, never imports the client.
if TYPE_CHECKING:
    from service.evals.common import ProgressFn

# The choices of two request fields, spelled here because the client's models load lazily (see
# above); tests/unit/test_evals_pure.py checks them against verifier_client.models.
ProcessMode = Literal["direct", "reasoning", "single_pass"]
ScoreMethod = Literal["outcome", "process", "fused", "compare"]

logger = logging.getLogger(__name__)

DEFAULT_URL: Final = "http://127.0.0.1:8000"

eval_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluation harnesses (ProcessBench, Best-of-N, pairwise comparison, MCQ) against a "
    "running service.",
)

DataOpt = Annotated[
    Path | None,
    typer.Option("--data", help="Data file; default: the standard file under Settings.data_dir."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="First N items only.")]
ModeOpt = Annotated[ProcessMode, typer.Option("--mode", help="Judging mode.")]
ReasoningOpt = Annotated[
    int, typer.Option("--reasoning-tokens", min=1, help="Rationale budget (reasoning mode).")
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", min=1, help="Requests in flight at most.")
]
UrlOpt = Annotated[str, typer.Option("--url", help="Base URL of the service.")]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=1.0,
        help="Read timeout per request, seconds (default 330); for a slow judge, with the "
        "server's VERIFIER_LIMITS__REQUEST_TIMEOUT_S raised to match.",
    ),
]
OutputOpt = Annotated[Path, typer.Option("--output", help="Where to write the result JSON.")]


# --- pure helpers ----------------------------------------------------------------------------


def resolve_data(data: Path | None, default: Path) -> Path:
    """`data` if given, else `default` under the settings' data directory."""
    return data if data is not None else Settings().data_dir / default


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


# --- running ---------------------------------------------------------------------------------


def _run(
    desc: str,
    job: Callable[[ProgressFn], Coroutine[Any, Any, dict[str, Any]]],
    output: Path,
    rows: Callable[[dict[str, Any]], list[tuple[str, str]]],
) -> None:
    """Run `job` under a progress bar, write its JSON and print its table; exit 1 on errors."""
    from verifier_client import VerifierError

    with tqdm(desc=desc, unit="item", total=None) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            result = asyncio.run(job(progress))
        except (ValueError, OSError, VerifierError, httpx.HTTPError) as exc:
            bar.close()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
    write_json(output, result)
    print_table(make_table((desc, "value"), rows(result)))
    typer.echo(f"wrote {output}")


@eval_app.command("processbench")
def processbench_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    mode: ModeOpt = "direct",
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, max=1.0, help="First-error threshold.")
    ] = 0.5,
    reasoning_tokens: ReasoningOpt = 256,
    early_stop: Annotated[
        bool,
        typer.Option("--early-stop/--no-early-stop", help="Stop at the first step below it."),
    ] = False,
    concurrency: ConcurrencyOpt = 8,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """ProcessBench first-error F1 via POST /v1/judge/process (docs/methods.md A.7-A.9)."""
    from service.evals import processbench

    path = resolve_data(data, processbench.DEFAULT_FILE)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return processbench.run_processbench(
            url,
            path,
            limit,
            mode,
            threshold,
            reasoning_tokens,
            early_stop,
            concurrency,
            progress=progress,
        )

    _run("processbench", job, output, processbench_rows)


@eval_app.command("bestofn")
def bestofn_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    method: Annotated[
        ScoreMethod, typer.Option("--method", help="Which score picks the candidate.")
    ] = "fused",
    mode: ModeOpt = "direct",
    alpha: Annotated[
        float, typer.Option("--alpha", min=0.0, max=1.0, help="Outcome weight when fused.")
    ] = 0.5,
    aggregation: Annotated[
        Aggregation, typer.Option("--aggregation", help="Step-score aggregation.")
    ] = "mean_logit",
    reasoning_tokens: ReasoningOpt = 256,
    concurrency: ConcurrencyOpt = 8,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Best-of-N selection on GSM8K example solutions via POST /v1/score."""
    from service.evals import bestofn

    path = resolve_data(data, bestofn.DEFAULT_FILE)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return bestofn.run_bestofn(
            url,
            path,
            limit,
            method,
            mode,
            alpha,
            aggregation,
            reasoning_tokens,
            concurrency,
            progress=progress,
        )

    _run("bestofn", job, output, bestofn_rows)


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


@eval_app.command("compare")
def compare_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="First N labelled pairs (not questions); each question gives one pair per "
            "(correct, wrong) pair of its solutions.",
        ),
    ] = None,
    reasoning_tokens: Annotated[
        int | None,
        typer.Option(
            "--reasoning-tokens",
            min=1,
            help="Compare in writing within this many tokens before each read; unset: read "
            "at once.",
        ),
    ] = None,
    concurrency: ConcurrencyOpt = 8,
    timeout: TimeoutOpt = None,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Pairwise comparison of GSM8K (correct, wrong) solution pairs via POST
    /v1/judge/compare: accuracy with both orders read (swap) and in request order only (what
    debias='none' answers), position consistency, first-position rate, tokens per pair."""
    from service.evals import compare

    path = resolve_data(data, compare.DEFAULT_FILE)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return compare.run_compare(
            url,
            path,
            limit,
            reasoning_tokens,
            concurrency,
            timeout_s=timeout,
            progress=progress,
        )

    _run("compare", job, output, compare_rows)


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


@eval_app.command("reference")
def reference_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    verifiers: Annotated[
        str,
        typer.Option(
            "--verifiers",
            help="Comma-separated: rule (here, no server), hybrid and model (through --url).",
        ),
    ] = "rule",
    url: UrlOpt = DEFAULT_URL,
    mode: Annotated[str, typer.Option("--mode", help="The model's mode: direct or reasoning.")] = (
        "direct"
    ),
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 8,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Rule-check processes.")] = 2,
    check_timeout: Annotated[
        float, typer.Option("--check-timeout", min=0.1, help="Seconds per rule check.")
    ] = 2.0,
) -> None:
    """Verification of GSM8K's labelled solutions against their references by rule, hybrid
    and model: accuracy, precision, recall, the share decided by rule, engine calls and tokens
    (docs/methods.md E). `rule` alone needs no server."""
    from service.evals import reference

    path = resolve_data(data, reference.DEFAULT_FILE)
    names = tuple(v.strip() for v in verifiers.split(",") if v.strip())

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return reference.run_verifiers(
            path,
            limit,
            names,
            url=url,
            mode=mode,
            concurrency=concurrency,
            workers=workers,
            timeout_s=check_timeout,
            progress=progress,
        )

    _run("reference", job, output, reference_rows)


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


LambdaFitOpt = Annotated[
    str,
    typer.Option(
        "--lambda-fit",
        help="How popdebias fits lambda (docs/methods.md B.5): question_free, items, or grid "
        "(uses the calibration split's labels).",
    ),
]


@eval_app.command("mcq")
def mcq_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    debias: Annotated[
        str,
        typer.Option(
            "--debias", help="Comma-separated methods: raw, pride, contextual, popdebias."
        ),
    ] = "raw,pride,contextual",
    calib_ratio: Annotated[
        float,
        typer.Option("--calib-ratio", min=0.0, max=0.5, help="Calibration split (held out)."),
    ] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Shuffle seed of the split.")] = 0,
    lambda_fit: LambdaFitOpt = "question_free",
    timeout: TimeoutOpt = None,
    concurrency: ConcurrencyOpt = 8,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """MCQ accuracy, letter selection rates, RStd, cost, raw vs debiased (docs/methods.md B.4-B.7).

    Reads ARC jsonl or the mcqa CSV format (question, choices, answer)."""
    from service.evals import mcq

    path = resolve_data(data, mcq.DEFAULT_FILE)
    methods = [m.strip() for m in debias.split(",") if m.strip()]

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return mcq.run_mcq(
            url,
            path,
            methods,
            limit,
            calib_ratio,
            seed,
            concurrency,
            progress=progress,
            lambda_fit=lambda_fit,
            timeout_s=timeout,
        )

    _run("mcq", job, output, mcq_rows)


POPMCQ_COLUMNS: Final = ("n", "accuracy", "rho", "rho_relative", "hpsr", "pop_gap", "confidence")


def popmcq_grid(result: dict[str, Any]) -> Table:
    table = result["table"]
    rows = []
    for strategy in next(iter(table.values())):
        for method, cells in table.items():
            cell = cells[strategy]
            rows.append([f"{strategy} {method}", *(fmt(cell[c]) for c in POPMCQ_COLUMNS)])
    return make_table(["strategy debias", *POPMCQ_COLUMNS], rows)


def _plot_path(plot: Path | None, output: Path) -> Path:
    return plot if plot is not None else output.with_suffix(".png")


PlotOpt = Annotated[
    Path | None, typer.Option("--plot", help="PNG to write; default: the output with .png.")
]


@eval_app.command("popmcq")
def popmcq_cmd(
    output: OutputOpt,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Pool jsonl: {id, question, answer, candidates}; default: "
            "the example pool in data/popmcq/.",
        ),
    ] = None,
    plot: PlotOpt = None,
    popularity: Annotated[
        str, typer.Option("--popularity", help="model (the service's proxy) or given.")
    ] = "model",
    methods: Annotated[
        str, typer.Option("--methods", help="Comma-separated: none, popdebias, pride, contextual.")
    ] = "none,popdebias,pride,contextual",
    calib_ratio: Annotated[
        float, typer.Option("--calib-ratio", min=0.01, max=0.9, help="Held-out fitting split.")
    ] = 0.2,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    lambda_fit: LambdaFitOpt = "question_free",
    timeout: TimeoutOpt = None,
    limit: LimitOpt = None,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """PopMCQ stress test (docs/methods.md B): S1-S6 from candidate pools, per debiasing method."""
    from verifier_client import VerifierError

    from service.evals import audits, plots

    try:
        result = asyncio.run(
            audits.run_popmcq(
                url,
                data or audits.DEFAULT_POOL,
                popularity=popularity,
                methods=[m.strip() for m in methods.split(",") if m.strip()],
                seed=seed,
                calibration_ratio=calib_ratio,
                limit=limit,
                lambda_fit=lambda_fit,
                timeout_s=timeout,
            )
        )
    except (ValueError, OSError, VerifierError, httpx.HTTPError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    write_json(output, result)
    png = _plot_path(plot, output)
    plots.popmcq_plot(result, png)
    typer.echo(
        f"questions {result['n_items']}, kept {result['n_kept']} "
        f"(calibration {result['n_calibration']}, scored {result['n_scored']}), "
        f"dropped {len(result['dropped'])}, skipped pairs {result['skipped']}, "
        f"unreadable rows {len(result['skipped_rows'])}"
    )
    print_table(popmcq_grid(result))
    fit = result["calibration"].get("popdebias")
    if fit is not None:
        typer.echo(f"popdebias lambda {lambda_line(fit)} on {fit['built_items']} built items")
    typer.echo(f"wrote {output} and {png}")


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
    rows.append(("items / s", fmt(result["items_per_s"], 3)))
    return rows


@eval_app.command("choices-only")
def choices_only_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    plot: PlotOpt = None,
    reasoning_tokens: ReasoningOpt = 64,
    idk: Annotated[bool, typer.Option("--idk", help="Add an 'I don't know' option.")] = False,
    perturbations: Annotated[
        bool, typer.Option("--perturbations", help="Duplicate / nonsense / false option checks.")
    ] = False,
    tag_strategies: Annotated[
        bool, typer.Option("--tag-strategies", help="Tag choices-only rationales, regress.")
    ] = False,
    chunk: Annotated[int, typer.Option("--chunk", min=1, help="Items per request.")] = 8,
    concurrency: ConcurrencyOpt = 2,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Choices-only / reasoning audit (docs/methods.md C): full vs choices-only x base vs reason.

    Reads ARC jsonl or the mcqa CSV format (question, choices, answer)."""
    from service.evals import audits, plots

    path = resolve_data(data, audits.DEFAULT_ARC)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return audits.run_choices_only(
            url,
            path,
            limit=limit,
            reasoning_tokens=reasoning_tokens,
            idk=idk,
            perturbations=perturbations,
            tag_strategies=tag_strategies,
            chunk=chunk,
            concurrency=concurrency,
            progress=progress,
        )

    _run("choices-only", job, output, choices_only_rows)
    png = _plot_path(plot, output)
    plots.audit_plot(json.loads(output.read_text(encoding="utf-8"))["summary"], png)
    typer.echo(f"wrote {png}")


if __name__ == "__main__":
    eval_app()
