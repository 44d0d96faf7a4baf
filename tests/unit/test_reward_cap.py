"""The per-tenant cap on reward items in flight, over HTTP (fast tier: the app with a local
queue and the in-process count; Redis leases are in tests/integration/test_reward_slots.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.api.deps import AppState
from tests.support.apps import app_with_worker
from tests.support.fakes import FakeEngine

Q = "What is 3 * (2 + 4)?"
RIGHT = "2 + 4 = 6, and 3 * 6 = 18.\n#### 18"


def _item(**kw: Any) -> dict[str, Any]:
    return {"prompt": Q, "response": RIGHT, **kw}


async def test_reward_calls_past_the_tenants_cap_are_429_and_every_answer_shows_the_cap(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_REWARD__MAX_CONCURRENT_ITEMS", "4")
    string = {"type": "string", "operation": "contains", "reference": "18"}
    items = [_item(verifier=string)] * 2
    async with app_with_worker(FakeEngine(tokenizer)) as app:
        state: AppState = app.state.svc
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            held = await state.reward_slots.acquire("default", 3, 4)  # another call in flight
            r = await client.post("/v1/rewards", json={"items": items})
            assert r.status_code == 429, r.text
            assert r.json()["error"]["type"] == "concurrency_limited"
            assert r.headers["Retry-After"] == "1"
            assert r.headers["X-Reward-Concurrency-Limit"] == "4"
            assert r.headers["X-Reward-Concurrency-In-Use"] == "3"
            slime = {"prompt": Q, "response": RIGHT, "label": "18"}
            r = await client.post("/v1/rewards/slime", json=slime)  # one item still fits
            assert r.status_code == 200, r.text
            assert r.headers["X-Reward-Concurrency-In-Use"] == "4"
            await state.reward_slots.release(held)
            r = await client.post("/v1/rewards", json={"items": items})
            assert r.status_code == 200, r.text
            assert r.headers["X-Reward-Concurrency-In-Use"] == "2"
            r = await client.post("/v1/rewards", json={"items": [_item(verifier=string)] * 5})
            assert r.status_code == 422  # could never run: split it
            assert "at most 4 in flight" in r.json()["error"]["message"]
            query = {"query": [Q + "\nA: " + RIGHT] * 2, "labels": ["18", "18"]}
            r = await client.post("/get_reward", json={**query, "separator": "\nA: "})
            assert r.status_code == 200, r.text
            assert r.headers["X-Reward-Concurrency-In-Use"] == "2"
            metrics = (await client.get("/metrics")).text
    assert 'verifier_reward_concurrency_refused_total{tenant="default"} 1.0' in metrics
    assert 'verifier_reward_items_in_flight{tenant="default"} 0.0' in metrics
    assert "verifier_reward_items_limit 4.0" in metrics
    assert await state.reward_slots.acquire("default", 4, 4)  # every slot came back
