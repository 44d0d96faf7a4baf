"""MCQ throughput: /v1/mcq/answer vs the raw engine reading the same letter logprobs; the batch
form vs one item per request; PriDe's cost per item vs one pass. One run, ratios printed.

Workload: the first 256 four-option items of arc/ARC-Challenge-Dev.jsonl (identical prompt ids
in every mode), 32 concurrent clients, a fresh engine per mode with the same settings.

    python loadtests/mcq_throughput.py
    python loadtests/mcq_throughput.py --items 64 --modes ours,batch   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier
from loadtests.workload import drive, raw_engine
from service.config import Settings
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env
from service.evals.data import GoldItem, read_arc
from service.scoring import debias, prompts


async def run_raw(settings: Settings, model: str, items: list[GoldItem], conc: int) -> float:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    llm = raw_engine(settings, model)
    tok = llm.get_tokenizer()
    letters = prompts.letter_variant_ids(tok, 4)
    flat = [i for ids in letters for i in ids]
    params = SamplingParams(
        max_tokens=1,
        temperature=0,
        logprob_token_ids=flat,
        output_kind=RequestOutputKind.FINAL_ONLY,
        detokenize=False,
    )
    ids = {
        it.id: prompts.mcq_prompt(tok, it.question, it.options).prompt_ids for it in [*items, *WARM]
    }
    counter = iter(range(10**9))

    async def one(item: GoldItem) -> None:
        out = None
        gen = llm.generate(TokensPrompt(prompt_token_ids=ids[item.id]), params, f"m{next(counter)}")
        async for item_out in gen:
            out = item_out
        assert out is not None
        slot = out.outputs[0].logprobs[0]
        debias.softmax([lse([slot[i].logprob for i in v]) for v in letters])

    try:
        await drive(WARM, conc, one)  # warm-up on items outside the workload
        return await drive(items, conc, one)
    finally:
        llm.shutdown()


WARM: list[GoldItem] = []  # warm-up items, none of the measured ones


def lse(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def item_body(it: GoldItem) -> dict[str, Any]:
    return {"question": it.question, "options": it.options}


async def run_service(
    items: list[GoldItem], conc: int, port: int, out: Path, mode: str, batch: int
) -> Any:
    """One mode on a fresh server, so that no mode finds the prompts in vLLM's prefix cache."""
    env = {**os.environ, "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    url = f"http://127.0.0.1:{port}"
    log = out / f"mcq_service_{mode}.log"
    with ServerProcess(verifier("serve"), env=env, log=log, probe=url + "/ready"):
        limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
        async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:

            async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
                r = await client.post(path, json=body)
                r.raise_for_status()
                return dict(r.json())

            async def one(it: GoldItem) -> None:
                await post("/v1/mcq/answer", item_body(it))

            await drive(WARM, conc, one)  # warm-up on items outside the workload
            if mode == "ours":
                return await drive(items, conc, one)
            if mode == "batch":
                chunks = [items[i : i + batch] for i in range(0, len(items), batch)]

                async def many(chunk: list[GoldItem]) -> None:
                    await post("/v1/mcq/answer/batch", {"items": [item_body(i) for i in chunk]})

                per_request = await drive(chunks, max(1, conc // batch), many)
                return per_request * len(items) / len(chunks)
            return await pride_cost(post, items, conc)


async def pride_cost(
    post: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    items: list[GoldItem],
    conc: int,
) -> dict[str, Any]:
    """Forward passes per scored item: 5% calibration (K passes each) + one pass per item."""
    n_cal = max(1, round(0.05 * len(items)))
    calib, scored = items[:n_cal], items[n_cal:]
    fit = await post(
        "/v1/mcq/calibrations", {"method": "pride", "items": [item_body(i) for i in calib]}
    )
    passes = fit["cost"]["forward_passes"]
    chunks = [scored[i : i + 16] for i in range(0, len(scored), 16)]
    answers = await asyncio.gather(
        *(
            post(
                "/v1/mcq/answer/batch",
                {
                    "items": [item_body(i) for i in chunk],
                    "debias": "pride",
                    "calibration_id": fit["id"],
                },
            )
            for chunk in chunks
        )
    )
    passes += sum(a["usage"]["engine_calls"] for a in answers)
    k = 4
    return {
        "calibration_items": n_cal,
        "scored_items": len(scored),
        "passes_per_item": passes / len(items),
        "target": 1 + 0.05 * (k - 1) + 0.01,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16, help="items per batch request")
    ap.add_argument("--modes", default="raw,ours,batch,pride")
    ap.add_argument("--port", type=int, default=8761)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = Settings()
    model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    arc, _ = read_arc(settings.data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    items = [it for it in arc if it.k == 4][: args.items]
    modes = args.modes.split(",")
    WARM.extend(it for it in arc if it.k == 4 and it not in items)
    rates: dict[str, Any] = {}
    if "raw" in modes:
        rates["raw"] = await run_raw(settings, model, items, args.concurrency)
    for mode in ("ours", "batch", "pride"):
        if mode in modes:
            rates[mode] = await run_service(
                items, args.concurrency, args.port, args.out, mode, args.batch
            )
    print(f"\n{len(items)} ARC-Dev items (K=4), {args.concurrency} concurrent clients")
    for name in ("raw", "ours", "batch"):
        if name in rates:
            print(f"  {name:<6} {rates[name]:8.2f} items/s")
    if "ours" in rates and "raw" in rates:
        print(f"  ours / raw      = {rates['ours'] / rates['raw']:.3f}   (target >= 0.95)")
    if "ours" in rates and "batch" in rates:
        print(f"  batch / single  = {rates['batch'] / rates['ours']:.3f}")
    if "pride" in rates:
        p = rates["pride"]
        print(
            f"  PriDe forward passes per item = {p['passes_per_item']:.3f} "
            f"(target <= {p['target']:.2f}; {p['calibration_items']} calibration items)"
        )
    (args.out / "mcq_throughput.json").write_text(json.dumps(rates, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
