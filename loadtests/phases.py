"""Judge phases several benchmarks share: the same direct judgments sent through this service
(``/v1/judge/outcome``), through vLLM's own OpenAI server (``/v1/completions`` on prompt ids
made before the clock starts) and through a bare in-process engine, each server on a free port.

A phase runs its warm-up pairs, then times its pairs with closed-loop clients (judgments/s):

    >>> with harness.service(None, out / "service.log") as (url, _):  # doctest: +SKIP
    ...     rate = await service_phase(url, pairs, concurrency=32, warm=warm)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from loadtests.harness import free_port, vllm_openai_server
from loadtests.workload import Pair, drive, pretokenize, raw_engine
from service.config import Settings

# The verdict tokens vLLM is asked for: logprob("1") - logprob("0") is the judgment's logit.
LABELS: Final = ("1", "0")
SERVED_NAME: Final = "judge"
TIMEOUT_S: Final = 600.0

Ids = dict[Pair, list[int]]


def tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def label_ids(tok: Any) -> list[int]:
    return [tok.encode(label, add_special_tokens=False)[0] for label in LABELS]


# --- servers -----------------------------------------------------------------------------------


@contextlib.contextmanager
def vllm_server(
    settings: Settings, model: str, log: Path, *, dev_mode: bool = False
) -> Iterator[tuple[str, int]]:
    """vLLM's OpenAI server built as the in-process engine is, on a free port: its URL and the
    pid of its front (HTTP) process; ``dev_mode`` opens its /reset_prefix_cache."""
    port = free_port()
    with vllm_openai_server(
        settings,
        model,
        port=port,
        log=log,
        served_name=SERVED_NAME,
        extra_args=["--uvicorn-log-level", "warning"],
        extra_env={"VLLM_SERVER_DEV_MODE": "1"} if dev_mode else None,
    ) as proc:
        yield f"http://127.0.0.1:{port}", proc.pid


@contextlib.asynccontextmanager
async def client(
    url: str, concurrency: int = 1, timeout_s: float = TIMEOUT_S
) -> AsyncIterator[httpx.AsyncClient]:
    """A client that keeps a connection per concurrent caller (and as many spare)."""
    n = 2 * concurrency
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as c:
        yield c


# --- one judgment ------------------------------------------------------------------------------


async def judge(c: httpx.AsyncClient, pair: Pair, **extra: Any) -> dict[str, Any]:
    """One judgment through the service, scored afresh (``cache: false``): its response."""
    body = {"question": pair[0], "response": pair[1], "cache": False, **extra}
    r = await c.post("/v1/judge/outcome", json=body)
    r.raise_for_status()
    return dict(r.json())


async def completion(c: httpx.AsyncClient, body: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's first choice for a greedy completion of ``body``."""
    r = await c.post("/v1/completions", json={"model": SERVED_NAME, "temperature": 0, **body})
    r.raise_for_status()
    return dict(r.json()["choices"][0])


async def verdict(c: httpx.AsyncClient, prompt: Sequence[int], labels: Sequence[int]) -> float:
    """The verdict vLLM's server reads after ``prompt``: one token, the labels' logprobs."""
    choice = await completion(
        c,
        {
            "prompt": list(prompt),
            "max_tokens": 1,
            "logprobs": len(labels),
            "logprob_token_ids": list(labels),
            "return_tokens_as_token_ids": True,
        },
    )
    top = choice["logprobs"]["top_logprobs"][0]
    return float(top[f"token_id:{labels[0]}"] - top[f"token_id:{labels[1]}"])


# --- phases: warm-up, then judgments/s ---------------------------------------------------------


async def timed(
    pairs: list[Pair],
    concurrency: int,
    one: Callable[[Pair], Awaitable[Any]],
    warm: Sequence[Pair] = (),
) -> float:
    """``warm`` through ``one`` untimed, then ``pairs``: judgments/s."""
    if warm:
        await drive(list(warm), concurrency, one)
    return await drive(pairs, concurrency, one)


async def service_phase(
    url: str, pairs: list[Pair], concurrency: int, warm: Sequence[Pair] = ()
) -> float:
    """``pairs`` through the service (which tokenizes inside the timed run)."""
    async with client(url, concurrency) as c:
        return await timed(pairs, concurrency, lambda p: judge(c, p), warm)


async def vllm_phase(
    url: str,
    ids: Ids,
    labels: list[int],
    pairs: list[Pair],
    concurrency: int,
    warm: Sequence[Pair] = (),
) -> float:
    """``pairs`` through vLLM's OpenAI server, as prompt ids made before (``pretokenize``)."""
    async with client(url, concurrency) as c:
        return await timed(pairs, concurrency, lambda p: verdict(c, ids[p], labels), warm)


@contextlib.contextmanager
def raw_judge(
    settings: Settings, model: str, pairs: Sequence[Pair]
) -> Iterator[Callable[[Pair], Awaitable[float]]]:
    """A bare in-process engine (``raw_engine``), up while the block runs: one judgment of any
    of ``pairs`` (its logit), from prompt ids made here, before any clock starts."""
    from vllm import SamplingParams
    from vllm.inputs import tokens_input
    from vllm.sampling_params import RequestOutputKind

    llm = raw_engine(settings, model)
    tok = llm.get_tokenizer()
    labels = label_ids(tok)
    params = SamplingParams(
        max_tokens=1,
        temperature=0,
        logprob_token_ids=labels,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )
    counter = iter(range(10**9))
    ids = pretokenize(tok, list(pairs))

    async def one(pair: Pair) -> float:
        out = None
        gen = llm.generate(tokens_input(ids[pair]), params, f"r{next(counter)}")
        async for item in gen:
            out = item
        assert out is not None
        lp = out.outputs[0].logprobs[0]
        return float(lp[labels[0]].logprob - lp[labels[1]].logprob)

    try:
        yield one
    finally:
        llm.shutdown()
