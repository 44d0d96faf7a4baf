"""What the evaluation harnesses share: the service client they talk through, and helpers.

The harnesses drive a running service over HTTP through the standalone client
(``verifier_client``, shipped in the same distribution) and read its answers as the client's
models (``verifier_client.models``), never the server's; only this package of the server imports
the client, the serving path never does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import httpx
from verifier_client import (
    DEFAULT_TIMEOUT,
    AsyncClient,
    BadRequestError,
    RateLimitError,
    VerifierError,
)
from verifier_client.models import Usage

__all__ = [
    "AsyncClient",
    "BoundedTransport",
    "ProgressFn",
    "gather_with_progress",
    "is_request_error",
    "open_client",
    "sum_usage",
]

ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each finished item."""

_T = TypeVar("_T")


class BoundedTransport(httpx.AsyncBaseTransport):
    """At most ``limit`` requests in flight; a slot is held only while a request runs, not
    while the client backs off between retries."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency must be >= 1, got {limit}")
        self._inner = inner
        self._slots = asyncio.Semaphore(limit)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        async with self._slots:
            response = await self._inner.handle_async_request(request)
            await response.aread()  # the body is part of the request's time in flight
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def open_client(
    url: str,
    concurrency: int,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout_s: float | None = None,
) -> AsyncClient:
    """The service client the harnesses use, with at most ``concurrency`` requests in flight.

    ``timeout_s`` raises the read timeout for a judge slower than the default allows (the
    server's own job deadline, VERIFIER_LIMITS__REQUEST_TIMEOUT_S, must be raised with it).
    """
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    inner = transport or httpx.AsyncHTTPTransport(limits=limits)
    timeout = DEFAULT_TIMEOUT if timeout_s is None else httpx.Timeout(timeout_s, connect=5.0)
    return AsyncClient(url, transport=BoundedTransport(inner, concurrency), timeout=timeout)


def is_request_error(exc: VerifierError) -> bool:
    """A 4xx refusal of this one request (422, 413...), not 429 overloaded: the harness records
    the item as failed and goes on."""
    return isinstance(exc, BadRequestError) and not isinstance(exc, RateLimitError)


def sum_usage(usages: Iterable[Usage]) -> dict[str, int]:
    """Field-wise sum of `Usage` records (tokens, engine calls, cached judgments)."""
    total = Usage()
    for usage in usages:
        for name in Usage.model_fields:
            setattr(total, name, getattr(total, name) + getattr(usage, name))
    return total.model_dump()


async def gather_with_progress(
    jobs: Sequence[Awaitable[_T]], progress: ProgressFn | None = None
) -> list[_T]:
    """Await `jobs` concurrently, in order; report each completion; cancel the rest on error."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    if progress is not None:
        _report_completions(tasks, progress)
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _report_completions(tasks: Sequence[asyncio.Future[Any]], progress: ProgressFn) -> None:
    """Call ``progress(done, total)`` each time one of `tasks` finishes successfully."""
    total = len(tasks)
    done = 0

    def on_done(task: asyncio.Future[Any]) -> None:
        nonlocal done
        if not task.cancelled() and task.exception() is None:
            done += 1
            progress(done, total)

    for task in tasks:
        task.add_done_callback(on_done)
