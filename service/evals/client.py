"""A small async HTTP client for the service, used by the evaluation harnesses.

Concurrency is bounded by a semaphore (held only while a request is in flight, not while
backing off). Only ``503 not_ready`` and ``429`` are retried, after a short backoff; every other
failure raises `ServiceCallError` with the service's ``{"error": {type, message}}`` message.

Example:
    >>> async def main() -> None:  # doctest: +SKIP
    ...     async with ServiceClient("http://127.0.0.1:8000", concurrency=4) as client:
    ...         body = await client.post("/v1/judge/process", {"question": "q", "steps": ["s"]})
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

import httpx

from service.protocol import Usage

logger = logging.getLogger(__name__)

RETRY_CAP_S: Final = 5.0

ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each finished item."""

_T = TypeVar("_T")


class ServiceCallError(Exception):
    """A request the service answered with an error (or that could not be decoded)."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(f"HTTP {status} {error_type}: {message}")
        self.status = status
        self.error_type = error_type
        self.message = message

    @property
    def is_request_error(self) -> bool:
        """True for a 4xx refusal of this request itself (422, 413...), not 429 overloaded."""
        return 400 <= self.status < 500 and self.status != 429


def parse_error(response: httpx.Response) -> ServiceCallError:
    """Read the service's ``{"error": {type, message}}`` body; fall back to the raw text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error_type = str(error.get("type", "unknown"))
        message = str(error.get("message", ""))
    else:
        error_type, message = "unknown", response.text[:500]
    return ServiceCallError(response.status_code, error_type, message)


def is_retryable(status: int, error_type: str) -> bool:
    """Only an engine that is still starting (503 not_ready) or a full queue (429) is retried."""
    return status == 429 or (status == 503 and error_type == "not_ready")


def backoff_delay(attempt: int, base_s: float, retry_after: str | None = None) -> float:
    """Seconds to wait before retry `attempt` (0-based): Retry-After if given, else doubling."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), RETRY_CAP_S)
        except ValueError:
            pass
    return float(min(base_s * 2**attempt, RETRY_CAP_S))


class ServiceClient:
    """POST JSON to the service with bounded concurrency and retries on not_ready/overloaded."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 300.0,
        concurrency: int = 8,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._semaphore = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, limits=limits, transport=transport
        )

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path`; return the decoded JSON object or raise `ServiceCallError`."""
        attempt = 0
        while True:
            async with self._semaphore:
                response = await self._http.post(path, json=body)
            if response.is_success:
                return _json_object(response)
            error = parse_error(response)
            if attempt >= self.max_retries or not is_retryable(error.status, error.error_type):
                raise error
            delay = backoff_delay(attempt, self.backoff_s, response.headers.get("Retry-After"))
            logger.info("%s: %s; retry %d in %.2f s", path, error, attempt + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1


def _json_object(response: httpx.Response) -> dict[str, Any]:
    """The response body as a JSON object, or a `ServiceCallError` saying what came instead."""
    try:
        body = response.json()
    except ValueError as exc:
        raise ServiceCallError(response.status_code, "bad_response", "body is not JSON") from exc
    if not isinstance(body, dict):
        raise ServiceCallError(response.status_code, "bad_response", "body is not a JSON object")
    return body


# --- helpers shared by the harnesses ---------------------------------------------------------


def sum_usage(usages: Iterable[Usage]) -> dict[str, int]:
    """Field-wise sum of `Usage` records (prompt/generated/cached/total tokens, engine calls)."""
    total = Usage()
    for usage in usages:
        for name in Usage.model_fields:
            setattr(total, name, getattr(total, name) + getattr(usage, name))
    return total.model_dump()


def finite_or_none(value: float) -> float | None:
    """`value`, or None when it is NaN/inf (an undefined metric), so the JSON stays strict."""
    return value if math.isfinite(value) else None


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
