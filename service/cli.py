"""`verifier` command line: serve, worker, models prepare, keys, eval, bench."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from loadtests.cli import bench_app
from service.config import Settings, get_settings
from service.evals.cli import eval_app

# uvicorn's wait for requests in flight after SIGTERM (k8s/base/api.yaml's grace period covers it)
GRACEFUL_SHUTDOWN_S = 30

app = typer.Typer(no_args_is_help=True, add_completion=False, help="verifier-service")
models_app = typer.Typer(no_args_is_help=True, help="Model preparation.")
app.add_typer(models_app, name="models")
app.add_typer(
    eval_app,
    name="eval",
    help="Quality harnesses (ProcessBench, Best-of-N) against a running service.",
)
app.add_typer(bench_app, name="bench", help="Benchmarks: load, tradeoff and the peers.")


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (VERIFIER_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (VERIFIER_PORT).")] = None,
    worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Run a worker (and engine) in-process.")
    ] = True,
    model: Annotated[
        list[str] | None,
        typer.Option(
            help="With VERIFIER_MODELS: run only this model in-process (repeatable; default "
            "every one); workers (`verifier worker --model`) serve the others."
        ),
    ] = None,
) -> None:
    """Run the HTTP service: API plus an in-process worker per model, or API only
    (--no-worker)."""
    import uvicorn

    from service.app import create_app

    settings = get_settings()
    if host is not None:
        settings.host = host
    if port is not None:
        settings.port = port
    _logging(settings.log_level)
    if worker:
        _code_preflight(settings)
    if not worker and not settings.redis_url:
        typer.echo("error: --no-worker needs VERIFIER_REDIS_URL (workers pull from it)", err=True)
        raise typer.Exit(2)
    if model:
        unknown = sorted(set(model) - set(settings.model_names) if settings.models else model)
        if unknown:
            typer.echo(
                f"error: --model {', '.join(unknown)}: VERIFIER_MODELS names "
                f"{', '.join(m.name for m in settings.models) or 'no model'}",
                err=True,
            )
            raise typer.Exit(2)
        if not settings.redis_url and len(model) < len(settings.models):
            typer.echo(
                "error: --model runs some models elsewhere: set VERIFIER_REDIS_URL", err=True
            )
            raise typer.Exit(2)
    api = create_app(settings, run_worker=worker, hosted=model or None)
    config = uvicorn.Config(
        api,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = uvicorn.Server(config)
    state = api.state.svc
    state.request_exit = lambda: setattr(server, "should_exit", True)
    server.run()
    if state.exit_code:  # the engine died: non-zero for the supervisor
        raise typer.Exit(state.exit_code)


@app.command("worker")
def worker_cmd(
    model: Annotated[
        str | None,
        typer.Option(help="The model of VERIFIER_MODELS this worker serves (its own queue)."),
    ] = None,
) -> None:
    """Run a worker process: engine + Redis queue consumer (+ /metrics on its own port)."""
    import asyncio

    from service.app import run_worker_process

    settings = _worker_settings(get_settings(), model)
    _logging(settings.log_level)
    _code_preflight(settings)
    raise typer.Exit(asyncio.run(run_worker_process(settings)))


def _worker_settings(settings: Settings, model: str | None) -> Settings:
    """The settings of the one model a worker serves: the engine group's without
    VERIFIER_MODELS; with it, the entry ``--model`` names (needed when it has several)."""
    names = settings.model_names
    if not settings.models:
        if model is not None and model != settings.model_name:
            typer.echo(f"error: --model {model!r} needs VERIFIER_MODELS to name it", err=True)
            raise typer.Exit(2)
        return settings
    if model is None and len(names) > 1:
        typer.echo(
            f"error: VERIFIER_MODELS names several; pass --model ({', '.join(names)})", err=True
        )
        raise typer.Exit(2)
    try:
        return settings.for_model(model or names[0])
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None


def _code_preflight(settings: Settings) -> None:
    """Fail closed, before the engine starts: code execution on needs a working sandbox."""
    if not settings.code.enabled:
        return
    from service.sandbox.isolation import SandboxUnavailable, check

    try:
        check(settings.code)
    except SandboxUnavailable as exc:
        typer.echo(
            f"error: VERIFIER_CODE__ENABLED is true but code cannot be confined here: {exc}",
            err=True,
        )
        raise typer.Exit(2) from exc


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


@models_app.command("convert")
def models_convert(
    gguf_file: Annotated[Path, typer.Argument(help="A GGUF file with a chat template.")],
    out_dir: Annotated[Path, typer.Argument(help="Folder to write the model into.")],
    force: Annotated[bool, typer.Option(help="Replace OUT_DIR if it is not empty.")] = False,
) -> None:
    """Convert a GGUF into a folder for VERIFIER_ENGINE__MODEL (dequantized, bf16)."""
    from service.engine.models import ModelPreparationError, convert_gguf

    _logging("INFO")
    try:
        path = convert_gguf(gguf_file, out_dir, force=force)
    except (ModelPreparationError, ValueError, OSError) as exc:  # ValueError: architecture
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"converted into {path}; serve it with VERIFIER_ENGINE__MODEL={path}")


keys_app = typer.Typer(no_args_is_help=True, help="API keys (stored hashed in Redis).")
app.add_typer(keys_app, name="keys")


def _keys_redis() -> tuple[Any, str]:
    from service.app import make_redis

    settings = get_settings()
    redis = make_redis(settings)
    if redis is None:
        typer.echo("error: keys live in Redis; set VERIFIER_REDIS_URL", err=True)
        raise typer.Exit(2)
    return redis, settings.redis.prefix


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant the key belongs to.")],
    name: Annotated[str, typer.Option(help="A label for humans.")] = "",
    quota: Annotated[int | None, typer.Option(help="Tokens per window (none = unlimited).")] = None,
    window: Annotated[
        int | None,
        typer.Option(help="Quota window in seconds (none = VERIFIER_AUTH__DEFAULT_WINDOW_S)."),
    ] = None,
) -> None:
    """Create a key; it is printed once and only its hash is stored."""
    import asyncio

    from service.stores.auth import create_key

    window_s = get_settings().auth.default_window_s if window is None else window

    async def run() -> None:
        redis, prefix = _keys_redis()
        try:
            key, record = await create_key(redis, prefix, tenant, name, quota, window_s)
        finally:
            await redis.aclose()
        typer.echo(key)
        typer.echo(
            f"key_id={record.key_id} tenant={record.tenant} quota={record.quota_tokens}", err=True
        )

    asyncio.run(run())


@keys_app.command("revoke")
def keys_revoke(key_or_id: Annotated[str, typer.Argument(help="The key or its key_id.")]) -> None:
    """Revoke a key by the key itself or its key_id."""
    import asyncio

    from service.stores.auth import revoke_key

    async def run() -> bool:
        redis, prefix = _keys_redis()
        try:
            return await revoke_key(redis, prefix, key_or_id)
        finally:
            await redis.aclose()

    if not asyncio.run(run()):
        typer.echo("error: no such key", err=True)
        raise typer.Exit(1)
    typer.echo("revoked")


@keys_app.command("list")
def keys_list() -> None:
    """List keys (ids, tenants, quotas; never the keys)."""
    import asyncio

    from service.stores.auth import list_keys

    async def run() -> list[Any]:
        redis, prefix = _keys_redis()
        try:
            return list(await list_keys(redis, prefix))
        finally:
            await redis.aclose()

    for r in asyncio.run(run()):
        typer.echo(
            f"{r.key_id}  tenant={r.tenant}  name={r.name}  quota={r.quota_tokens}/{r.window_s}s"
        )


if __name__ == "__main__":
    app()
