"""Remote-engine throughput: direct judgments sent straight to a vLLM OpenAI server vs the same
judgments through this service with ``engine.backend=openai`` on that server.

One vLLM OpenAI server (built with the in-process engine's settings: ``openai_server_args``)
serves both modes; its prefix cache is reset before every phase (``/reset_prefix_cache``, dev
mode), and each round runs both phases, the first of them rotating from round to round
(``bench.rotated``), so a drift of the machine's speed hits both. Workload: the first 64
questions x 4 solutions of gsm8k/example_model_solutions.jsonl = 256 direct judgments, 32
concurrent clients; the direct mode gets its prompt ids ready before the clock starts, the
service tokenizes inside the run. Written to out/bench/remote_engine.json.

    verifier bench remote-engine [--runs 2] [--questions 64] [--concurrency 32]
    verifier bench remote-engine --vllm-url URL --service-url URL   # servers already up
    verifier bench remote-engine --smoke     # 1 round of 4 judgments

Servers already running must be the vLLM OpenAI server started with VLLM_SERVER_DEV_MODE=1 and
the service's arguments (``openai_server_args``, ``--served-model-name judge``) and a service
with ``engine.backend=openai`` on it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator
from typing import Final

import httpx

from loadtests import bench, harness, phases
from loadtests.workload import Pair, load_pairs, pretokenize
from service.config import Settings
from service.engine.models import resolve_model

NAME: Final = "remote_engine"
ARMS: Final = ("direct", "service")
SMOKE: Final = {"runs": 1, "questions": 1, "concurrency": 4, "warm_questions": 1}


@contextlib.contextmanager
def servers(args: argparse.Namespace, settings: Settings, model: str) -> Iterator[tuple[str, str]]:
    """The URLs given, or a vLLM OpenAI server (dev mode) and a service on it started here."""
    if args.vllm_url and args.service_url:
        yield args.vllm_url.rstrip("/"), args.service_url.rstrip("/")
        return
    with phases.vllm_server(settings, model, args.out / "remote_vllm.log", dev_mode=True) as (v, _):
        env = {"VERIFIER_ENGINE__BACKEND": "openai", "VERIFIER_ENGINE__OPENAI__BASE_URL": v}
        with harness.service(None, args.out / "remote_service.log", env) as (ours, _):
            yield v, ours


async def rounds(
    vllm_url: str,
    ours_url: str,
    ids: phases.Ids,
    labels: list[int],
    work: list[Pair],
    warm: list[Pair],
    args: argparse.Namespace,
) -> dict[str, list[float]]:
    """Warm both paths, then per round each phase on a reset prefix cache, in rotated order."""
    conc = args.concurrency
    phase = {
        "direct": lambda pairs: phases.vllm_phase(vllm_url, ids, labels, pairs, conc),
        "service": lambda pairs: phases.service_phase(ours_url, pairs, conc),
    }
    for arm in ARMS:
        await phase[arm](warm)
    rates: dict[str, list[float]] = {arm: [] for arm in ARMS}
    async with httpx.AsyncClient() as c:
        for r, order in enumerate(bench.rotated(ARMS, args.runs)):
            for arm in order:
                (await c.post(vllm_url + "/reset_prefix_cache")).raise_for_status()
                rates[arm].append(await phase[arm](work))
            direct, ours = rates["direct"][-1], rates["service"][-1]
            print(
                f"round {r + 1}: direct {direct:.2f}/s, service {ours:.2f}/s, "
                f"ratio {ours / direct:.3f}",
                flush=True,
            )
    return rates


async def main() -> None:
    ap = bench.parser(NAME, __doc__, runs=2, smoke=SMOKE)
    ap.add_argument("--questions", type=int, default=64, help="questions (x4 solutions)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warm-questions", type=int, default=2, help="warm-up questions (x4)")
    ap.add_argument("--vllm-url", help="an already running vLLM OpenAI server (dev mode)")
    ap.add_argument("--service-url", help="an already running service on it")
    args = ap.parse()

    settings = Settings()
    model = resolve_model(settings)
    work = load_pairs(settings, args.questions)
    warm = load_pairs(settings, args.warm_questions, offset=1000)
    tok = phases.tokenizer(model)
    ids, labels = pretokenize(tok, work + warm), phases.label_ids(tok)
    rec = bench.record(
        NAME,
        args,
        config={
            "judgments": len(work),
            "concurrency": args.concurrency,
            "runs": args.runs,
            "orders": bench.rotated(ARMS, args.runs),
            "warm_judgments": len(warm),
            "servers_given": bool(args.vllm_url and args.service_url),
        },
    )
    with servers(args, settings, model) as (vllm_url, ours_url):
        rates = await rounds(vllm_url, ours_url, ids, labels, work, warm, args)

    direct, served = rates["direct"], rates["service"]
    ratios = [o / d for o, d in zip(served, direct, strict=True)]
    print(
        f"\n{len(work)} direct judgments, {args.concurrency} concurrent clients, cold prefix cache per phase"
    )
    print(
        f"  vLLM OpenAI server, direct        {bench.median(direct):7.2f} judgments/s (median of {len(direct)})"
    )
    print(
        f"  service, engine.backend=openai    {bench.median(served):7.2f} judgments/s (median of {len(served)})"
    )
    print(
        f"  service / direct = {bench.median(ratios):.3f} median, per round {[round(r, 3) for r in ratios]}   (target >= 0.95)"
    )
    rec.results = {"direct": direct, "service": served, "ratios": ratios}
    bench.write(rec, args)


if __name__ == "__main__":
    asyncio.run(main())
