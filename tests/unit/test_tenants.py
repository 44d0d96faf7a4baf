"""Tenant names: one whole-string check for keys and jobs; bounded metric labels."""

from __future__ import annotations

import time

import pytest

from service.errors import InvalidRequest
from service.ops.telemetry import Metrics
from service.queue.base import Job
from service.stores.auth import check_tenant as auth_check_tenant
from service.stores.tenants import MAX_TENANT_LABELS, OTHER_TENANTS, TenantLabels, check_tenant

BAD = ["acme\n", "acme\r\n", "ac:me", "", "a" * 65, "acme ", "ac\u00e9me", "acme\x00"]


@pytest.mark.parametrize("tenant", BAD)
def test_queue_and_auth_refuse_the_same_names(tenant: str) -> None:
    with pytest.raises(InvalidRequest):
        check_tenant(tenant)
    with pytest.raises(InvalidRequest):
        auth_check_tenant(tenant)
    with pytest.raises(InvalidRequest):
        Job(id="j", kind="outcome", payload={}, deadline=time.time() + 5, tenant=tenant)


def test_queue_accepts_what_auth_accepts() -> None:
    for tenant in ["acme", "a", "A-b_c.9", "x" * 64]:
        assert Job(id="j", kind="outcome", payload={}, deadline=1.0, tenant=tenant).tenant == tenant
        assert auth_check_tenant(tenant) == tenant


def test_tenant_labels_are_bounded() -> None:
    labels = TenantLabels(limit=3)
    assert [labels(t) for t in ["a", "b", "a", "c"]] == ["a", "b", "a", "c"]
    assert labels("d") == OTHER_TENANTS
    assert labels("a") == "a"  # a name seen before keeps its label
    assert labels("bad\nname") == OTHER_TENANTS


def test_budget_metric_has_bounded_label_values() -> None:
    metrics = Metrics()
    for i in range(MAX_TENANT_LABELS * 3):
        metrics.budget(f"tenant{i}", "granted").inc(1)
    tenants = {
        sample.labels["tenant"]
        for family in metrics.registry.collect()
        if family.name == "verifier_budget_tokens"
        for sample in family.samples
    }
    assert len(tenants) == MAX_TENANT_LABELS + 1
    assert OTHER_TENANTS in tenants
