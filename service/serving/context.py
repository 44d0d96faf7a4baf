"""Per-job context the serving layer reads: the tenant whose job is running.

The job runner sets it before a job's handler runs (each job runs in its own task, so each
has its own value); the judgment cache scopes its keys by it and MCQ calibrations are read
and stored under it. It has no default: a job path that forgot ``.set()`` raises
``LookupError`` instead of reading and writing a shared tenant's cache and calibrations.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar

from service.protocol.mcq import Calibration
from service.stores.calibrations import CalibrationStore, fitting

current_tenant: ContextVar[str] = ContextVar("current_tenant")


async def tenant_calibration(
    store: CalibrationStore,
    calibration_id: str | None,
    method: str,
    ks: Sequence[int],
    model: str,
) -> Calibration | None:
    """The running job's tenant's calibration ``calibration_id`` (None without one), checked
    against the request (``stores.calibrations.fitting``: 422 when missing or fitted for
    another method, K or model)."""
    if calibration_id is None:
        return None
    return await fitting(store, current_tenant.get(), calibration_id, method, ks, model)


# When the running job arrived (its ``enqueued_at``, unix time): a request's deadline counts
# from there, so time spent queued is spent from it. Unset outside a job: counted from now.
job_arrival: ContextVar[float | None] = ContextVar("job_arrival", default=None)
