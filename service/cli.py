"""`verifier` command line: serve, models prepare (and more per issue)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from service.config import get_settings
from service.evals.cli import eval_app

app = typer.Typer(no_args_is_help=True, add_completion=False, help="verifier-service")
models_app = typer.Typer(no_args_is_help=True, help="Model preparation.")
app.add_typer(models_app, name="models")
app.add_typer(
    eval_app,
    name="eval",
    help="Quality harnesses (ProcessBench, Best-of-N) against a running service.",
)


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (VERIFIER_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (VERIFIER_PORT).")] = None,
) -> None:
    """Run the HTTP service (one process, one engine)."""
    import uvicorn

    from service.app import create_app

    settings = get_settings()
    if host is not None:
        settings.host = host
    if port is not None:
        settings.port = port
    _logging(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )


@models_app.command("prepare")
def models_prepare(
    force: Annotated[bool, typer.Option(help="Convert again even if prepared.")] = False,
) -> None:
    """Convert the embedded GGUF default model into a local HF folder (once)."""
    from service.engine.models import ModelPreparationError, prepare_default_model

    settings = get_settings()
    _logging(settings.log_level)
    try:
        path = prepare_default_model(settings, force=force)
    except ModelPreparationError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(str(path))


if __name__ == "__main__":
    app()
