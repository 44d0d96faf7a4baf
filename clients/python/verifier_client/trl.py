"""A reward function for TRL's GRPOTrainer.

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=...,
**dataset_columns, trainer_state=...)`` and takes ``list[float | None]`` back (None: no reward
for that sample); async reward functions are awaited. Prompts and completions are strings
(standard format) or message lists (conversational format); both are handled.

    from verifier_client.trl import reward_function
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function("http://verifier:8000")], ...)
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verifier_client._client import AsyncClient, Client
from verifier_client._rl import Message, Method, Mode, question_of, score_async, score_sync, text_of

Prompt = str | Sequence[Message]
SyncReward = Callable[..., list[float | None]]
AsyncReward = Callable[..., Awaitable[list[float | None]]]


def reward_function(
    base_url: str,
    *,
    mode: Mode = "direct",
    method: Method = "outcome",
    api_key: str | None = None,
    concurrency: int = 16,
    asynchronous: bool = False,
    client_options: dict[str, Any] | None = None,
    **judge_options: Any,
) -> SyncReward | AsyncReward:
    """A TRL reward function scoring each completion with the verifier: P(correct) in [0, 1].

    ``mode``: direct | reasoning (| single_pass with ``method="process"``); ``method``:
    outcome (one judgment) or process (per step, aggregated). ``judge_options`` go into every
    request (e.g. ``reasoning_tokens=128``). ``asynchronous=True`` returns an async function
    (TRL awaits those concurrently with the other reward functions).
    """
    opts = client_options or {}
    if asynchronous:
        return _async_reward(base_url, mode, method, api_key, concurrency, opts, judge_options)
    client = Client(base_url, api_key=api_key, **opts)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verifier-reward")

    def verifier_reward(
        prompts: Sequence[Prompt], completions: Sequence[Prompt], **_: Any
    ) -> list[float | None]:
        jobs = [
            pool.submit(
                score_sync, client, method, mode, question_of(p), text_of(c), **judge_options
            )
            for p, c in zip(prompts, completions, strict=True)
        ]
        return [job.result() for job in jobs]

    # The connections and threads live as long as the function; they close with it, not at
    # the interpreter's exit.
    weakref.finalize(verifier_reward, client.close)
    weakref.finalize(verifier_reward, pool.shutdown, wait=False)
    return verifier_reward


def _async_reward(
    base_url: str,
    mode: Mode,
    method: Method,
    api_key: str | None,
    concurrency: int,
    opts: dict[str, Any],
    judge_options: dict[str, Any],
) -> AsyncReward:
    async def verifier_reward(
        prompts: Sequence[Prompt], completions: Sequence[Prompt], **_: Any
    ) -> list[float | None]:
        # TRL calls this once per batch, so a client per call costs one connection setup per
        # batch; it is closed before the call returns, whichever loop TRL awaits it on (an
        # httpx.AsyncClient must not outlive or cross its loop).
        async with AsyncClient(base_url, api_key=api_key, **opts) as client:
            return await _score_batch(client, prompts, completions)

    async def _score_batch(
        client: AsyncClient, prompts: Sequence[Prompt], completions: Sequence[Prompt]
    ) -> list[float | None]:
        slots = asyncio.Semaphore(concurrency)

        async def one(prompt: Prompt, completion: Prompt) -> float | None:
            async with slots:
                return await score_async(
                    client, method, mode, question_of(prompt), text_of(completion), **judge_options
                )

        pairs = zip(prompts, completions, strict=True)
        return list(await asyncio.gather(*(one(p, c) for p, c in pairs)))

    return verifier_reward
