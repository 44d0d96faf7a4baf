"""The app with a local queue and an in-process worker over a given engine: the HTTP tests of
the fast tier (routes, validation, the job pipeline) without a server process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from service.api.deps import AppState
from service.app import create_app
from service.config import Settings
from service.engine.base import Engine
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from service.serving.handler import JobRunner
from service.serving.services import Services


@asynccontextmanager
async def app_with_worker(
    engine: Engine, name: str = "fake-model", settings: Settings | None = None
) -> AsyncIterator[FastAPI]:
    """Given ``settings``, the worker serves under their model name (not ``name``)."""
    if settings is not None:
        name = settings.model_name
    settings = settings or Settings()
    app = create_app(settings, run_worker=False)
    state: AppState = app.state.svc
    queue = LocalQueue(settings.queue)
    services = Services.build(engine, name)
    worker = Worker(queue, JobRunner(services), settings.queue, block_ms=10)
    task = asyncio.create_task(worker.run())
    state.queues[settings.model_name], state.status = queue, "ready"
    try:
        yield app
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await queue.close()


@asynccontextmanager
async def app_client(
    engine: Engine, settings: Settings | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of :func:`app_with_worker`'s app, over ASGI (no socket)."""
    async with app_with_worker(engine, settings=settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            yield client
