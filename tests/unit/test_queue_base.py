"""Job and JobResult on the wire: round trips, and refusal of malformed or mistyped JSON."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import ValidationError

from service.errors import DeadlineExceeded, InvalidRequest
from service.queue.base import Job, JobResult

GOOD: dict[str, Any] = {
    "id": "j1",
    "kind": "process",
    "payload": {"question": "q", "steps": ["a", "b"]},
    "deadline": 1_800_000_000.5,
    "tenant": "acme",
    "est_tokens": 12,
    "enqueued_at": 1_799_999_999.25,
}


def with_(**changes: Any) -> str:
    data = {**GOOD, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def test_job_round_trip_keeps_every_field() -> None:
    job = Job.from_json(with_())
    assert job.model_dump() == GOOD
    assert Job.from_json(job.to_json()) == job
    assert json.loads(job.to_json()) == GOOD


def test_a_job_is_immutable() -> None:
    job = Job.from_json(with_())
    with pytest.raises(ValidationError, match="frozen"):
        job.tenant = "other"  # type: ignore[misc]


def field(name: str) -> str:
    """The pattern of a validation error about `name`: pydantic gives the field its own line."""
    return rf"(?m)^{name}$"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("not json", "Invalid JSON"),
        ("[1, 2]", "Input should be an object"),
        (with_(deadline=True), field("deadline")),  # a JSON true is no number
        (with_(est_tokens=True), field("est_tokens")),
        (with_(est_tokens=1.5), field("est_tokens")),
        (with_(deadline="1800000000"), field("deadline")),  # nor is a string
        (with_(id=7), field("id")),
        (with_(payload=[1]), field("payload")),
        (with_(kind="poison"), field("kind")),  # not a job kind
        (with_(tenant=...), "lacks tenant"),  # every field must be there
        (with_(enqueued_at=...), "lacks enqueued_at"),
    ],
)
def test_malformed_job_json_is_a_value_error(raw: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        Job.from_json(raw)


@pytest.mark.parametrize("raw", [with_(tenant="a:b"), with_(est_tokens=-1)])
def test_a_bad_tenant_or_estimate_is_an_invalid_request(raw: str) -> None:
    with pytest.raises(InvalidRequest):
        Job.from_json(raw)


def test_constructor_checks_like_the_parser() -> None:
    with pytest.raises(InvalidRequest, match="est_tokens"):
        Job(id="j", kind="outcome", payload={}, deadline=time.time(), est_tokens=-1)
    with pytest.raises(ValidationError, match="deadline"):
        Job(id="j", kind="outcome", payload={}, deadline=True)


def test_result_round_trip_and_replay_is_never_stored() -> None:
    ok = JobResult.success({"score": 0.5})
    replay = ok.as_replay()
    assert (replay.replayed, ok.replayed) == (True, False)
    assert "replayed" not in json.loads(replay.to_json())
    assert JobResult.from_json(replay.to_json()) == ok
    assert JobResult.from_json('{"ok": true, "replayed": true}').replayed is False
    failed = JobResult.from_error(DeadlineExceeded("late"))
    assert JobResult.from_json(failed.to_json()) == failed
    assert (failed.status, failed.error_type) == (504, "deadline_exceeded")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{}", field("ok")),  # "ok" is required
        ('{"ok": 1}', field("ok")),
        ('{"ok": true, "status": "200"}', field("status")),
        ('{"ok": true, "status": true}', field("status")),
        ('{"ok": true, "body": [1]}', field("body")),
        ('{"ok": false, "error_type": 5}', field("error_type")),
        ("[true]", "Input should be an object"),
        ("", "Invalid JSON"),
    ],
)
def test_malformed_result_json_is_a_value_error(raw: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        JobResult.from_json(raw)
