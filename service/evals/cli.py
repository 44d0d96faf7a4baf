"""`eval_app`: run the evaluation harnesses against a running service (``verifier eval ...``).

Usage:
    verifier eval processbench --output pb.json [--data FILE] [--limit N] [--mode direct]
        [--threshold 0.5] [--reasoning-tokens 256] [--early-stop/--no-early-stop]
        [--concurrency 8] [--url http://127.0.0.1:8000]
    verifier eval mcq --output mcq.json [--data FILE] [--debias raw,pride,contextual]
        [--limit N] [--calib-ratio 0.05] [--seed 0] [--concurrency 8] [--url ...]
    verifier eval popmcq --output pop.json [--data POOL] [--plot pop.png] [--popularity model]
        [--methods none,popdebias,pride,contextual] [--calib-ratio 0.2] [--seed 0] [--open-recall]
        [--variants] [--url ...]
    verifier eval choices-only --output co.json [--data FILE] [--limit N] [--plot co.png]
        [--reasoning-tokens 64] [--idk] [--perturbations] [--tag-strategies] [--predictability]
        [--inferred-question] [--trace-judge served|remote]
        [--chunk 8] [--concurrency 2] [--url ...]
    verifier eval bestofn --output bon.json [--data FILE] [--limit N] [--method fused]
        [--mode direct] [--alpha 0.5] [--aggregation mean_logit] [--reasoning-tokens 256]
        [--concurrency 8] [--url http://127.0.0.1:8000]
    verifier eval compare --output cmp.json [--data FILE] [--limit PAIRS]
        [--reasoning-tokens 128] [--concurrency 8] [--timeout S] [--url http://127.0.0.1:8000]
    verifier eval calibration --output cal.json [--dataset gsm8k] [--data FILE] [--limit N]
        [--mode direct] [--reasoning-tokens 256] [--folds 5] [--bins 10] [--seed 0]
        [--plot cal.png] [--concurrency 8] [--timeout S] [--url http://127.0.0.1:8000]

The default data files are ``<data_dir>/processbench/gsm8k.json`` and
``<data_dir>/gsm8k/example_model_solutions.jsonl``, with `data_dir` from `Settings`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import httpx
import typer

from service.evals import cli_rl
from service.evals.options import (
    DEFAULT_URL,
    ConcurrencyOpt,
    DataOpt,
    LimitOpt,
    OutputOpt,
    ReasoningOpt,
    TimeoutOpt,
    UrlOpt,
    resolve_data,
    run_harness,
)
from service.evals.report import (
    bestofn_rows,
    calibration_grid,
    calibration_rows,
    choices_only_rows,
    compare_rows,
    decision_calibration_grid,
    decision_calibration_rows,
    lambda_line,
    mcq_rows,
    open_recall_line,
    popmcq_grid,
    print_table,
    processbench_rows,
    reference_rows,
    variants_grid,
    write_json,
)
from service.scoring.process import Aggregation

# The harnesses (and the client they talk through) load when an eval command runs, so
# `verifier serve`, which shares this CLI, never imports the client.
if TYPE_CHECKING:
    from service.evals.common import ProgressFn

# The choices of two request fields, spelled here because the client's models load lazily (see
# above); tests/unit/test_evals_pure.py checks them against verifier_client.models.
ProcessMode = Literal["direct", "reasoning", "single_pass"]
OutcomeMode = Literal["direct", "reasoning"]
ScoreMethod = Literal["outcome", "process", "fused", "compare"]
ModeOpt = Annotated[ProcessMode, typer.Option("--mode", help="Judging mode.")]

logger = logging.getLogger(__name__)

eval_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluation harnesses (ProcessBench, Best-of-N, pairwise comparison, MCQ) against a "
    "running service.",
)


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

    run_harness("processbench", job, output, processbench_rows)


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

    run_harness("bestofn", job, output, bestofn_rows)


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

    run_harness("compare", job, output, compare_rows)


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

    run_harness("reference", job, output, reference_rows)


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

    run_harness("mcq", job, output, mcq_rows)


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
    open_recall: Annotated[
        bool,
        typer.Option(
            "--open-recall",
            help="Ask each question without options first; repeat the table on the known ones.",
        ),
    ] = False,
    variants: Annotated[
        bool,
        typer.Option(
            "--variants",
            help="Also cross-validate the PopDebias variants (grid, entropy, margin) on the "
            "scored items' raw reads, 5 folds by question.",
        ),
    ] = False,
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
                open_recall=open_recall,
                variants=variants,
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
    if result.get("open_recall") is not None:
        typer.echo(open_recall_line(result))
        print_table(popmcq_grid(result, "table_known"))
    if variants:
        typer.echo("PopDebias variants, 5-fold cross-validated by question:")
        print_table(variants_grid(result))
    fit = result["calibration"].get("popdebias")
    if fit is not None:
        typer.echo(f"popdebias lambda {lambda_line(fit)} on {fit['built_items']} built items")
    typer.echo(f"wrote {output} and {png}")


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
    predictability: Annotated[
        bool,
        typer.Option(
            "--predictability", help="A judge predicts each reason trace's letter from it alone."
        ),
    ] = False,
    inferred_question: Annotated[
        bool,
        typer.Option(
            "--inferred-question",
            help="A judge writes the question each choices-only trace reconstructs and reads "
            "whether it matches the real one.",
        ),
    ] = False,
    trace_judge: Annotated[
        Literal["served", "remote"],
        typer.Option(
            "--trace-judge",
            help="served: the served model; remote: the judge the server was started with "
            "(VERIFIER_AUDIT__REMOTE_JUDGE).",
        ),
    ] = "served",
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
            predictability=predictability,
            inferred_question=inferred_question,
            trace_judge=trace_judge,
            chunk=chunk,
            concurrency=concurrency,
            progress=progress,
        )

    run_harness("choices-only", job, output, choices_only_rows)
    png = _plot_path(plot, output)
    plots.audit_plot(json.loads(output.read_text(encoding="utf-8"))["summary"], png)
    typer.echo(f"wrote {png}")


@eval_app.command("calibration")
def calibration_cmd(
    output: OutputOpt,
    dataset: Annotated[
        Literal["gsm8k", "processbench", "gsm8k-pairs", "arc", "arc-mcq"],
        typer.Option(
            "--dataset",
            help="Labelled solutions: gsm8k (is_correct) or processbench "
            "(final_answer_correct); or gsm8k-pairs (one correct and one wrong solution, "
            "compared); or arc (ARC items asked as decisions: a choice and a predicate "
            "question each); or arc-mcq (ARC items asked by /v1/mcq/answer).",
        ),
    ] = "gsm8k",
    data: DataOpt = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="First N labelled solutions (or pairs) only."),
    ] = None,
    mode: Annotated[OutcomeMode, typer.Option("--mode", help="Judging mode.")] = "direct",
    reasoning_tokens: ReasoningOpt = 256,
    folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds.")] = 5,
    bins: Annotated[int, typer.Option("--bins", min=1, help="Equal-mass ECE bins.")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fold assignment.")] = 0,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Reliability diagram PNG; default: the output with .png."),
    ] = None,
    concurrency: ConcurrencyOpt = 8,
    timeout: TimeoutOpt = None,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Calibration of judge probabilities (docs/methods.md J): the raw logit of each labelled
    solution via POST /v1/judge/outcome (or of each pair via POST /v1/judge/compare), then
    temperature and Platt scaling fitted by k-fold; held-out ECE (equal-mass bins), Brier, NLL
    and AUROC per method, and a reliability PNG. --dataset arc reads ARC items via POST
    /v1/decisions and fits a temperature per question type (top-label ECE); arc-mcq reads
    them via POST /v1/mcq/answer and fits one temperature."""
    from service.evals import calibration, decision_calibration, plots

    multiclass = dataset in ("arc", "arc-mcq")
    default_file = (
        decision_calibration.DEFAULT_FILE if multiclass else calibration.DEFAULT_FILES[dataset]
    )
    path = resolve_data(data, default_file)
    args = (limit, mode, reasoning_tokens, folds, bins, seed, concurrency)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        if multiclass:
            return decision_calibration.run_decision_calibration(
                url,
                path,
                *args,
                target="decisions" if dataset == "arc" else "mcq",
                timeout_s=timeout,
                progress=progress,
            )
        return calibration.run_calibration(
            url, path, dataset, *args, timeout_s=timeout, progress=progress
        )

    run_harness(
        "calibration", job, output, decision_calibration_rows if multiclass else calibration_rows
    )
    result = json.loads(output.read_text(encoding="utf-8"))
    print_table(decision_calibration_grid(result) if multiclass else calibration_grid(result))
    png = _plot_path(plot, output)
    plots.reliability_plot(result, png)
    typer.echo(f"wrote {png}")


if __name__ == "__main__":
    eval_app()


eval_app.command("code")(cli_rl.code_cmd)
eval_app.command("rubric")(cli_rl.rubric_cmd)
