"""The application state and the typed dependencies routes receive (``Annotated`` aliases).

The limit checks are in ``service.api.limits`` and the path every model-using request takes
(plan, reserve, submit, settle) in ``service.api.pipeline``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import Depends, Request
from redis.asyncio import Redis

from service.config import Settings
from service.errors import NotReady
from service.ops.telemetry import Metrics
from service.queue.base import JobQueue
from service.queue.worker import Worker
from service.stores.auth import KeyRecord
from service.stores.calibrations import CalibrationStore, MemoryCalibrations
from service.stores.concurrency import MemorySlots, Slots
from service.stores.probability_calibrations import ProbabilityCalibrationStore, memory_store

if TYPE_CHECKING:
    # Only a process that hosts a worker holds the serving objects; an API-only process
    # (`verifier serve` with a Redis queue and no local worker) loads no serving family.
    from service.serving.services import Services


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    status: Literal["starting", "ready", "failed"] = "starting"
    detail: str | None = None
    queues: dict[str, JobQueue] = field(default_factory=dict)  # by model, the default first
    hosted: dict[str, Services] = field(default_factory=dict)  # models this process runs
    workers: list[Worker] = field(default_factory=list)
    redis: Redis | None = None  # keys, quotas, cache and calibrations, when Redis is configured
    calibrations: CalibrationStore = field(default_factory=MemoryCalibrations)
    probability_calibrations: ProbabilityCalibrationStore = field(default_factory=memory_store)
    reward_slots: Slots = field(default_factory=MemorySlots)  # Redis leases when configured
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # ends the helper loops
    exit_code: int = 0  # 1 once the engine died: the process exits 1 for its supervisor
    request_exit: Callable[[], None] | None = None  # set by `verifier serve`: stop the server

    def queue_of(self, model: str | None) -> JobQueue:
        """The queue of a served model's name (None: the default model's, the first)."""
        return next(iter(self.queues.values())) if model is None else self.queues[model]


# Dependencies are coroutines: FastAPI runs a plain function dependency in its thread pool,
# a thread handoff per dependency per request that the direct-judgment profile showed.
async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.svc
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_queue(state: StateDep) -> JobQueue:
    if not state.queues or state.status != "ready":
        detail = f": {state.detail}" if state.detail else ""
        raise NotReady(f"the service is {state.status}{detail}; retry when GET /ready says ready")
    return state.queue_of(None)


QueueDep = Annotated[JobQueue, Depends(get_queue)]


def tenant_of(request: Request) -> KeyRecord | None:
    """The API key record the auth middleware attached (None with auth off)."""
    record: KeyRecord | None = getattr(request.state, "api_key", None)
    return record


def tenant_name(request: Request) -> str:
    """The tenant of the request's key ("default" with auth off)."""
    record = tenant_of(request)
    return record.tenant if record else "default"
