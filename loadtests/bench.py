"""What every benchmark shares: its command line, free ports, rotated rounds, medians, and the
result record that makes a published figure traceable to a commit and a machine.

A benchmark builds its parser with :func:`parser` (``--out DIR``, ``--smoke`` with its values,
``--runs``),
writes one :class:`Record` with :func:`write` (``<out>/<name>.json``; ``<name>.smoke.json`` in
smoke mode, so a smoke run never overwrites a published result) and prints its ratios. Every
record holds the date, the commit (and whether the tree was dirty), the machine (CPU model,
cores, the x86 flags that decide bf16 speed), the engine dtype the run resolved and argv.

Example:
    >>> args = parser("queue_latency", __doc__, smoke={"jobs": 4}).parse(["--smoke"])  # doctest: +SKIP
    >>> rec = record("queue_latency", args, config={"jobs": 20})  # doctest: +SKIP
    >>> rec.results["p50_ms"] = 3.1  # doctest: +SKIP
    >>> write(rec, args)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, Field

from service.config import Settings
from service.engine.device import cpu_flags, read_cpuinfo, resolve_dtype

# The checkout (benchmarks write under ROOT/out/bench by default).
ROOT: Final = Path(__file__).resolve().parents[1]
OUT: Final = ROOT / "out" / "bench"
# The CPU flags a reader needs to compare figures across machines: vector width and native bf16.
FLAGS_OF_NOTE: Final = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16", "asimd")

T = TypeVar("T")


class Machine(BaseModel):
    """Where a run ran."""

    cpu: str
    arch: str
    nproc: int = Field(description="Cores this process may use (its affinity).")
    cpu_count: int | None
    cpu_flags: list[str] = Field(description="The flags of FLAGS_OF_NOTE this CPU has.")
    load_average_at_start: list[float]
    load_average_at_end: list[float] | None = None


class Record(BaseModel):
    """One benchmark run: provenance, its configuration and its figures."""

    benchmark: str
    date: str
    commit: str | None
    dirty: bool
    machine: Machine
    dtype: str = Field(description="The engine dtype VERIFIER_ENGINE__DTYPE resolves to here.")
    argv: list[str]
    smoke: bool
    config: dict[str, Any] = Field(default_factory=dict)
    results: dict[str, Any] = Field(default_factory=dict)


class Parser(argparse.ArgumentParser):
    """A benchmark's parser; ``parse`` applies its smoke mode's values when ``--smoke`` is given."""

    def __init__(self, *args: Any, smoke: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.smoke = dict(smoke or {})

    def parse(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """Parse ``argv``; with ``--smoke`` the smoke's values replace the defaults, so options
        given explicitly still win."""
        args = self.parse_args(argv)
        if not (args.smoke and self.smoke):
            return args
        saved = {dest: self.get_default(dest) for dest in self.smoke}
        self.set_defaults(**self.smoke)
        try:
            return self.parse_args(argv)
        finally:
            self.set_defaults(**saved)


def parser(
    name: str,
    doc: str | None,
    *,
    runs: int | None = None,
    smoke: Mapping[str, Any] | None = None,
) -> Parser:
    """A benchmark's parser with the shared options: ``--out DIR``, ``--smoke`` (whose values
    are ``smoke``: seconds, the mechanics, not figures) and, when the benchmark repeats its
    measurement, ``--runs N`` (default ``runs``)."""
    p = Parser(
        prog=f"verifier bench {name.replace('_', '-')}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        smoke=smoke,
    )
    p.add_argument(
        "--out", type=Path, default=OUT, help=f"Folder of the result record (default {OUT})."
    )
    p.add_argument("--smoke", action="store_true", help="Seconds: the mechanics, not figures.")
    if runs is not None:
        p.add_argument("--runs", type=int, default=runs, help=f"Timed rounds (default {runs}).")
    return p


def _cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Model", "Hardware"):
            return value.strip()
    return platform.processor() or platform.machine()


def machine() -> Machine:
    cpuinfo = read_cpuinfo()
    flags = cpu_flags(cpuinfo)
    return Machine(
        cpu=_cpu_model(cpuinfo),
        arch=platform.machine(),
        nproc=len(os.sched_getaffinity(0)),
        cpu_count=os.cpu_count(),
        cpu_flags=[f for f in FLAGS_OF_NOTE if f in flags],
        load_average_at_start=list(os.getloadavg()),
    )


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def engine_dtype() -> str:
    """The dtype an engine started here with the current settings runs (``auto`` resolved the
    way the engine resolves it on this device). The device is read from /dev, not torch: a
    record of a benchmark that starts no engine should not pay for importing torch."""
    device = "cuda" if any(Path("/dev").glob("nvidia[0-9]*")) else "cpu"
    return resolve_dtype(Settings().engine.dtype, device)


def record(name: str, args: argparse.Namespace, config: Mapping[str, Any] | None = None) -> Record:
    """A new record of benchmark ``name`` for the parsed ``args``, stamped now."""
    return Record(
        benchmark=name,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        commit=_git("rev-parse", "HEAD") or None,
        dirty=bool(_git("status", "--porcelain", "--untracked-files=no")),
        machine=machine(),
        dtype=engine_dtype(),
        argv=list(sys.argv),
        smoke=bool(getattr(args, "smoke", False)),
        config=dict(config or {}),
    )


def result_path(name: str, args: argparse.Namespace) -> Path:
    smoke = ".smoke" if getattr(args, "smoke", False) else ""
    return Path(args.out) / f"{name}{smoke}.json"


def write(rec: Record, args: argparse.Namespace) -> Path:
    """Write ``rec`` (strict JSON: no NaN) to its result path; print and return the path."""
    rec.machine.load_average_at_end = list(os.getloadavg())
    path = result_path(rec.benchmark, args)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rec.model_dump_json(indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


def rotated(arms: Sequence[T], rounds: int) -> list[tuple[T, ...]]:
    """The arms' order in each round, rotated so that each goes first equally often (in every
    ``len(arms)`` rounds): a machine whose speed drifts, a warm cache or a prefix the previous
    arm left in vLLM's cache favours none of them."""
    k = len(arms)
    return [tuple(arms[r % k :]) + tuple(arms[: r % k]) for r in range(rounds)]


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def medians(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key of the first run, the median over the runs that have it."""
    return {k: median(run[k] for run in runs if k in run) for k in runs[0]} if runs else {}
