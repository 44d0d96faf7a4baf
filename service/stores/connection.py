"""The one way this service talks to Redis: short timeouts, one retry, errors as 503."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as rex
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from service.errors import QueueUnavailable


def connect(url: str, timeout_s: float = 2.0, read_timeout_s: float | None = None) -> Redis:
    """A client that fails within about ``timeout_s`` when Redis is down.

    ``read_timeout_s`` is longer for clients that issue blocking calls (BLPOP, XREADGROUP
    BLOCK), whose socket must outwait the server-side block.
    """
    return Redis.from_url(
        url,
        decode_responses=True,
        # RESP2: redis-py's stream replies keep one stable shape ([[stream, entries]]).
        protocol=2,
        socket_connect_timeout=timeout_s,
        socket_timeout=read_timeout_s if read_timeout_s is not None else timeout_s,
        # One immediate retry on a dropped connection (server restart, CLIENT KILL) so
        # pooled sockets heal silently; timeouts are not retried, so a dead server costs
        # at most one timeout before QueueUnavailable.
        retry=Retry(NoBackoff(), 1, supported_errors=(rex.ConnectionError,)),
    )


def is_unreachable(exc: BaseException) -> bool:
    """Redis could not be reached: redis-py's connection errors and timeouts, or uvloop's
    RuntimeError for a transport the server closed (seen when Redis dies mid-handshake)."""
    if isinstance(exc, rex.ConnectionError | rex.TimeoutError):
        return True
    return isinstance(exc, RuntimeError) and "closed" in str(exc)


@contextmanager
def unavailable(operation: str) -> Iterator[None]:
    """Turn Redis connectivity errors into ``QueueUnavailable`` (503)."""
    try:
        yield
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        raise QueueUnavailable(
            f"Redis is unreachable ({operation}: {exc}); check that Redis runs and that "
            "VERIFIER_REDIS_URL points to it"
        ) from exc
