"""MCQ throughput: /v1/mcq/answer vs the raw engine reading the same letter logprobs; the batch
form vs one item per request; PriDe's cost per item vs one pass. One run, ratios printed.

Workload: the first 256 four-option items of arc/ARC-Challenge-Dev.jsonl (identical prompt ids
in every mode), 32 concurrent clients, a fresh engine per mode with the same settings (a smoke
run shares one server among the service's modes: the mechanics, not the figures).

    verifier bench mcq-throughput
    verifier bench mcq-throughput --items 64 --modes ours,batch   # quicker
    verifier bench mcq-throughput --smoke    # 4 items, the raw engine and one server
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from loadtests import bench
from loadtests.harness import service
from loadtests.workload import drive, raw_engine
from service.config import Settings
from service.engine.models import resolve_model
from service.engine.vllm_engine import configure_vllm_env
from service.evals.data import GoldItem, read_arc
from service.scoring import debias, prompts

NAME = "mcq_throughput"
SERVICE_MODES = ("ours", "batch", "pride")
Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def run_raw(
    settings: Settings, model: str, items: list[GoldItem], warm: list[GoldItem], conc: int
) -> float:
    from vllm import SamplingParams
    from vllm.inputs import tokens_input
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
        it.id: prompts.mcq_prompt(tok, it.question, it.options).prompt_ids for it in [*items, *warm]
    }
    counter = iter(range(10**9))

    async def one(item: GoldItem) -> None:
        out = None
        gen = llm.generate(tokens_input(ids[item.id]), params, f"m{next(counter)}")
        async for item_out in gen:
            out = item_out
        assert out is not None
        slot = out.outputs[0].logprobs[0]
        debias.softmax([lse([slot[i].logprob for i in v]) for v in letters])

    try:
        await drive(warm, conc, one)  # warm-up on items outside the workload
        return await drive(items, conc, one)
    finally:
        llm.shutdown()


def lse(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def item_body(it: GoldItem) -> dict[str, Any]:
    return {"question": it.question, "options": it.options}


async def run_service(
    items: list[GoldItem], warm: list[GoldItem], args: Any, modes: list[str]
) -> dict[str, Any]:
    """Each mode on a fresh server, so that no mode finds the prompts in vLLM's prefix cache;
    a smoke run saves the boots and runs them all on one."""
    rates: dict[str, Any] = {}
    conc = args.concurrency
    for group in [modes] if args.smoke and modes else [[m] for m in modes]:
        log = args.out / f"mcq_service_{'_'.join(group)}.log"
        with service(None, log) as (url, _):
            limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
            async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:

                async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
                    r = await client.post(path, json=body)
                    r.raise_for_status()
                    return dict(r.json())

                async def one(it: GoldItem) -> None:
                    await post("/v1/mcq/answer", item_body(it))

                await drive(warm, conc, one)  # warm-up on items outside the workload
                for mode in group:
                    if mode == "ours":
                        rates[mode] = await drive(items, conc, one)
                    elif mode == "batch":
                        rates[mode] = await batch_rate(post, items, conc, args.batch)
                    else:
                        rates[mode] = await pride_cost(post, items)
    return rates


async def batch_rate(post: Post, items: list[GoldItem], conc: int, batch: int) -> float:
    chunks = [items[i : i + batch] for i in range(0, len(items), batch)]

    async def many(chunk: list[GoldItem]) -> None:
        await post("/v1/mcq/answer/batch", {"items": [item_body(i) for i in chunk]})

    per_request = await drive(chunks, max(1, conc // batch), many)
    return per_request * len(items) / len(chunks)


async def pride_cost(post: Post, items: list[GoldItem]) -> dict[str, Any]:
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


def report(rates: dict[str, Any], n_items: int, conc: int) -> dict[str, float]:
    """Print the rates and ratios; the ratios, for the record."""
    ratios: dict[str, float] = {}
    print(f"\n{n_items} ARC-Dev items (K=4), {conc} concurrent clients")
    for name in ("raw", "ours", "batch"):
        if name in rates:
            print(f"  {name:<6} {rates[name]:8.2f} items/s")
    if "ours" in rates and "raw" in rates:
        ratios["ours_over_raw"] = rates["ours"] / rates["raw"]
        print(f"  ours / raw      = {ratios['ours_over_raw']:.3f}   (target >= 0.95)")
    if "ours" in rates and "batch" in rates:
        ratios["batch_over_single"] = rates["batch"] / rates["ours"]
        print(f"  batch / single  = {ratios['batch_over_single']:.3f}")
    if "pride" in rates:
        p = rates["pride"]
        print(
            f"  PriDe forward passes per item = {p['passes_per_item']:.3f} "
            f"(target <= {p['target']:.2f}; {p['calibration_items']} calibration items)"
        )
    return ratios


async def main() -> None:
    ap = bench.parser(NAME, __doc__, smoke={"items": 4, "concurrency": 2, "batch": 2})
    ap.add_argument("--items", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16, help="items per batch request")
    ap.add_argument("--modes", default="raw,ours,batch,pride")
    args = ap.parse()
    settings = Settings()
    model = resolve_model(settings)
    configure_vllm_env(settings, "cpu")
    arc, _ = read_arc(settings.data_dir / "arc" / "ARC-Challenge-Dev.jsonl")
    items = [it for it in arc if it.k == 4][: args.items]
    modes = args.modes.split(",")
    warm = [it for it in arc if it.k == 4 and it not in items]  # none of the measured ones
    if args.smoke:
        warm = warm[:2]
    rec = bench.record(
        NAME,
        args,
        config={
            "items": len(items),
            "warmup_items": len(warm),
            "concurrency": args.concurrency,
            "batch": args.batch,
            "modes": modes,
            "model": model,
        },
    )
    rates: dict[str, Any] = {}
    if "raw" in modes:
        rates["raw"] = await run_raw(settings, model, items, warm, args.concurrency)
    rates |= await run_service(items, warm, args, [m for m in SERVICE_MODES if m in modes])
    ratios = report(rates, len(items), args.concurrency)
    rec.results = {**rates, **ratios}
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
