"""Score agreement: the same requests to a service on the in-process engine and to one with
``engine.backend=openai`` (on a vLLM OpenAI server built with the same engine arguments).

    python loadtests/remote_agreement.py --local http://127.0.0.1:8000 --remote http://127.0.0.1:8002

Workload: GSM8K question/solution pairs (gsm8k/example_model_solutions.jsonl): outcome in direct
mode, process in direct and single-pass mode, and rerank (fused) of each question's 4
solutions; every judgment scored afresh (``cache: false``). Prints the largest and mean
|delta logit| per endpoint (rerank: logit of the relevance score).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
from typing import Any

import httpx

from loadtests.workload import load_pairs
from service.config import Settings


def logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


async def both(
    local: httpx.AsyncClient, remote: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    body = {**body, "cache": False}
    a, b = await asyncio.gather(local.post(path, json=body), remote.post(path, json=body))
    a.raise_for_status()
    b.raise_for_status()
    return a.json(), b.json()


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--local", required=True, help="service on the in-process engine")
    ap.add_argument("--remote", required=True, help="service with engine.backend=openai")
    ap.add_argument("--questions", type=int, default=8, help="questions (x4 solutions)")
    args = ap.parse_args()
    pairs = load_pairs(Settings(), args.questions)
    deltas: dict[str, list[float]] = {
        "outcome": [],
        "process direct": [],
        "process single_pass": [],
        "rerank": [],
    }
    limits = httpx.Limits(max_connections=8)
    async with (
        httpx.AsyncClient(base_url=args.local, timeout=600, limits=limits) as local,
        httpx.AsyncClient(base_url=args.remote, timeout=600, limits=limits) as remote,
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
    print(f"{len(pairs)} pairs, |delta logit| in-process vs remote engine")
    for name, values in deltas.items():
        print(
            f"  {name:<22} n={len(values):4d}  max {max(values):.4f}  mean {statistics.mean(values):.4f}"
        )
    print(json.dumps({k: max(v) for k, v in deltas.items()}))


if __name__ == "__main__":
    asyncio.run(main())
