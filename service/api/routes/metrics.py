"""GET /metrics: Prometheus text (ours, then vLLM's engine metrics)."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Response

from service.api.deps import StateDep
from service.errors import ServiceError

router = APIRouter(tags=["metrics"])


@router.get("/metrics", include_in_schema=False)
async def metrics(state: StateDep) -> Response:
    """Prometheus text; queue depth is read from the queues (Redis: shared by every process),
    one per model."""
    for model, queue in state.queues.items():
        with contextlib.suppress(ServiceError):
            state.metrics.queue_depth.labels(model).set(await queue.depth())
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
