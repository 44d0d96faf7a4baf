"""The Grafana dashboard: vLLM's dashboard conventions, and every metric it reads exists (by
definition in service/ops/telemetry.py, and in `/metrics` of a running service)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from loadtests.metrics_text import sample_sum
from service.ops.telemetry import Metrics
from tests.support.deploy import dashboard, dashboard_exprs, dashboard_metrics, exposed_names

DS = "${DS_PROMETHEUS}"
# What the dashboard must show (issue 13): the series behind each required panel.
REQUIRED = {
    "verifier_requests_total",  # request rate by endpoint
    "verifier_request_duration_seconds_bucket",  # latency by endpoint
    "verifier_eval_tokens_total",  # tokens by kind
    "verifier_budget_tokens_total",  # tokens by tenant
    "verifier_budget_decisions_total",  # budget refusals and degradations
    "verifier_queue_depth",
    "verifier_jobs_redelivered_total",
    "verifier_jobs_dead_total",
    "verifier_batch_size_bucket",
    "verifier_worker_progress_timestamp_seconds",  # heartbeat age
    "vllm:kv_cache_usage_perc",
    "vllm:request_queue_time_seconds_bucket",
}


def defined_verifier_series() -> set[str]:
    """Series names our metrics expose, from their definitions (no samples needed)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {
        family.name + suffix
        for family in Metrics().registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def test_variables_follow_vllms_dashboards() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    source = variables["DS_PROMETHEUS"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    model = variables["model_name"]
    assert model["type"] == "query"
    assert model["datasource"]["uid"] == DS
    assert model["query"]["query"] == 'label_values({__name__=~"vllm:.*"},model_name)'


def test_every_panel_uses_the_datasource_variable() -> None:
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    assert len(panels) >= 12
    for panel in panels:
        assert panel["datasource"]["uid"] == DS, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == DS, panel["title"]
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))


def test_model_variable_filters_model_series() -> None:
    for expr in dashboard_exprs():
        if "vllm:" in expr:
            assert 'model_name="$model_name"' in expr, expr
        if "verifier_eval_tokens_total" in expr:
            assert 'model="$model_name"' in expr, expr


def test_required_panels_are_there() -> None:
    assert dashboard_metrics() >= REQUIRED


def test_verifier_metrics_are_defined() -> None:
    used = {m for m in dashboard_metrics() if m.startswith("verifier_")}
    assert used <= defined_verifier_series()


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + "/v1/judge/outcome", json=body, timeout=300)


@pytest.mark.engine
def test_dashboard_metrics_exist_in_a_running_service(server: Any) -> None:
    """The session's `verifier serve` hosts API, worker and engine, so its /metrics carries
    every series the dashboard reads (in a split deployment they come from the API and the
    worker scrape jobs). Labelled series appear once they have been recorded, hence the
    traffic: a judgment, one request refused over its budget, one degraded."""
    question = "What is 2 + 2?"
    fine = _post(server.url, {"question": question, "response": "4", "cache": False})
    assert fine.status_code == 200, fine.text
    refused = _post(server.url, {"question": question, "response": "4", "max_eval_tokens": 1})
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "budget_too_small"
    degraded = _post(
        server.url,
        {
            "question": question,
            "response": "4",
            "mode": "reasoning",
            "reasoning_tokens": 1000,
            "max_eval_tokens": 600,
            "budget_policy": "degrade",
            "cache": False,
        },
    )
    assert degraded.status_code == 200, degraded.text
    assert degraded.json()["budget"]["degraded"] is True

    text = httpx.get(server.url + "/metrics", timeout=30).text
    missing = dashboard_metrics() - exposed_names(text)
    assert not missing, f"the dashboard reads series the service does not expose: {missing}"
    for decision in ("refused", "degraded"):
        counted = sample_sum(
            text, "verifier_budget_decisions_total", decision=decision, tenant="default"
        )
        assert counted >= 1, decision
