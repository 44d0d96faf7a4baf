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
    summed over the models."""
    if state.queues:
        with contextlib.suppress(ServiceError):
            depths = [await queue.depth() for queue in state.queues.values()]
            state.metrics.queue_depth.set(sum(depths))
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
