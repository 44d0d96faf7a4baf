"""Reading a /metrics page (benchmarks and tests), with prometheus_client's own parser, never a
hand-made regex; and vLLM's engine counters over a window of a benchmark."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

Scrape = Callable[[], Awaitable[str]]  # a server's /metrics page

# vLLM's own counters, on vLLM's server's /metrics and the service's (it shows its in-process
# engine's): what the engine did in a window, apart from what the clients saw.
ENGINE_COUNTERS: Final = {
    "steps": "vllm:iteration_tokens_total_count",  # one observation per engine step
    "step_tokens": "vllm:iteration_tokens_total_sum",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "cached_prompt_tokens": "vllm:prompt_tokens_cached_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "requests": "vllm:request_success_total",
}
SCRAPE_TIMEOUT_S: Final = 5.0


def samples(text: str, sample: str, **labels: str) -> Iterator[Sample]:
    """Every sample named ``sample`` (e.g. ``verifier_batch_size_count``) whose labels include
    ``labels``."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                yield s


def sample_sum(text: str, sample: str, **labels: str) -> float:
    """The sum of every sample named ``sample`` whose labels include ``labels``; 0 when there
    is none."""
    return sum(s.value for s in samples(text, sample, **labels))


def has_sample(text: str, sample: str, **labels: str) -> bool:
    """Whether the page exposes a sample named ``sample`` with (at least) these labels."""
    return next(samples(text, sample, **labels), None) is not None


def scrape_with(client: httpx.AsyncClient) -> Scrape:
    """The /metrics page of the server ``client`` talks to."""

    async def scrape() -> str:
        r = await client.get("/metrics")
        r.raise_for_status()
        return r.text

    return scrape


def scrape_here() -> Scrape:
    """This process's own registry: an in-process vLLM engine's counters."""
    from prometheus_client import REGISTRY, generate_latest

    async def scrape() -> str:
        return generate_latest(REGISTRY).decode()

    return scrape


class EngineWindow:
    """vLLM's counters at the window's two ends: engine steps/s and what a step held.
    (vLLM's running-requests gauge is not used: under its own server it read 1-2 while every
    step generated for 7-8 requests.)"""

    def __init__(self, scrape: Scrape) -> None:
        self._scrape = scrape
        self._start: dict[str, float] = {}

    async def _counts(self) -> dict[str, float]:
        text = await asyncio.wait_for(self._scrape(), SCRAPE_TIMEOUT_S)
        return {k: sample_sum(text, n) for k, n in ENGINE_COUNTERS.items()}

    async def open(self) -> None:
        self._start = await self._counts()

    async def delta(self) -> dict[str, float]:
        """Each counter's growth since ``open``."""
        end = await self._counts()
        return {k: end[k] - self._start[k] for k in ENGINE_COUNTERS}

    async def close(self, window_s: float) -> dict[str, Any]:
        d = await self.delta()
        steps = max(d["steps"], 1.0)
        return {
            "steps_per_s": d["steps"] / window_s,
            "tokens_per_step": d["step_tokens"] / steps,
            # about the requests decoding in a step: how full the batch was kept
            "generation_tokens_per_step": d["generation_tokens"] / steps,
            "generation_tokens_per_s": d["generation_tokens"] / window_s,
            "computed_prompt_tokens_per_s": (d["prompt_tokens"] - d["cached_prompt_tokens"])
            / window_s,
            "engine_requests_per_s": d["requests"] / window_s,
            "counts": d,
        }
