"""`verifier bench <name>`: every benchmark in loadtests/, run from the installed package.

    verifier bench load [--url URL] [--endpoint PATH] [--payload FILE] [--rate R]
        [--duration S] [--max-requests N] [--arrival uniform|poisson] [--smoke]
    verifier bench tradeoff [--base-url URL | --model MODEL] [--limit N] [--n 1,2,4]
        [--budgets 64,256] [--smoke]
    verifier bench <script> [its own options]    one per name in SCRIPTS

Each writes one result record (``loadtests/bench.py``: date, commit, machine, CPU flags, dtype,
argv) under out/bench/ unless ``--out`` says otherwise, and the first two a PNG beside it. The
script modules are imported only when their command runs (some pull in vLLM).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from tqdm import tqdm

from loadtests import bench, load, plots, tradeoff
from service.config import Settings

bench_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Benchmarks: open-loop load, the evaluation-time compute tradeoff, and the peers.",
)

OUT = bench.OUT
# The benchmarks that keep their own argparse options, by module: `verifier bench <module with
# dashes>` runs each, and `verifier bench <name> --help` shows its options. The one registry:
# the commands, `verifier bench --help` and the tests all read it.
SCRIPTS: Final = (
    "code",
    "group_calls",
    "judge_throughput",
    "judgment_cache",
    "mcq_audit",
    "mcq_throughput",
    "memory_soak",
    "mixed_load",
    "models",
    "overload",
    "pooling",
    "precision",
    "process_modes",
    "queue_latency",
    "queue_overhead",
    "redis_loss",
    "redis_loss_http",
    "remote_agreement",
    "remote_engine",
    "rewards",
    "rewards_mixed",
    "schema_fuzz",
)


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r}: comma-separated integers expected") from exc


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


@bench_app.command("load")
def load_cmd(
    url: Annotated[str, typer.Option(help="Base URL of the target.")] = "http://127.0.0.1:8000",
    endpoint: Annotated[str, typer.Option(help="Path to POST to.")] = load.DEFAULT_ENDPOINT,
    payload: Annotated[
        Path | None,
        typer.Option(help="JSON body, list of bodies or JSON lines; default: GSM8K judgments."),
    ] = None,
    rate: Annotated[float, typer.Option(min=0.01, help="Arrivals per second.")] = 4.0,
    duration: Annotated[float, typer.Option(min=0.1, help="Seconds of sending.")] = 30.0,
    max_requests: Annotated[
        int | None, typer.Option(min=1, help="At most this many requests.")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Per-request timeout (s).")] = 60.0,
    max_inflight: Annotated[int, typer.Option(min=1, help="Connections at most.")] = 256,
    arrival: Annotated[str, typer.Option(help="uniform (every 1/rate) or poisson.")] = "uniform",
    seed: Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")] = 0,
    allow_remote: Annotated[
        bool, typer.Option(help="Allow a target that is not a loopback address.")
    ] = False,
    smoke: Annotated[bool, typer.Option(help="A few seconds: 2 req/s for 2 s.")] = False,
    out: Annotated[Path, typer.Option(help="Folder of the record and the latency plot.")] = OUT,
) -> None:
    """Open-loop load at a fixed arrival rate; latency counted from the scheduled send."""
    if arrival not in ("uniform", "poisson"):
        raise typer.BadParameter("arrival: uniform or poisson")
    if smoke:
        rate, duration = 2.0, 2.0
    try:
        cfg = load.LoadConfig(
            url=url,
            endpoint=endpoint,
            rate=rate,
            duration_s=duration,
            max_requests=max_requests,
            timeout_s=timeout,
            max_inflight=max_inflight,
            arrival="poisson" if arrival == "poisson" else "uniform",
            seed=seed,
            allow_remote=allow_remote,
        )
        bodies = (
            load.read_payloads(payload)
            if payload
            else load.builtin_payloads(Settings(), min(cfg.planned, 256))
        )
        with tqdm(total=cfg.planned, desc="load", unit="req") as bar:
            result = asyncio.run(load.run_load(cfg, bodies, _bar(bar)))
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    args = argparse.Namespace(out=out, smoke=smoke)
    rec = bench.record("load", args, dataclasses.asdict(cfg))
    rec.results = result
    path = bench.write(rec, args)
    plot = path.with_suffix(".png")
    plots.plot_load(result, plot)
    lat = result["latency_ms"]
    typer.echo(
        f"offered {result['offered_rate']:.2f}/s, ok {result['ok']}/{result['scheduled']}, "
        f"throughput {result['throughput_ok_per_s']:.2f}/s, latency ms p50 {_ms(lat['p50'])} "
        f"p95 {_ms(lat['p95'])} p99 {_ms(lat['p99'])}, errors {result['errors_by_status']}"
    )
    typer.echo(f"wrote {plot}")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _bar(bar: Any) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return progress


@bench_app.command("tradeoff")
def tradeoff_cmd(
    base_url: Annotated[
        str | None,
        typer.Option(help="A running service (a real judge on a GPU); none: start one here."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model for the service started here (VERIFIER_ENGINE__MODEL)."),
    ] = None,
    data: Annotated[
        Path | None, typer.Option(help="GSM8K example solutions (JSONL); default under data_dir.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Questions.")] = 50,
    n: Annotated[str, typer.Option(help="Candidates per question, comma-separated.")] = "1,2,4",
    budgets: Annotated[
        str, typer.Option(help="The two rationale budgets of the reasoning evaluator.")
    ] = "64,256",
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the candidate order.")] = 0,
    smoke: Annotated[
        bool, typer.Option(help="Seconds: 2 questions, budgets 4 and 8 tokens.")
    ] = False,
    out: Annotated[Path, typer.Option(help="Folder of the record and the plot.")] = OUT,
) -> None:
    """Best-of-N accuracy vs evaluation tokens for N in {1,2,4} and five evaluators."""
    if smoke:
        limit, budgets = 2, "4,8"
    path = data or Settings().data_dir / "gsm8k" / "example_model_solutions.jsonl"
    try:
        low, high = _ints(budgets)
        cfg = tradeoff.TradeoffConfig(
            data=path,
            limit=limit,
            n=_ints(n),
            budgets=(low, high),
            concurrency=concurrency,
            seed=seed,
        )
    except ValueError as exc:
        raise _fail(exc) from exc
    try:
        if base_url:
            if model:
                typer.echo("note: --model is for a service started here; using --base-url's")
            result = _run_tradeoff(base_url, cfg)
        else:
            typer.echo(f"starting verifier serve ({model or 'the embedded default model'})")
            with _local_server(model, out / "tradeoff.server.log") as url:
                result = _run_tradeoff(url, cfg)
    except (ValueError, OSError, RuntimeError) as exc:
        raise _fail(exc) from exc
    args = argparse.Namespace(out=out, smoke=smoke)
    rec = bench.record("tradeoff", args, dataclasses.asdict(cfg) | {"base_url": base_url})
    rec.results = result
    path = bench.write(rec, args)
    plot = path.with_suffix(".png")
    plots.plot_tradeoff(result, plot)
    typer.echo(tradeoff.table(result))
    typer.echo(f"wrote {plot}")


@contextlib.contextmanager
def _local_server(model: str | None, log: Path) -> Iterator[str]:
    """``verifier serve`` of ``model`` (None: the embedded default) on a free loopback port
    until the block ends; yields its URL once /ready answers."""
    from loadtests.harness import ServerProcess, free_port, verifier

    port = free_port()
    env = {**os.environ, "VERIFIER_HOST": "127.0.0.1", "VERIFIER_PORT": str(port)}
    if model:
        env["VERIFIER_ENGINE__MODEL"] = model
    url = f"http://127.0.0.1:{port}"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        yield url


def _run_tradeoff(url: str, cfg: tradeoff.TradeoffConfig) -> dict[str, Any]:
    bars: dict[str, Any] = {}

    def progress(name: str, done: int, total: int) -> None:
        bar = bars.get(name)
        if bar is None:
            bar = bars[name] = tqdm(total=total, desc=name, unit="candidate")
        bar.update(done - bar.n)
        if done == total:
            bar.close()

    try:
        return asyncio.run(tradeoff.run_tradeoff(url, cfg, progress))
    finally:
        for bar in bars.values():
            bar.close()


def _summary(module: str) -> str:
    """The first line of a benchmark's docstring, read without importing it (the import
    pulls in vLLM for some)."""
    spec = importlib.util.find_spec(f"loadtests.{module}")
    if spec is None or spec.origin is None:
        raise LookupError(f"loadtests.{module} is in SCRIPTS but not in the package")
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))
    return " ".join((doc or module).split("\n\n")[0].split())


def run_script(module: str, args: list[str]) -> int:
    """Run loadtests.<module>'s main() with ``args`` as its command line; its exit code."""
    target = importlib.import_module(f"loadtests.{module}")
    name = module.replace("_", "-")
    sys.argv = [f"verifier bench {name}", *args]  # their argparse reads sys.argv
    result = target.main()
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return int(result or 0)


def _script_command(module: str) -> None:
    name = module.replace("_", "-")

    def command(ctx: typer.Context) -> None:
        code = run_script(module, list(ctx.args))
        if code:
            raise typer.Exit(code)

    bench_app.command(
        name,
        help=f"{_summary(module)} Options: verifier bench {name} --help.",
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "help_option_names": [],  # --help goes to the script's own argparse
        },
    )(command)


for _module in SCRIPTS:
    _script_command(_module)
