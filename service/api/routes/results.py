"""GET /v1/results/{job_id}: a stored job result, for the tenant that sent the job."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.api.deps import StateDep, tenant_name
from service.api.errors import NOT_FOUND, UNAUTHORIZED
from service.errors import NotFound

# The tags it had in /openapi.json while it was served from the health router.
router = APIRouter(tags=["health", "jobs"])


@router.get("/v1/results/{job_id}", responses={**UNAUTHORIZED, **NOT_FOUND})
async def result(job_id: str, request: Request, state: StateDep) -> JSONResponse:
    """The stored result of a job (id from the X-Job-Id header), for the tenant that sent it."""
    tenant = tenant_name(request)
    result = None
    for queue in state.queues.values():
        result = await queue.lookup(tenant, job_id)
        if result is not None:
            break
    if result is None:
        raise NotFound(f"no result for job {job_id} (unknown, expired, or another tenant's)")
    if not result.ok:
        result.raise_for_error()
    return JSONResponse(result.body)
