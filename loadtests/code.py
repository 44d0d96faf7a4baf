"""Code verification: what the sandbox costs, and a GRPO-shaped burst of code rewards.

1. **Isolation cost.** The same programs (HumanEval's reference solutions, each run with its
   task's ``check`` through the assertion harness of docs/methods.md L.2) run three ways, in
   rotated order, at the same concurrency (the service's pool size): started directly as
   ``python3 -I -B main.py`` in a temporary directory with no isolation; through the sandbox
   in this process (``service.sandbox``: bubblewrap, rlimits, a dropped uid); and through the
   service (``/v1/rewards`` code items: HTTP, queue, worker, sandbox). Runs/s of each (median
   over rounds) and the ratios to direct. Target: isolation costs at most 2x.
2. **GRPO burst.** 8 prompts x 16 completions x 5 tests through ``/get_reward``, each label a
   ``code`` spec: half the completions a task's reference, half the reference without its
   returns, each the whole function in a fence (a chat model's answer). Wall time,
   rewards/s and runs/s, and whether every reward was right.

Needs root and bubblewrap here, and a service with VERIFIER_CODE__ENABLED=true (started here
with it unless ``--url`` is given).

    verifier bench code                                # starts one `verifier serve`
    verifier bench code --url http://127.0.0.1:8000    # a running service
    verifier bench code --smoke                        # a few programs: seconds
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from loadtests import bench
from loadtests.harness import service
from service.config import CodeSettings, Settings
from service.sandbox.isolation import check
from service.sandbox.runner import Program, Sandbox
from service.scoring import code as checks

NAME: Final = "code"
_ASSERT = re.compile(r"^\s*(assert candidate\(.*)$", re.MULTILINE)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench.parser(
        NAME,
        __doc__,
        runs=3,
        smoke={"programs": 4, "prompts": 1, "completions": 2, "tests": 2, "runs": 1},
    )
    p.add_argument("--url", default=None, help="A running service (default: start one).")
    p.add_argument("--programs", type=int, default=64, help="Programs per arm and round.")
    p.add_argument("--prompts", type=int, default=8, help="GRPO burst: prompts.")
    p.add_argument("--completions", type=int, default=16, help="GRPO burst: per prompt.")
    p.add_argument("--tests", type=int, default=5, help="GRPO burst: tests per completion.")
    p.add_argument("--timeout", type=float, default=900.0, help="HTTP timeout per call (s).")
    return p.parse(argv)


# --- the programs (pure) ---------------------------------------------------------------------


def tasks(settings: Settings, n: int | None) -> list[Any]:
    from service.evals.data import load_humaneval

    return load_humaneval(settings.data_dir / "humaneval" / "HumanEval.jsonl.gz", n)


def cases(task: Any, k: int) -> list[str]:
    """Up to ``k`` of the task's own asserts, each a case on its own (``candidate`` bound)."""
    lines = _ASSERT.findall(task.test)[:k]
    return [f"candidate = {task.entry_point}\n{line.strip()}\n" for line in lines]


# --- 1. isolation cost -------------------------------------------------------------------------


async def _direct(files: dict[str, str], python: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            Path(tmp, name).write_text(text)
        proc = await asyncio.create_subprocess_exec(
            python,
            "-I",
            "-B",
            "main.py",
            cwd=tmp,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return proc.returncode == 0


async def _bounded(jobs: Sequence[Callable[[], Awaitable[bool]]], concurrency: int) -> list[bool]:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[bool]]) -> bool:
        async with gate:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs)))


