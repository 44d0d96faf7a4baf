"""The job-queue contract shared by the local (asyncio) and Redis Streams queues.

A request handler builds a :class:`Job`, calls :meth:`JobQueue.submit` and gets a
:class:`JobResult` back (or a ``ServiceError``: ``Overloaded``, ``DeadlineExceeded``,
``QueueUnavailable``). Workers call :meth:`JobQueue.pull` for a batch of
:class:`Delivery` objects, run a :data:`Handler` on each job and report with
:meth:`JobQueue.complete`. Everything that crosses a process boundary is JSON, never pickle.

Example::

    job = Job(id=new_job_id(), kind="outcome", payload=req, deadline=time.time() + 30)
    result = await queue.submit(job, idempotency_key=request_id)
    result.raise_for_error()
    return result.body
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.errors import InvalidRequest, ServiceError
from service.kinds import JobKind
from service.stores.tenants import DEFAULT_TENANT, check_tenant


def new_job_id() -> str:
    """An unguessable id: result keys are addressed by it, so it must not be predictable."""
    return secrets.token_urlsafe(16)


class _WireModel(BaseModel):
    """What crosses processes through Redis: immutable, and strict so that a JSON ``true``
    never passes as a number nor a number as a string."""

    model_config = ConfigDict(frozen=True, strict=True, extra="ignore")

    @classmethod
    def _parse(cls, raw: str | bytes, required: set[str]) -> Self:
        """Validate JSON; raises ``ValueError`` (pydantic's ValidationError is one) when it is
        malformed or lacks a field of ``required``."""
        model = cls.model_validate_json(raw)
        missing = required - model.model_fields_set
        if missing:
            raise ValueError(f"{cls.__name__} JSON lacks {', '.join(sorted(missing))}")
        return model


class Job(_WireModel):
    """One unit of work. ``deadline`` is unix time; after it nobody waits for the result."""

    id: str
    kind: JobKind
    payload: dict[str, Any]
    deadline: float
    tenant: str = DEFAULT_TENANT
    est_tokens: int = 0
    enqueued_at: float = Field(default_factory=time.time)

    @field_validator("tenant")
    @classmethod
    def _check_tenant(cls, tenant: str) -> str:
        # Tenants are part of Redis key names; a ':' would let two tenants share a key.
        return check_tenant(tenant)

    @field_validator("est_tokens")
    @classmethod
    def _check_est_tokens(cls, est_tokens: int) -> int:
        if est_tokens < 0:
            raise InvalidRequest(f"est_tokens must be >= 0, got {est_tokens}")
        return est_tokens

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str | bytes) -> Job:
        """Parse :meth:`to_json` output; raises ``ValueError`` on anything malformed (every
        field must be there) and ``InvalidRequest`` on a bad tenant or token estimate."""
        return cls._parse(raw, set(cls.model_fields))

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.deadline


def _error_class(error_type: str) -> type[ServiceError]:
    """The ServiceError subclass whose ``type`` matches, or ServiceError itself."""
    pending: list[type[ServiceError]] = [ServiceError]
    while pending:
        cls = pending.pop()
        if cls.type == error_type:
            return cls
        pending.extend(cls.__subclasses__())
    return ServiceError


class JobResult(_WireModel):
    """What a worker reports for a job: a JSON body, or an error in the one error shape."""

    ok: bool
    body: dict[str, Any] | None = None
    error_type: str | None = None
    error_message: str | None = None
    status: int | None = None
    # Engine tokens the run spent (prompt plus generated), counted by the worker; on a job
    # aborted because its caller left, the quota is settled for this. None: not counted.
    spent_tokens: int | None = None
    # Set by the queue, never stored: this caller got the result of an earlier request with
    # the same idempotency key, so nothing ran (and nothing may be charged) for it.
    replayed: bool = Field(default=False, exclude=True)

    def as_replay(self) -> JobResult:
        return self.model_copy(update={"replayed": True})

    def with_spent(self, tokens: int) -> JobResult:
        return self.model_copy(update={"spent_tokens": tokens})

    @classmethod
    def success(cls, body: dict[str, Any]) -> JobResult:
        return cls(ok=True, body=body, status=200)

    @classmethod
    def failure(cls, status: int, error_type: str, message: str) -> JobResult:
        return cls(ok=False, error_type=error_type, error_message=message, status=status)

    @classmethod
    def from_error(cls, exc: ServiceError) -> JobResult:
        return cls.failure(exc.status, exc.type, exc.message)

    def raise_for_error(self) -> None:
        """Raise the matching ``ServiceError`` subclass when the job failed."""
        if self.ok:
            return
        error_type = self.error_type or ServiceError.type
        cls = _error_class(error_type)
        exc = cls(self.error_message or "the job failed")
        if cls.type != error_type or cls.status != self.status:
            # An error type this process does not know: keep the worker's status and type.
            exc.status = self.status or ServiceError.status
            exc.type = error_type
        raise exc

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str | bytes) -> JobResult:
        """Parse :meth:`to_json` output; raises ``ValueError`` on anything malformed."""
        result = cls._parse(raw, {"ok"})
        # Whether a result is a replay is the reading queue's call, never the stored JSON's.
        return result.model_copy(update={"replayed": False}) if result.replayed else result


@dataclass(frozen=True)
class Delivery:
    """A job handed to a worker. ``deliveries`` is 1 the first time, 2 after one reclaim, ..."""

    job: Job
    handle: str
    deliveries: int = 1


Handler = Callable[[Job], Awaitable[JobResult]]


class JobQueue(Protocol):
    """Submit jobs on the API side, pull and complete them on the worker side."""

    async def submit(self, job: Job, idempotency_key: str | None = None) -> JobResult:
        """Enqueue ``job`` and wait for its result until ``job.deadline``.

        Raises ``Overloaded`` (queue full, with ``retry_after``), ``DeadlineExceeded``
        (the job is then marked cancelled so workers skip it) or ``QueueUnavailable``.
        The same ``(tenant, idempotency_key)`` returns the same result without a second run.
        """
        ...

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        """Up to ``max_jobs`` jobs whose ``est_tokens`` sum to at most ``max_tokens``.

        Always returns at least one job when one is available, even if it alone exceeds
        ``max_tokens``. Blocks up to ``block_ms`` for the first job, then waits up to
        ``batch_wait_ms`` for more. Returns ``[]`` when nothing arrived.
        """
        ...

    async def complete(self, delivery: Delivery, result: JobResult) -> bool:
        """Store the result; True if this write won (the first result for a job wins)."""
        ...

    async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
        """The stored result of ``job_id`` if ``tenant`` submitted it (None otherwise)."""
        ...

    async def depth(self) -> int:
        """Jobs accepted but not yet completed (queued plus in flight)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class Renewable(Protocol):
    """A queue whose deliveries expire unless the worker renews them (Redis Streams)."""

    async def renew(self, deliveries: Sequence[Delivery]) -> None: ...


@runtime_checkable
class Cancellable(Protocol):
    """A queue that can tell a worker which of its claimed jobs nobody waits for any more."""

    async def cancelled(self, deliveries: Sequence[Delivery]) -> set[str]:
        """The handles of ``deliveries`` whose callers all left (their jobs may be aborted)."""
        ...


class BatchLimits:
    """Collects deliveries under a job-count cap and a token cap (TEI's batching rule).

    The first job is always accepted, so one oversized job still runs (alone). Once a job
    does not fit, the batch is closed: later jobs wait their turn, keeping FIFO order.
    """

    def __init__(self, max_jobs: int, max_tokens: int) -> None:
        self.max_jobs = max_jobs
        self.max_tokens = max_tokens
        self.deliveries: list[Delivery] = []
        self.tokens = 0
        self.closed = False

    @property
    def room(self) -> int:
        return self.max_jobs - len(self.deliveries)

    @property
    def full(self) -> bool:
        return self.closed or self.room <= 0 or self.tokens >= self.max_tokens

    def offer(self, delivery: Delivery) -> bool:
        """Add the delivery if it fits; otherwise close the batch and return False."""
        est = delivery.job.est_tokens
        fits = self.room > 0 and (not self.deliveries or self.tokens + est <= self.max_tokens)
        if self.closed or not fits:
            self.closed = True
            return False
        self.deliveries.append(delivery)
        self.tokens += est
        return True


def check_pull_args(max_jobs: int, max_tokens: int, block_ms: int) -> None:
    if max_jobs < 1 or max_tokens < 1 or block_ms < 0:
        raise ValueError(
            "pull() needs max_jobs >= 1, max_tokens >= 1 and block_ms >= 0; "
            f"got {max_jobs}, {max_tokens}, {block_ms}"
        )
