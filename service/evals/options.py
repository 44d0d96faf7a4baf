"""What every ``verifier eval`` command shares: its options and how a harness is run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import httpx
import typer
from tqdm import tqdm

from service.config import Settings
from service.evals.report import make_table, print_table, write_json

if TYPE_CHECKING:
    from service.evals.common import ProgressFn

DEFAULT_URL: Final = "http://127.0.0.1:8000"

DataOpt = Annotated[
    Path | None,
    typer.Option("--data", help="Data file; default: the standard file under Settings.data_dir."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="First N items only.")]
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


# --- running ---------------------------------------------------------------------------------


def run_harness(
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
