"""A ``compute_score`` for verl's custom reward function.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)``
and takes a float or a dict with ``"score"``; async functions are awaited (verl's documented
way to reach a remote verifier). Configure it with

    reward.custom_reward_function.path=<site-packages>/verifier_client/verl.py
    reward.custom_reward_function.name=compute_score
    +reward.reward_kwargs.base_url=http://verifier:8000

The question is read from ``extra_info["question"]`` (verl's GSM8K/MATH preprocessing puts it
there), else ``extra_info["prompt"]``; ``ground_truth`` is not needed by the judge.

verl calls ``compute_score`` once per sample, so the connections are kept, one client per
event loop and service. ``await aclose()`` closes the running loop's clients; call it before
that loop ends (a loop that ends first leaves their sockets to the garbage collector).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from verifier_client._client import AsyncClient
from verifier_client._rl import Method, Mode, question_of, score_async

DEFAULT_URL = "http://127.0.0.1:8000"
# Keyed by the loop itself, weakly: a new loop that reuses a dead one's id() must not get the
# dead loop's client.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncClient]
] = weakref.WeakKeyDictionary()


def _client(base_url: str, api_key: str | None) -> AsyncClient:
    """One client per event loop and service."""
    mine = _clients.setdefault(asyncio.get_running_loop(), {})
    client = mine.get((base_url, api_key))
    if client is None:
        client = mine[(base_url, api_key)] = AsyncClient(base_url, api_key=api_key)
    return client


async def aclose() -> None:
    """Close the running loop's clients (the next ``compute_score`` opens new ones)."""
    mine = _clients.pop(asyncio.get_running_loop(), {})
    for client in mine.values():
        await client.aclose()


def _question(extra_info: dict[str, Any] | None) -> str:
    info = extra_info or {}
    for key in ("question", "prompt"):
        value = info.get(key)
        if value:
            return question_of(value)
    raise ValueError(
        "verifier_client.verl.compute_score needs the question in extra_info['question'] (or "
        "extra_info['prompt']): add it in the dataset's preprocessing"
    )


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    base_url: str = DEFAULT_URL,
    api_key: str | None = None,
    mode: Mode = "direct",
    method: Method = "outcome",
    **judge_options: Any,
) -> dict[str, Any]:
    """``{"score": P(correct), "judged": 1.0}``; a response the service refused scores 0 with
    ``judged`` 0 (verl needs a number for every sample)."""
    question = _question(extra_info)
    client = _client(base_url, api_key)
    score = await score_async(client, method, mode, question, solution_str, **judge_options)
    return {"score": 0.0 if score is None else score, "judged": float(score is not None)}
