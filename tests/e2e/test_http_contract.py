"""HTTP shell: health, readiness, models, metrics, OpenAPI and the error contract."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from loadtests.metrics_text import has_sample, sample_sum
from service.config import LimitSettings

LIMITS = LimitSettings()
GOOD = {"question": "What is 2+2?", "response": "4"}


def post(url: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.post(url + path, timeout=60, **kw)


def test_not_ready_before_the_engine_answered(server: Any) -> None:
    r = server.not_ready_response
    assert r is not None
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "not_ready"


def test_health_ready_models(server: Any) -> None:
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    models = httpx.get(server.url + "/v1/models").json()
    assert models["data"][0]["id"] == "SmolLM2-135M-Instruct"
    # The dtype setting (auto unless the environment sets one) resolved for this CPU, shown
    # and logged.
    from service.config import Settings
    from service.engine.device import resolve_dtype

    setting = Settings().engine.dtype
    card = models["data"][0]
    assert card["device"] == "cpu"
    assert card["dtype"] == resolve_dtype(setting, "cpu")
    assert f"with dtype {card['dtype']} (setting: {setting})" in server.log.read_text()


def test_openapi_lists_the_contract(server: Any) -> None:
    spec = httpx.get(server.url + "/openapi.json").json()
    assert "/v1/judge/outcome" in spec["paths"]
    assert "ErrorResponse" in spec["components"]["schemas"]


def test_metrics_count_requests_and_tokens(server: Any) -> None:
    body = post(server.url, "/v1/judge/outcome", json=GOOD).json()
    text = httpx.get(server.url + "/metrics").text
    outcome = {"endpoint": "/v1/judge/outcome"}
    assert sample_sum(text, "verifier_requests_total", **outcome, status="200") >= 1
    assert has_sample(text, "verifier_request_duration_seconds_bucket", **outcome)
    prompt = sample_sum(text, "verifier_eval_tokens_total", **outcome, kind="prompt")
    assert prompt >= body["usage"]["prompt_tokens"]


def prompt_tokens_counted(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    return sample_sum(text, "verifier_eval_tokens_total", kind="prompt")


def test_idempotent_replay_is_answered_but_not_counted_again(server: Any) -> None:
    idem = {"Idempotency-Key": uuid.uuid4().hex}
    fresh = {**GOOD, "cache": False}  # so that a replay that ran would count tokens
    first = post(server.url, "/v1/judge/outcome", json=fresh, headers=idem)
    counted = prompt_tokens_counted(server.url)
    again = post(server.url, "/v1/judge/outcome", json=fresh, headers=idem)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert prompt_tokens_counted(server.url) == counted  # nothing ran for the replay


BAD_422 = [
    ({"question": "", "response": "4"}, "question"),
    ({"question": "q", "response": "   \n"}, "response"),
    ({"question": "q"}, "response"),
    ({**GOOD, "mode": "telepathy"}, "mode"),
    ({**GOOD, "samples": 0}, "samples"),
    ({**GOOD, "samples": 2}, "samples > 1 needs mode='reasoning'"),
    ({**GOOD, "mode": "reasoning", "samples": LIMITS.max_samples + 1}, "samples="),
    ({**GOOD, "mode": "reasoning", "reasoning_tokens": LIMITS.max_reasoning_tokens + 1}, "reason"),
    ({**GOOD, "temperature": -1}, "temperature"),
]


@pytest.mark.parametrize(("body", "needle"), BAD_422)
def test_invalid_fields_are_422(server: Any, body: dict[str, Any], needle: str) -> None:
    r = post(server.url, "/v1/judge/outcome", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request"
    assert needle in err["message"]


def test_malformed_json_is_422(server: Any) -> None:
    r = post(
        server.url,
        "/v1/judge/outcome",
        content=b'{"question": ',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "invalid_request"


def test_text_over_limit_is_413(server: Any) -> None:
    r = post(
        server.url,
        "/v1/judge/outcome",
        json={**GOOD, "response": "x" * (LIMITS.max_text_chars + 1)},
    )
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["type"] == "payload_too_large"
    assert "VERIFIER_LIMITS__MAX_TEXT_CHARS" in err["message"]


def test_body_over_limit_is_413(server: Any) -> None:
    big = b'{"question": "' + b"a" * (LIMITS.max_body_bytes + 10) + b'"}'
    r = post(
        server.url, "/v1/judge/outcome", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "payload_too_large"


def test_prompt_over_context_is_422_not_500(server: Any) -> None:
    # 30,000 characters of digits is far over the 4,096-token context but under the size limit.
    r = post(server.url, "/v1/judge/outcome", json={**GOOD, "response": "7 " * 15_000})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "context_too_long"


def test_unknown_route_uses_error_shape(server: Any) -> None:
    r = httpx.get(server.url + "/v1/nope")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found"


def test_classify_and_pooling_on_the_generative_judge_are_refused(server: Any) -> None:
    r = httpx.post(server.url + "/classify", json={"input": "hello"}, timeout=60)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "not_served_by_model"
    r = httpx.post(server.url + "/pooling", json={"input": "hello"}, timeout=60)
    assert r.status_code == 422


def test_server_still_healthy_after_bad_inputs(server: Any) -> None:
    r = post(server.url, "/v1/judge/outcome", json=GOOD)
    assert r.status_code == 200


def test_budget_refuses_with_the_estimate(server: Any) -> None:
    r = post(server.url, "/v1/judge/outcome", json={**GOOD, "max_eval_tokens": 10})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["type"] == "budget_too_small"
    assert "estimate" in err["message"]


def test_budget_degrades_reasoning_to_direct(server: Any) -> None:
    body = {
        **GOOD,
        "mode": "reasoning",
        "reasoning_tokens": 512,
        "samples": 4,
        "budget_policy": "degrade",
    }
    fits_direct = post(server.url, "/v1/judge/outcome", json={**body, "max_eval_tokens": 400})
    assert fits_direct.status_code == 200, fits_direct.text
    b = fits_direct.json()
    assert b["mode"] == "direct"
    assert b["budget"]["degraded"] is True
    assert b["budget"]["max_eval_tokens"] == 400
    assert "direct" in b["budget"]["note"]
    assert b["usage"]["total_tokens"] <= 400
    roomy = post(server.url, "/v1/judge/outcome", json={**GOOD, "max_eval_tokens": 5000}).json()
    assert roomy["budget"]["degraded"] is False
    assert roomy["budget"]["estimate"] >= roomy["usage"]["total_tokens"]
