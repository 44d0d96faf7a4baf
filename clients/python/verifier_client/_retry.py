"""Retry policy shared by the sync and async clients (tenacity does the looping).

Retried: 429 and 503 answers, and requests that got no answer because the connection failed.
A ``Retry-After`` header sets the wait; without one the wait grows exponentially with jitter.
A read timeout is not retried: the service may still be working on the request, and its own
deadline answers 504 before the client's read timeout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tenacity import (
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from verifier_client.errors import (
    APIConnectionError,
    APITimeoutError,
    RateLimitError,
    ServiceUnavailableError,
)

logger = logging.getLogger("verifier_client")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. ``attempts=1`` turns retries off."""

    attempts: int = 5
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    # A Retry-After above this is not waited for: the error is raised at once (a quota that
    # refills in an hour should not block a caller for an hour).
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < self.initial_backoff_s:
            raise ValueError("need 0 <= initial_backoff_s <= max_backoff_s")


def is_retryable(exc: BaseException, policy: RetryPolicy) -> bool:
    if isinstance(exc, RateLimitError | ServiceUnavailableError):
        return exc.retry_after is None or exc.retry_after <= policy.max_retry_after_s
    return isinstance(exc, APIConnectionError) and not isinstance(exc, APITimeoutError)


class _Wait:
    """Retry-After when the answer carried one, else exponential backoff with jitter."""

    def __init__(self, policy: RetryPolicy) -> None:
        # `multiplier` is the first wait (tenacity >= 9.2; `initial` is its deprecated name).
        self._backoff = wait_exponential_jitter(
            multiplier=policy.initial_backoff_s, max=policy.max_backoff_s
        )

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return float(retry_after)
        return float(self._backoff(state))


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    wait = state.next_action.sleep if state.next_action is not None else 0.0
    logger.info("attempt %d failed (%s); retrying in %.2f s", state.attempt_number, exc, wait)


def tenacity_kwargs(policy: RetryPolicy) -> dict[str, Any]:
    """Arguments for ``tenacity.Retrying`` / ``AsyncRetrying``."""
    return {
        "stop": stop_after_attempt(policy.attempts),
        "wait": _Wait(policy),
        "retry": retry_if_exception(lambda exc: is_retryable(exc, policy)),
        "before_sleep": _log_retry,
        "reraise": True,
    }
