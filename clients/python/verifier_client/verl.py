"""A ``compute_score`` for verl's custom reward function.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)``
and takes a float or a dict with ``"score"``; async functions are awaited (verl's documented
way to reach a remote verifier). Configure it with

    reward.custom_reward_function.path=<site-packages>/verifier_client/verl.py
    reward.custom_reward_function.name=compute_score
    +reward.reward_kwargs.base_url=http://verifier:8000

The question is read from ``extra_info["question"]`` (verl's GSM8K/MATH preprocessing puts it
there), else ``extra_info["prompt"]``. ``ground_truth`` is the reference: the answer is checked
by rule where the rule decides (no engine call), by the model otherwise
(``+reward.reward_kwargs.verifier=model`` makes the model judge every sample with the reference
in its prompt; ``use_reference=False`` ignores it).

verl calls ``compute_score`` once per sample, so the connections are kept, one client per
event loop and service. ``await aclose()`` closes the running loop's clients; call it before
that loop ends (a loop that ends first leaves their sockets to the garbage collector).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from verifier_client._client import AsyncClient
from verifier_client._rl import (
    Method,
    Mode,
    OnTimeout,
    RewardTimeout,
    Verifier,
    judge_async,
    on_deadline,
    question_of,
    reference_of,
)

__all__ = ["RewardTimeout", "aclose", "compute_score"]

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
    verifier: Verifier | None = None,
    use_reference: bool = True,
    timeout_s: float | None = None,
    on_timeout: OnTimeout = "none",
    **judge_options: Any,
) -> dict[str, Any]:
    """``{"score", "judged", "decided_by_rule", "rule_equivalent", "model_score"}``.

    verl needs a number for every sample: a sample the service refused, or one past
    ``timeout_s`` with ``on_timeout`` "none" or "zero", scores 0 with ``judged`` 0;
    ``on_timeout="raise"`` raises ``RewardTimeout``. verl logs the other keys per sample.
    """
    question = _question(extra_info)
    reference = reference_of(ground_truth) if use_reference else None
    if verifier is not None:
        judge_options["verifier"] = verifier
    client = _client(base_url, api_key)
    call = judge_async(client, method, mode, question, solution_str, reference, **judge_options)
    late = False
    try:
        judged = await asyncio.wait_for(call, timeout_s)
    except TimeoutError:
        late = True
        judged = on_deadline(on_timeout, timeout_s)
    return {
        "score": 0.0 if judged.score is None else judged.score,
        "judged": float(judged.score is not None and not late),
        **judged.logs(),
    }
