"""Remote-engine throughput: direct judgments sent straight to a vLLM OpenAI server vs the same
judgments through this service with ``engine.backend=openai`` on that server.

One vLLM OpenAI server (built with the in-process engine's settings: ``openai_server_args``)
serves both modes; its prefix cache is reset before every phase (``/reset_prefix_cache``, dev
mode), and the phases alternate (direct, service, direct, service, ...) so a drift of the
machine's speed hits both. Workload: the first 64 questions x 4 solutions of
gsm8k/example_model_solutions.jsonl = 256 direct judgments, 32 concurrent clients; the direct
mode gets its prompt ids ready before the clock starts, the service tokenizes inside the run.

    python loadtests/remote_engine.py [--rounds 2] [--questions 64] [--concurrency 32]
    python loadtests/remote_engine.py --vllm-url URL --service-url URL   # servers already up

Servers already running must be the vLLM OpenAI server started with VLLM_SERVER_DEV_MODE=1 and
the service's arguments (``openai_server_args``, ``--served-model-name judge``) and a service
with ``engine.backend=openai`` on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
from pathlib import Path

import httpx

from loadtests.harness import ROOT, ServerProcess, verifier, vllm_openai_server
from loadtests.workload import Pair, drive, load_pairs, pretokenize
from service.config import Settings
from service.engine.models import resolve_model

NAME = "judge"


async def direct_phase(
    url: str, ids: dict[Pair, list[int]], labels: list[int], work: list[Pair], conc: int
) -> float:
    limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(pair: Pair) -> float:
            body = {
                "model": NAME,
                "prompt": ids[pair],
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": len(labels),
                "logprob_token_ids": labels,
                "return_tokens_as_token_ids": True,
            }
            r = await client.post("/v1/completions", json=body)
            r.raise_for_status()
            top = r.json()["choices"][0]["logprobs"]["top_logprobs"][0]
            return float(top[f"token_id:{labels[0]}"] - top[f"token_id:{labels[1]}"])

        return await drive(work, conc, one)


async def service_phase(url: str, work: list[Pair], conc: int) -> float:
    limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(pair: Pair) -> float:
            body = {"question": pair[0], "response": pair[1], "cache": False}
            r = await client.post("/v1/judge/outcome", json=body)
            r.raise_for_status()
            return float(r.json()["logit"])

        return await drive(work, conc, one)


async def rounds(
    vllm_url: str,
    ours_url: str,
    ids: dict[Pair, list[int]],
    labels: list[int],
    work: list[Pair],
    warm: list[Pair],
    args: argparse.Namespace,
) -> tuple[list[float], list[float]]:
    """Warm both paths, then alternate direct and service phases on a reset prefix cache."""
    direct: list[float] = []
    ours: list[float] = []
    await direct_phase(vllm_url, ids, labels, warm, args.concurrency)
    await service_phase(ours_url, warm, args.concurrency)
    async with httpx.AsyncClient() as c:
        for r in range(args.rounds):
            (await c.post(vllm_url + "/reset_prefix_cache")).raise_for_status()
            direct.append(await direct_phase(vllm_url, ids, labels, work, args.concurrency))
            (await c.post(vllm_url + "/reset_prefix_cache")).raise_for_status()
            ours.append(await service_phase(ours_url, work, args.concurrency))
            print(
                f"round {r + 1}: direct {direct[-1]:.2f}/s, service {ours[-1]:.2f}/s, "
                f"ratio {ours[-1] / direct[-1]:.3f}",
                flush=True,
            )
    return direct, ours


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--questions", type=int, default=64, help="questions (x4 solutions)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2, help="direct/service pairs of phases")
    ap.add_argument("--port", type=int, default=8741)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    ap.add_argument("--vllm-url", help="an already running vLLM OpenAI server (dev mode)")
    ap.add_argument("--service-url", help="an already running service on it")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    settings = Settings()
    model = resolve_model(settings)
    work = load_pairs(settings, args.questions)
    warm = load_pairs(settings, 2, offset=1000)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    ids = pretokenize(tok, work + warm)
    labels = [
        tok.encode("1", add_special_tokens=False)[0],
        tok.encode("0", add_special_tokens=False)[0],
    ]

    vllm_url = f"http://127.0.0.1:{args.port}"
    vllm = vllm_openai_server(
        settings,
        model,
        port=args.port,
        log=args.out / "remote_vllm.log",
        served_name=NAME,
        extra_args=["--uvicorn-log-level", "warning"],
        extra_env={"VLLM_SERVER_DEV_MODE": "1"},  # for /reset_prefix_cache between phases
    )
    ours_url = f"http://127.0.0.1:{args.port + 1}"
    ours_env = {
        **os.environ,
        "VERIFIER_PORT": str(args.port + 1),
        "VERIFIER_LOG_LEVEL": "warning",
        "VERIFIER_ENGINE__BACKEND": "openai",
        "VERIFIER_ENGINE__OPENAI__BASE_URL": vllm_url,
    }
    ours = ServerProcess(
        verifier("serve"),
        env=ours_env,
        log=args.out / "remote_service.log",
        probe=ours_url + "/ready",
    )
    if args.vllm_url and args.service_url:
        direct, served = await rounds(
            args.vllm_url, args.service_url, ids, labels, work, warm, args
        )
    else:
        with vllm, ours:
            direct, served = await rounds(vllm_url, ours_url, ids, labels, work, warm, args)

    ratios = [o / d for o, d in zip(served, direct, strict=True)]
    print(
        f"\n{len(work)} direct judgments, {args.concurrency} concurrent clients, cold prefix cache per phase"
    )
    print(
        f"  vLLM OpenAI server, direct        {statistics.median(direct):7.2f} judgments/s (median of {len(direct)})"
    )
    print(
        f"  service, engine.backend=openai    {statistics.median(served):7.2f} judgments/s (median of {len(served)})"
    )
    print(
        f"  service / direct = {statistics.median(ratios):.3f} median, per round {[round(r, 3) for r in ratios]}   (target >= 0.95)"
    )
    result = {"direct": direct, "service": served, "ratios": ratios}
    (args.out / "remote_engine.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
