"""Measure how much direct-judgment logits move between identical calls (bf16 on CPU).

Usage: python loadtests/logit_drift.py --url http://127.0.0.1:8000 [--n 16]
Prints the max |delta logit| for: same request repeated, sequential vs 16 concurrent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import httpx

from service.config import Settings


def pairs(n: int) -> list[tuple[str, str]]:
    path = Settings().data_dir / "gsm8k" / "example_model_solutions.jsonl"
    out: list[tuple[str, str]] = []
    with Path(path).open() as fh:
        for line in fh:
            row = json.loads(line)
            out.append((row["question"], row["175b_verification"]["solution"]))
            if len(out) == n:
                break
    return out


async def judge(client: httpx.AsyncClient, q: str, a: str) -> float:
    r = await client.post("/v1/judge/outcome", json={"question": q, "response": a, "cache": False})
    r.raise_for_status()
    return float(r.json()["logit"])


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    items = pairs(args.n)
    async with httpx.AsyncClient(base_url=args.url, timeout=300) as client:
        worst_repeat = worst_conc = 0.0
        for _ in range(args.rounds):
            seq = [await judge(client, q, a) for q, a in items]
            again = [await judge(client, q, a) for q, a in items]
            conc = await asyncio.gather(*(judge(client, q, a) for q, a in items))
            worst_repeat = max(
                worst_repeat, max(abs(x - y) for x, y in zip(seq, again, strict=True))
            )
            worst_conc = max(worst_conc, max(abs(x - y) for x, y in zip(seq, conc, strict=True)))
    print(f"items={args.n} rounds={args.rounds}")
    print(f"max |dlogit| repeated sequential: {worst_repeat:.4f}")
    print(f"max |dlogit| sequential vs concurrent: {worst_conc:.4f}")


if __name__ == "__main__":
    asyncio.run(main())
