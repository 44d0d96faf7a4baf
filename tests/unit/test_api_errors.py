"""The one error renderer: every error path of the app gives the one shape, headers set once."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response

from service.api.errors import error_response, install_error_handlers, retry_after
from service.app import create_app
from service.config import LimitSettings, Settings
from service.errors import (
    BudgetTooSmall,
    MethodNotAllowed,
    Overloaded,
    QuotaExhausted,
    ServiceError,
    Unauthorized,
)
from service.protocol import ErrorResponse, OutcomeRequest
from service.stores.auth import AuthSettings

LIMIT = 2048


def assert_shape(r: Response, status: int, error_type: str) -> str:
    """The response is exactly ``{"error": {"type", "message"}}`` with this status and type."""
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body == ErrorResponse.model_validate(body).model_dump()  # no field more or less
    assert body["error"]["type"] == error_type
    message: str = body["error"]["message"]
    assert message
    return message


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = create_app(Settings(limits=LimitSettings(max_body_bytes=LIMIT)), run_worker=False)

    @app.get("/test/boom")
    async def boom() -> None:
        raise RuntimeError("not for the client")

    @app.post("/test/validate")
    async def validate(req: OutcomeRequest) -> None:
        raise AssertionError("not reached: the body is invalid")

    @app.get("/test/overloaded")
    async def overloaded(seconds: float) -> None:
        raise Overloaded("full", retry_after=seconds)

    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def auth_client() -> TestClient:
    settings = Settings(auth=AuthSettings(enabled=True), redis_url="redis://127.0.0.1:1")
    return TestClient(create_app(settings, run_worker=False))  # lifespan off: no Redis client


def test_service_error_from_a_route(client: TestClient) -> None:
    r = client.post("/v1/judge/outcome", json={"question": "q", "response": "r"})
    assert_shape(r, 503, "not_ready")  # the lifespan did not run: no queue


def test_validation_error(client: TestClient) -> None:
    r = client.post("/test/validate", json={"response": "x"})
    message = assert_shape(r, 422, "invalid_request")
    assert message.startswith("question: ")


def test_body_that_does_not_parse(client: TestClient) -> None:
    r = client.post(
        "/v1/judge/outcome", content=b"\xff\xfe", headers={"content-type": "application/json"}
    )
    assert_shape(r, 422, "invalid_request")


def test_unknown_route(client: TestClient) -> None:
    assert_shape(client.get("/v1/nowhere"), 404, "not_found")


def test_wrong_method_keeps_its_allow_header(client: TestClient) -> None:
    r = client.get("/v1/judge/outcome")
    assert_shape(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"


def test_unhandled_exception_hides_its_text(client: TestClient) -> None:
    message = assert_shape(client.get("/test/boom"), 500, "internal_error")
    assert "not for the client" not in message


def test_body_over_the_limit_from_the_middleware(client: TestClient) -> None:
    r = client.post("/v1/judge/outcome", content=b"x" * (LIMIT + 1))
    message = assert_shape(r, 413, "payload_too_large")
    assert "VERIFIER_LIMITS__MAX_BODY_BYTES" in message


def test_unauthorized_from_the_middleware(auth_client: TestClient) -> None:
    r = auth_client.post("/v1/judge/outcome", json={})
    assert_shape(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("seconds", "header"), [(0.2, "1"), (1.0, "1"), (2.6, "3"), (3600, "3600")]
)
def test_retry_after_in_whole_seconds_at_least_one(
    client: TestClient, seconds: float, header: str
) -> None:
    r = client.get("/test/overloaded", params={"seconds": seconds})
    assert_shape(r, 429, "overloaded")
    assert r.headers["retry-after"] == header
    assert retry_after(seconds) == header


@pytest.mark.parametrize(
    "exc",
    [
        ServiceError("x"),
        BudgetTooSmall("x", estimate=2, limit=1),
        Unauthorized("x"),
        MethodNotAllowed("x"),
        QuotaExhausted("x", retry_after=5),
        Overloaded("x"),
    ],
)
def test_renderer_takes_status_and_type_from_the_class(exc: ServiceError) -> None:
    response = error_response(exc)
    assert response.status_code == exc.status
    assert (
        response.body
        == ErrorResponse.model_validate({"error": {"type": exc.type, "message": "x"}})
        .model_dump_json()
        .encode()
    )
    assert ("retry-after" in response.headers) == (exc.retry_after is not None)
    assert ("www-authenticate" in response.headers) == (exc.status == 401)


def test_an_app_with_only_the_handlers_renders_the_same() -> None:
    app = FastAPI()
    install_error_handlers(app)
    r = TestClient(app).get("/missing")
    assert_shape(r, 404, "not_found")


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/v1/mcq/calibrations", "GET, POST"),  # two routes on one path: both methods
        ("/v1/mcq/calibrations/abc", "DELETE, GET"),
        ("/v1/judge/outcome", "POST"),
    ],
)
def test_405_allow_names_every_method_of_the_path(
    client: TestClient, path: str, allow: str
) -> None:
    r = client.request("OPTIONS", path)
    assert_shape(r, 405, "method_not_allowed")
    assert r.headers["allow"] == allow


def test_body_that_is_not_utf8_is_a_422(client: TestClient) -> None:
    r = client.post(
        "/v1/judge/outcome",
        content=b'{"question": "\xff", "response": "r"}',
        headers={"content-type": "application/json"},
    )
    assert_shape(r, 422, "invalid_request")


def test_a_chunked_body_over_the_limit_is_a_413(client: TestClient) -> None:
    """No Content-Length: the limit is met while the body streams in, inside FastAPI's body
    read (which turned the refusal into its 400, then our 422)."""

    def chunks() -> object:
        yield b'{"question": "q", "response": "'
        for _ in range(8):
            yield b"x" * 512
        yield b'"}'

    r = client.post(
        "/v1/judge/outcome", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "VERIFIER_LIMITS__MAX_BODY_BYTES" in assert_shape(r, 413, "payload_too_large")
