"""create_app() and its lifespan: the only composition root.

The HTTP server is up at once (``/health``); the engine starts in the background and ``/ready``
turns 200 after it answered a probe judgment. vLLM spawns processes, so it is built here and
never at import time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import health, judge, rerank, split
from service.api.deps import AppState, Services
from service.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from service.config import Settings, get_settings
from service.engine.base import Engine
from service.errors import ServiceError, error_body
from service.protocol import OutcomeRequest
from service.telemetry import Metrics

logger = logging.getLogger(__name__)

PROBE = OutcomeRequest(question="What is 2 + 2?", response="2 + 2 = 4. The answer is 4.")


def _start_engine(settings: Settings) -> Engine:
    from service.engine.models import resolve_model
    from service.engine.vllm_engine import VLLMEngine

    return VLLMEngine.start(settings, resolve_model(settings))


async def _bring_up(state: AppState) -> None:
    """Prepare the model, start the engine, score a probe; then mark the service ready."""
    try:
        engine = await asyncio.to_thread(_start_engine, state.settings)
    except Exception as exc:
        logger.exception("engine failed to start")
        state.status, state.detail = "failed", f"engine failed to start: {exc}"
        return
    services = Services.build(engine, state.settings.model_name)
    state.services = services
    try:
        probe = await services.outcome.judge(PROBE)
    except Exception as exc:
        logger.exception("probe judgment failed")
        state.status, state.detail = "failed", f"probe judgment failed: {exc}"
        return
    logger.info("engine ready; probe score %.4f", probe.score)
    state.status, state.detail = "ready", None


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: AppState = app.state.svc
    task = asyncio.create_task(_bring_up(state))
    state.tasks.add(task)
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if state.services is not None:
            await state.services.engine.shutdown()
        state.services = None


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        headers = {"Retry-After": f"{exc.retry_after:.0f}"} if exc.retry_after else None
        return JSONResponse(error_body(exc.type, exc.message), exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("invalid_request", _validation_message(exc)), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(kind, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return JSONResponse(error_body("internal_error", "internal error; see server logs"), 500)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the ASGI app. Nothing heavy happens until the lifespan starts."""
    settings = settings or get_settings()
    metrics = Metrics()
    app = FastAPI(
        title="verifier-service",
        version="0.1.0",
        summary="Judges LLM outputs with evaluation-time compute.",
        lifespan=_lifespan,
    )
    app.state.svc = AppState(settings=settings, metrics=metrics)
    app.include_router(health.router)
    app.include_router(judge.router)
    app.include_router(split.router)
    app.include_router(rerank.router)
    _install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
