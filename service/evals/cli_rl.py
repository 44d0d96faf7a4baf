"""``verifier eval code`` and ``verifier eval rubric``: the RL verifiers against labels
(registered on ``eval_app`` by service.evals.cli)."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.evals.options import (
    DEFAULT_URL,
    ConcurrencyOpt,
    DataOpt,
    LimitOpt,
    OutputOpt,
    UrlOpt,
    resolve_data,
    run_harness,
)
from service.evals.report import code_rows, rubric_rows

if TYPE_CHECKING:
    from service.evals.common import ProgressFn


def code_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: LimitOpt = None,
    url: UrlOpt = DEFAULT_URL,
    samples: Annotated[Path | None, typer.Option(help="HumanEval-format samples.")] = None,
    judge: Annotated[bool, typer.Option(help="Also read the judge's P(correct).")] = False,
    test_timeout: Annotated[float, typer.Option(min=0.1)] = 10.0,
    concurrency: Annotated[int, typer.Option(min=1)] = 4,
) -> None:
    """HumanEval's references and broken references through the code sandbox (and the judge):
    pass rates and agreement with labels (docs/methods.md L; needs VERIFIER_CODE__ENABLED)."""
    from service.evals import code

    path = resolve_data(data, code.DEFAULT_FILE)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return code.run_code_eval(
            url,
            path,
            limit,
            samples=samples,
            judge=judge,
            timeout_s=test_timeout,
            concurrency=concurrency,
            progress=progress,
        )

    run_harness("code", job, output, code_rows)


def rubric_cmd(
    output: OutputOpt,
    data: DataOpt = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="First N questions only.")
    ] = 100,
    concurrency: ConcurrencyOpt = 4,
    url: UrlOpt = DEFAULT_URL,
) -> None:
    """Rubric grading of GSM8K solutions rewritten so each criterion's truth is known:
    agreement with the labels per criterion (docs/methods.md K.3)."""
    from service.evals import rubric

    path = resolve_data(data, rubric.DEFAULT_FILE)

    def job(progress: ProgressFn) -> Coroutine[Any, Any, dict[str, Any]]:
        return rubric.run_rubric_eval(url, path, limit, concurrency=concurrency, progress=progress)

    run_harness("rubric", job, output, rubric_rows)