def isolation_cost(
    url: str, settings: Settings, n: int, runs: int, timeout: float
) -> dict[str, Any]:
    cfg = CodeSettings(enabled=True)
    tools = check(cfg)  # fail closed here too; a pool per round (each round has its own loop)
    python = tools.python
    work = tasks(settings, n)
    programs = [checks.assertion_program(t.canonical, t.check) for t in work]
    client = httpx.Client(base_url=url, timeout=timeout)

    def direct() -> list[bool]:
        jobs = [functools.partial(_direct, p.files, python) for p in programs]
        return asyncio.run(_bounded(jobs, cfg.max_concurrency))

    def sandboxed() -> list[bool]:
        sandbox = Sandbox(cfg, tools)

        async def one(p: checks.AssertProgram) -> bool:
            files = {k: v.encode() for k, v in p.files.items()}
            run = await sandbox.run(
                Program(files=files, argv=[python, "-I", "-B", "main.py"]), sandbox.limits()
            )
            return checks.assertion_passed(run.exit_code, run.stdout, p.marker)

        # the pool's own cap (cfg.max_concurrency) bounds it
        return asyncio.run(_bounded([functools.partial(one, p) for p in programs], len(programs)))

    def served() -> list[bool]:
        items = [
            {
                "prompt": t.prompt,
                "response": t.canonical,
                "verifier": {"type": "code", "tests": [{"assert": t.check}]},
            }
            for t in work
        ]
        r = client.post("/v1/rewards", json={"items": items, "cache": False})
        r.raise_for_status()
        return [x["reward"] == 1.0 for x in r.json()["results"]]

    arms: dict[str, Callable[[], list[bool]]] = {
        "direct": direct,
        "sandbox": sandboxed,
        "service": served,
    }
    passed = {name: arm() for name, arm in arms.items()}  # warm-up, and every program passes
    walls: dict[str, list[float]] = {name: [] for name in arms}
    for order in bench.rotated(list(arms), runs):
        for name in order:
            start = time.perf_counter()
            arms[name]()
            walls[name].append(time.perf_counter() - start)
    client.close()
    rate = {name: n / bench.median(w) for name, w in walls.items()}
    return {
        "programs": n,
        "concurrency": cfg.max_concurrency,
        "all_passed": {name: all(p) for name, p in passed.items()},
        "wall_s": walls,
        "runs_per_s": rate,
        "sandbox_over_direct": rate["sandbox"] / rate["direct"],
        "service_over_direct": rate["service"] / rate["direct"],
    }


# --- 2. GRPO burst -------------------------------------------------------------------------------


def grpo_burst(
    client: httpx.Client, settings: Settings, prompts: int, completions: int, k: int
) -> dict[str, Any]:
    chosen = [t for t in tasks(settings, None) if len(cases(t, k)) >= k][:prompts]
    queries, labels, expected = [], [], []
    for t in chosen:
        spec = {"type": "code", "tests": [{"assert": c} for c in cases(t, k)]}
        for j in range(completions):
            # a chat model's answer: the whole function in a fence after the task
            right = j % 2 == 0
            code = t.canonical if right else t.broken
            queries.append(f"{_task_text(t)}```python\n{code}```")
            labels.append(spec)
            expected.append(1.0 if right else 0.0)
    body = {
        "query": queries,
        "prompts": [_task_text(t) for t in chosen for _ in range(completions)],
        "labels": labels,
    }
    start = time.perf_counter()
    r = client.post("/get_reward", json=body)
    wall = time.perf_counter() - start
    r.raise_for_status()
    rewards = r.json()["rewards"]
    runs = len(queries) * k
    return {
        "prompts": len(chosen),
        "completions": completions,
        "tests": k,
        "runs": runs,
        "wall_s": wall,
        "rewards_per_s": len(queries) / wall,
        "runs_per_s": runs / wall,
        "all_right": rewards == expected,
    }


def _task_text(task: Any) -> str:
    return f"Complete this function.\n\n{task.prompt}\n"


def table(results: dict[str, Any]) -> str:
    iso, burst = results["isolation"], results["grpo"]
    r = iso["runs_per_s"]
    return "\n".join(
        [
            f"{iso['programs']} programs at concurrency {iso['concurrency']}: direct "
            f"{r['direct']:.1f} runs/s, sandbox {r['sandbox']:.1f}, service {r['service']:.1f}; "
            f"sandbox / direct {iso['sandbox_over_direct']:.2f}, service / direct "
            f"{iso['service_over_direct']:.2f}",
            f"GRPO burst {burst['prompts']} x {burst['completions']} x {burst['tests']} tests "
            f"through /get_reward: {burst['wall_s']:.2f} s, {burst['rewards_per_s']:.1f} "
            f"rewards/s, {burst['runs_per_s']:.1f} runs/s; every reward right: "
            f"{burst['all_right']}",
        ]
    )


def main() -> int:
    args = parse()
    settings = Settings()
    config = {k: getattr(args, k) for k in ("programs", "prompts", "completions", "tests", "runs")}
    rec = bench.record(NAME, args, config={**config, "url": args.url})
    log = Path(args.out) / f"{NAME}_service.log"
    env = {"VERIFIER_CODE__ENABLED": "true"}
    with (
        service(args.url, log, env) as (url, _),
        httpx.Client(base_url=url, timeout=args.timeout) as c,
    ):
        rec.results["isolation"] = isolation_cost(
            url, settings, args.programs, args.runs, args.timeout
        )
        rec.results["grpo"] = grpo_burst(c, settings, args.prompts, args.completions, args.tests)
    print(table(rec.results))
    bench.write(rec, args)
    ok = all(rec.results["isolation"]["all_passed"].values()) and rec.results["grpo"]["all_right"]
    return 0 if ok else 1
