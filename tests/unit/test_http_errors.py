"""The error contract without an engine: the app built, its lifespan not started."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(), run_worker=False))


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
    assert r.status_code == 405
    assert r.headers["allow"] == allow
    assert r.json()["error"]["type"] == "method_not_allowed"


def test_body_that_is_not_utf8_is_a_422(client: TestClient) -> None:
    r = client.post(
        "/v1/judge/outcome",
        content=b'{"question": "\xff", "response": "r"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "invalid_request"


def test_a_chunked_body_over_the_limit_is_a_413() -> None:
    """No Content-Length: the limit is met while the body streams in, inside FastAPI's body
    read (which turned the refusal into its 400, then our 422)."""
    small = TestClient(create_app(Settings(limits={"max_body_bytes": 2048}), run_worker=False))

    def chunks() -> object:
        yield b'{"question": "q", "response": "'
        for _ in range(8):
            yield b"x" * 512
        yield b'"}'

    r = small.post(
        "/v1/judge/outcome", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["type"] == "payload_too_large"
    assert "VERIFIER_LIMITS__MAX_BODY_BYTES" in r.json()["error"]["message"]
