"""Routes that run jobs (through api/pipeline.py's JobDep), in-process over the fake engine:
what a job costs is recorded under the route's template, and the rerank aliases share one
label."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.api.deps import AppState
from tests.support.apps import app_with_worker
from tests.support.fakes import FakeEngine

Q = "What is 3 * (2 + 4)?"
DOCS = ["2 + 4 = 6, and 3 * 6 = 18.", "18"]


@pytest.fixture
async def app(tokenizer: Any) -> AsyncIterator[FastAPI]:
    async with app_with_worker(FakeEngine(tokenizer)) as app:
        yield app


def calls_by_endpoint(app: FastAPI) -> dict[str, float]:
    state: AppState = app.state.svc
    found: dict[str, float] = {}
    for family in state.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "verifier_engine_calls_total":
                found[sample.labels["endpoint"]] = sample.value
    return found


async def test_usage_is_labelled_by_route_and_rerank_aliases_share_one_label(
    app: FastAPI,
) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        for path in ("/v1/rerank", "/v2/rerank", "/rerank"):
            r = await http.post(path, json={"query": Q, "documents": DOCS})
            assert r.status_code == 200, r.text
            assert r.headers["X-Job-Id"]
        r = await http.post("/v1/score", json={"question": Q, "responses": DOCS})
        assert r.status_code == 200, r.text
        r = await http.post("/v1/judge/outcome", json={"question": Q, "response": DOCS[0]})
        assert r.status_code == 200, r.text
    per_request = r.json()["usage"]["engine_calls"]
    calls = calls_by_endpoint(app)
    assert set(calls) == {"/v1/rerank", "/v1/score", "/v1/judge/outcome"}
    assert calls["/v1/rerank"] == 3 * calls["/v1/score"]  # the same documents, three times
    assert calls["/v1/judge/outcome"] == per_request


def test_no_route_or_dependency_runs_in_the_thread_pool() -> None:
    """FastAPI hands every plain-function route or dependency to its thread pool, a thread
    handoff per request that takes CPU from the engine on a small machine: all are coroutines."""
    import inspect

    from fastapi.dependencies.models import Dependant
    from fastapi.routing import APIRoute

    from service.app import create_app
    from service.config import Settings

    def calls(dependant: Dependant) -> list[Any]:
        found = [dependant.call] if dependant.call is not None else []
        for sub in dependant.dependencies:
            found += calls(sub)
        return found

    routes = [r for r in create_app(Settings(), run_worker=False).routes if isinstance(r, APIRoute)]
    assert len(routes) > 20
    plain = {
        f"{route.path}: {getattr(call, '__name__', call)}"
        for route in routes
        for call in calls(route.dependant)
        if not inspect.iscoroutinefunction(call)
    }
    assert not plain
