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
