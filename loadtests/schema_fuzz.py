"""Schema fuzzing, long mode: schemathesis against a service's /openapi.json.

Every operation, positive and negative examples, all phases (stateful included: links are
inferred from the responses), at least 200 examples per operation; prints the counts and
writes schemathesis' JSON report next to the result record. The served side is counted too:
the service's own ``verifier_requests_total`` before and after the run gives the requests each
route answered, by status, so "at least --examples per operation" and "no 5xx" are checked
where they happen. The bounded CI mode is tests/e2e/test_schema_fuzz.py.

Without ``--url`` a ``verifier serve`` is started here (auth off, the local queue). For the
whole surface, start a service with auth on and the Redis queue, make a key, then:

    VERIFIER_API_KEY=vk_... verifier bench schema-fuzz --url http://127.0.0.1:8000

``--smoke``: one example per operation, the examples and fuzzing phases.
Exit status: 0 when no check failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from loadtests import bench, harness
from loadtests.metrics_text import samples

NAME = "schema_fuzz"

# What "positive_data_acceptance" and "unsupported_method" check is left out: the schema does
# not spell "not blank" (a 422 for a whitespace-only text is by design), and TRACE/OPTIONS
# 405s are checked by tests/e2e/test_hostile_http.py.
EXCLUDED = "positive_data_acceptance,unsupported_method"
# Which statuses reject invalid data (a 413 for a text over its limit is one).
CONFIG = Path(__file__).with_name("schemathesis.toml")
# The service's own deadline (VERIFIER_LIMITS__REQUEST_TIMEOUT_S) plus the time to answer.
DEFAULT_MAX_RESPONSE_S = 305.0
PHASES = "examples,coverage,fuzzing,stateful"
# Smoke: every operation once, without the coverage and stateful phases' many cases.
SMOKE_PHASES = "examples,fuzzing"


def served(url: str, headers: dict[str, str]) -> Counter[tuple[str, str]]:
    """``verifier_requests_total`` as {(route, status): count}, read from the service."""
    r = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    r.raise_for_status()
    return Counter(
        {
            (s.labels["endpoint"], s.labels["status"]): int(s.value)
            for s in samples(r.text, "verifier_requests_total")
        }
    )


def by_route(delta: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    routes: dict[str, dict[str, int]] = {}
    for (route, status), n in sorted(delta.items()):
        if n > 0:
            routes.setdefault(route, {})[status] = n
    return routes


def fuzz(url: str, args: argparse.Namespace, phases: str, rec: bench.Record) -> int:
    """Run schemathesis against ``url``, print the summary, fill and write the record."""
    st = Path(sys.executable).with_name("st")
    cmd = [
        str(st),
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--exclude-checks",
        EXCLUDED,
        "--phases",
        phases,
        "-n",
        str(args.examples),
        "--max-response-time",
        str(args.max_response_time),
        "--workers",
        args.workers,
        "--continue-on-failure",
        "--report",
        "json",
        "--report-json-path",
        str(args.report),
        "--no-color",
    ]
    if args.max_time:
        cmd += ["--max-time", str(args.max_time)]
    key = os.environ.get("VERIFIER_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if key:
        cmd[5:5] = ["-H", f"Authorization: Bearer {key}"]
    args.report.unlink(missing_ok=True)  # a report left by an earlier run is not this run's
    before = served(url, headers)
    run = subprocess.run(cmd, check=False, capture_output=True, text=True)
    routes = by_route(served(url, headers) - before)
    paths = httpx.get(f"{url}/openapi.json", headers=headers, timeout=30).json()["paths"]
    if not args.report.exists():
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        return 2
    report = json.loads(args.report.read_text())
    cases = report["test_cases"]
    summary = {
        "operations_tested": report["operations"]["tested"],
        "examples_per_operation": args.examples,
        "test_cases": cases["generated"],
        "with_failures": cases["with_failures"],
        "errored": cases["errored"],
        "seconds": round(report["running_time"], 1),
        "stop_reason": report["stop_reason"],
        "failures": {f"{f['code']} {f['title']}": f["count"] for f in report["failures"]},
        "errors": {e["title"]: e["count"] for e in report["errors"]},
        "phases": {name: p["status"] for name, p in report["phases"].items()},
        # Served by the service during the run (its own counter), per route and status.
        "served": routes,
        "served_5xx": sum(n for r in routes.values() for st, n in r.items() if st >= "500"),
        "paths_under_examples": sorted(
            p for p in paths if sum(routes.get(p, {}).values()) < args.examples
        ),
    }
    print(json.dumps(summary, indent=2))  # noqa: T201
    rec.config["url"] = url
    rec.results.update(summary)
    bench.write(rec, args)
    ok = not report["failures"] and not cases["errored"] and not summary["served_5xx"]
    return 0 if ok else 1


def main() -> int:
    ap = bench.parser(NAME, __doc__, smoke={"examples": 1})
    ap.add_argument("--url", help="A running service; none: start one here.")
    ap.add_argument("--examples", type=int, default=200, help="examples per operation")
    ap.add_argument("--max-response-time", type=float, default=DEFAULT_MAX_RESPONSE_S)
    ap.add_argument("--workers", default="2")
    ap.add_argument("--max-time", type=int, help="stop after this many seconds (0: no limit)")
    ap.add_argument(
        "--report", type=Path, help="JSON report (default <out>/schema_fuzz.report.json)"
    )
    # no --max-time in the smoke: with one, schemathesis repeats the fuzzing until it is spent
    args = ap.parse()
    phases = SMOKE_PHASES if args.smoke else PHASES
    result = bench.result_path(NAME, args)
    args.report = args.report or result.with_suffix(".report.json")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "examples": args.examples,
        "phases": phases,
        "max_response_time_s": args.max_response_time,
        "workers": args.workers,
        "max_time_s": args.max_time,
        "report": str(args.report),
    }
    rec = bench.record(NAME, args, config=config)
    with harness.service(args.url, result.with_suffix(".server.log")) as (url, _pid):
        return fuzz(url, args, phases, rec)


if __name__ == "__main__":
    raise SystemExit(main())
