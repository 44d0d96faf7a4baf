"""POST /run_code: one program run in the sandbox, in SandboxFusion's shape (docs/api.md), so
that verl's and ROLL's sandbox clients can point their URL here unchanged."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.errors import CodeExecutionDisabled
from service.protocol import Metered
from service.protocol.code import RunCodeRequest, RunCodeResponse

router = APIRouter(tags=["code"], responses=ERRORS)


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(req: RunCodeRequest, job: JobDep) -> Metered:
    """Run ``code`` with ``stdin`` under ``run_timeout``: ``status`` Success (exit 0), Failed
    (another exit code, or TimeLimitExceeded) or SandboxError, with ``run_result``'s stdout,
    stderr, return_code and execution_time. A 422 when code execution is off."""
    if not job.state.settings.code.enabled:
        raise CodeExecutionDisabled()
    return await job.run("run_code", req)
