"""Rule checks under a hard timeout, off the event loop (docs/methods.md E).

math-verify can run without bound on a pathological expression (a huge power, deep nesting)
and its own timeout uses SIGALRM, which works only on a process's main thread. Each check runs
in a pebble process pool instead: a check over its deadline has its worker killed and
replaced, and comes back undecided ("timeout"); other checks keep running on the other workers.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType

from pebble import ProcessPool

from service.scoring.answers import RuleCheck, check

logger = logging.getLogger(__name__)
FAILED = RuleCheck(None, None, None, "error")


class RuleVerifier:
    """A pool of rule-check processes, started at the first check; use as a context manager
    (or call ``close``)."""

    def __init__(self, workers: int = 2, timeout_s: float = 2.0, max_tasks: int = 2000) -> None:
        if workers < 1 or timeout_s <= 0:
            raise ValueError("workers must be >= 1 and timeout_s > 0")
        self.timeout_s = timeout_s
        self._workers = workers
        self._max_tasks = max_tasks
        self._pool: ProcessPool | None = None

    def _schedule(self, response: str, reference: str) -> Future[RuleCheck] | None:
        """The check's future; None when the pool cannot take it (it is rebuilt next time)."""
        try:
            return self._submit(response, reference)
        except Exception:  # noqa: BLE001 - a broken pool makes a check undecided, never a 500
            logger.exception("the rule-check pool failed; starting a new one at the next check")
            self.close()
            return None

    def _submit(self, response: str, reference: str) -> Future[RuleCheck]:
        if self._pool is None:
            # spawn: the parent runs threads (an engine, an event loop) that fork would copy
            # mid-state; max_tasks recycles a worker whose sympy caches have grown
            self._pool = ProcessPool(
                max_workers=self._workers,
                max_tasks=self._max_tasks,
                initializer=_warm,
                context=multiprocessing.get_context("spawn"),
            )
        return self._pool.schedule(check, (response, reference), timeout=self.timeout_s)

    def check_sync(self, response: str, reference: str) -> RuleCheck:
        future = self._schedule(response, reference)
        return FAILED if future is None else _outcome(future)

    async def check(self, response: str, reference: str) -> RuleCheck:
        future = self._schedule(response, reference)
        if future is None:
            return FAILED
        # wait() does not raise: _outcome turns each failure into a reason
        await asyncio.wait([asyncio.wrap_future(future)])
        return _outcome(future)

    async def check_many(self, pairs: Sequence[tuple[str, str]]) -> list[RuleCheck]:
        return list(await asyncio.gather(*(self.check(r, ref) for r, ref in pairs)))

    def close(self) -> None:
        """Stop the workers (a check still running is killed); waits at most 10 s."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
            pool.join(timeout=10)

    def __enter__(self) -> RuleVerifier:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _warm() -> None:
    """Run once by each worker before it takes a check: a check's clock starts when a worker
    takes it, and a cold worker's first check (imports, math-verify's parsers) took over 3 s on
    a loaded 2-core machine, so it timed out and the rule left undecided what it decides."""
    check("The answer is 1", "1")


def _outcome(future: Future[RuleCheck]) -> RuleCheck:
    try:
        result = future.result()
    except FutureTimeout:
        return RuleCheck(None, None, None, "timeout")
    except Exception:  # noqa: BLE001 - a crashed or failed check is undecided, never a 500
        return RuleCheck(None, None, None, "error")
    return result
