"""Score agreement: the same requests to a service on the in-process engine and to one with
``engine.backend=openai`` (on a vLLM OpenAI server built with the same engine arguments).

    verifier bench remote-agreement --url http://127.0.0.1:8000 --remote http://127.0.0.1:8002

Either service is started here when its URL is not given: ``verifier serve`` on the
in-process engine; vLLM's OpenAI server built as that engine is, and a ``verifier serve`` on it.

Workload: GSM8K question/solution pairs (gsm8k/example_model_solutions.jsonl): outcome in direct
mode, process in direct and single-pass mode, and rerank (fused) of each question's 4
solutions; every judgment scored afresh (``cache: false``). Prints the largest and mean
|delta logit| per endpoint (rerank: logit of the relevance score). ``--smoke``: 2 solutions of
1 question.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from loadtests import bench, harness
from loadtests.workload import load_pairs
from service.config import Settings
from service.engine.models import resolve_model

NAME = "remote_agreement"
SERVED_NAME = "remote-judge"
# Smoke: every endpoint on 2 pairs (both engines run on the same cores: each pair costs seconds).
SMOKE_PAIRS = 2


def logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


@contextlib.contextmanager
def remote_service(url: str | None, log: Path, vllm_log: Path) -> Iterator[str]:
    """``url``, or a ``verifier serve`` with ``engine.backend=openai`` on a vLLM OpenAI server,
    both started here until the block ends."""
    if url:
        yield url.rstrip("/")
        return
    settings = Settings()
    vllm_port, port = harness.free_port(), harness.free_port()
    vllm = harness.vllm_openai_server(
        settings,
        resolve_model(settings),
        port=vllm_port,
        log=vllm_log,
        served_name=SERVED_NAME,
    )
    env = {
        **os.environ,
        "VERIFIER_HOST": "127.0.0.1",
        "VERIFIER_PORT": str(port),
        "VERIFIER_LOG_LEVEL": "warning",
        "VERIFIER_ENGINE__BACKEND": "openai",
        "VERIFIER_ENGINE__OPENAI__BASE_URL": f"http://127.0.0.1:{vllm_port}/v1",
    }
    base = f"http://127.0.0.1:{port}"
    print(f"starting vLLM's OpenAI server and a verifier serve on it at {base} (log: {log})")
    serve = harness.ServerProcess(
        harness.verifier("serve"), env=env, log=log, probe=f"{base}/ready"
    )
    with vllm, serve:
        yield base


async def both(
    local: httpx.AsyncClient, remote: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    body = {**body, "cache": False}
    a, b = await asyncio.gather(local.post(path, json=body), remote.post(path, json=body))
    a.raise_for_status()
    b.raise_for_status()
    return a.json(), b.json()


async def measure(
    local_url: str, remote_url: str, pairs: list[tuple[str, str]]
) -> dict[str, list[float]]:
    """|delta logit| per endpoint over ``pairs``."""
    deltas: dict[str, list[float]] = {
        "outcome": [],
        "process direct": [],
        "process single_pass": [],
        "rerank": [],
    }
    limits = httpx.Limits(max_connections=8)
    async with (
        httpx.AsyncClient(base_url=local_url, timeout=600, limits=limits) as local,
        httpx.AsyncClient(base_url=remote_url, timeout=600, limits=limits) as remote,
    ):
        for q, r in pairs:
            a, b = await both(local, remote, "/v1/judge/outcome", {"question": q, "response": r})
            deltas["outcome"].append(abs(a["logit"] - b["logit"]))
            for mode in ("direct", "single_pass"):
                body = {"question": q, "response": r, "mode": mode}
                a, b = await both(local, remote, "/v1/judge/process", body)
                pairs_ = zip(a["step_logits"], b["step_logits"], strict=True)
                deltas[f"process {mode}"].extend(abs(x - y) for x, y in pairs_)
        for i in range(0, len(pairs), 4):
            docs = [r for _, r in pairs[i : i + 4]]
            a, b = await both(
                local, remote, "/v1/rerank", {"query": pairs[i][0], "documents": docs}
            )
            mine = {x["index"]: x["relevance_score"] for x in a["results"]}
            theirs = {x["index"]: x["relevance_score"] for x in b["results"]}
            deltas["rerank"].extend(abs(logit(mine[k]) - logit(theirs[k])) for k in mine)
    return deltas


async def main() -> None:
    ap = bench.parser(NAME, __doc__, smoke={"questions": 1})
    ap.add_argument(
        "--url",
        "--local",
        dest="url",
        help="A service on the in-process engine; none: start one here.",
    )
    ap.add_argument("--remote", help="A service with engine.backend=openai; none: start one here.")
    ap.add_argument("--questions", type=int, default=8, help="questions (x4 solutions)")
    args = ap.parse()
    rec = bench.record(NAME, args, config={"questions": args.questions})
    pairs = load_pairs(Settings(), args.questions)[: SMOKE_PAIRS if args.smoke else None]
    logs = bench.result_path(NAME, args)
    with (
        harness.service(args.url, logs.with_suffix(".server.log")) as (local_url, _pid),
        remote_service(
            args.remote, logs.with_suffix(".remote.log"), logs.with_suffix(".vllm.log")
        ) as remote_url,
    ):
        rec.config.update(local=local_url, remote=remote_url)
        deltas = await measure(local_url, remote_url, pairs)
    print(f"{len(pairs)} pairs, |delta logit| in-process vs remote engine")
    for name, values in deltas.items():
        print(
            f"  {name:<22} n={len(values):4d}  max {max(values):.4f}  mean {statistics.mean(values):.4f}"
        )
    print(json.dumps({k: max(v) for k, v in deltas.items()}))
    rec.results.update(
        pairs=len(pairs),
        max_abs_delta_logit={k: max(v) for k, v in deltas.items()},
        mean_abs_delta_logit={k: statistics.mean(v) for k, v in deltas.items()},
        n={k: len(v) for k, v in deltas.items()},
    )
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
