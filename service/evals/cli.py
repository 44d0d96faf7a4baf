"""`eval_app`: run the evaluation harnesses against a running service (``verifier eval ...``).

Usage:
    verifier eval processbench --output pb.json [--data FILE] [--limit N] [--mode direct]
        [--threshold 0.5] [--reasoning-tokens 256] [--early-stop/--no-early-stop]
        [--concurrency 8] [--url http://127.0.0.1:8000]
    verifier eval mcq --output mcq.json [--data FILE] [--debias raw,pride,contextual]
        [--limit N] [--calib-ratio 0.05] [--seed 0] [--concurrency 8] [--url ...]
    verifier eval bestofn --output bon.json [--data FILE] [--limit N] [--method fused]
        [--mode direct] [--alpha 0.5] [--aggregation mean_logit] [--reasoning-tokens 256]
        [--concurrency 8] [--url http://127.0.0.1:8000]

The default data files are ``<data_dir>/processbench/gsm8k.json`` and
``<data_dir>/gsm8k/example_model_solutions.jsonl``, with `data_dir` from `Settings`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import httpx
import typer
from tqdm import tqdm

from service.config import Settings
from service.protocol import Aggregation, ProcessMode, ScoreMethod

# The harnesses (and the client they talk through) load when an eval command runs, so
# `verifier serve`, which shares this CLI, never imports the client.
if TYPE_CHECKING:
    from service.evals.common import ProgressFn

logger = logging.getLogger(__name__)

DEFAULT_URL: Final = "http://127.0.0.1:8000"

eval_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluation harnesses (ProcessBench, Best-of-N, MCQ) against a running service.",
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


def format_table(rows: Sequence[tuple[str, str]], header: tuple[str, str] = ("", "")) -> str:
    """Two aligned columns: names left-justified, values right-justified."""
    all_rows = [header, *rows] if any(header) else list(rows)
    left = max(len(name) for name, _ in all_rows)
    right = max(len(value) for _, value in all_rows)
    return "\n".join(f"{name:<{left}}  {value:>{right}}" for name, value in all_rows)


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
    typer.echo(format_table(rows(result), header=(desc, "value")))
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
    """ProcessBench first-error F1 via POST /v1/judge/process (METHODS A.7-A.9)."""
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
    return rows


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
    concurrency: ConcurrencyOpt = 8,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """MCQ accuracy, letter selection rates, RStd and cost, raw vs debiased (METHODS B.4-B.7).

    Reads ARC jsonl or the mcqa CSV format (question, choices, answer)."""
    from service.evals import mcq

    path = resolve_data(data, mcq.DEFAULT_FILE)
    methods = [m.strip() for m in debias.split(",") if m.strip()]

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return mcq.run_mcq(
            url, path, methods, limit, calib_ratio, seed, concurrency, progress=progress
        )

    _run("mcq", job, output, mcq_rows)


if __name__ == "__main__":
    eval_app()
