"""Tenant names: the one check shared by API keys and the queue, and bounded metric labels.

A tenant name is part of Redis key names (``verifier:result:<tenant>:<id>``) and of metric
labels, so it is matched whole with ``fullmatch``: a ``^...$`` pattern with ``re.match`` would
accept a trailing newline (``"acme\\n"``).
"""

from __future__ import annotations

import re
import threading

from service.errors import InvalidRequest

# The tenant of requests without an API key (auth off) and of the engine's startup probe.
DEFAULT_TENANT = "default"
TENANT_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Tenants past this many distinct names share one metric label: a label value is a time series
# kept for the life of the process, so label values must come from a bounded set.
MAX_TENANT_LABELS = 100
OTHER_TENANTS = "_other"


def valid_tenant(tenant: str) -> bool:
    return TENANT_RE.fullmatch(tenant) is not None


def check_tenant(tenant: str) -> str:
    """``tenant`` itself, or ``InvalidRequest`` naming the allowed characters."""
    if not valid_tenant(tenant):
        raise InvalidRequest(
            f"tenant {tenant!r} is invalid; use 1-64 characters from A-Z a-z 0-9 _ . -"
        )
    return tenant


class TenantLabels:
    """Metric label values for tenants: the first ``limit`` names as they are, later ones as
    ``_other`` (invalid names too, so no caller-controlled text reaches a label)."""

    def __init__(self, limit: int = MAX_TENANT_LABELS) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant: str) -> str:
        if not valid_tenant(tenant):
            return OTHER_TENANTS
        with self._lock:
            if tenant in self._seen:
                return tenant
            if len(self._seen) < self._limit:
                self._seen.add(tenant)
                return tenant
        return OTHER_TENANTS
