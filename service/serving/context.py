"""Per-job context the serving layer reads: the tenant whose job is running.

The job runner sets it before a job's handler runs (each job runs in its own task, so each
has its own value); the judgment cache scopes its keys by it and MCQ calibrations are read
and stored under it. It has no default: a job path that forgot ``.set()`` raises
``LookupError`` instead of reading and writing a shared tenant's cache and calibrations.
"""

from __future__ import annotations

from contextvars import ContextVar

current_tenant: ContextVar[str] = ContextVar("current_tenant")
