"""Job kinds: declared once (protocol/jobs.py), and every table keyed by them covers them all."""

from __future__ import annotations

import time

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from service.app import create_app
from service.config import QueueSettings, Settings
from service.kinds import JOB_KINDS, JobKind
from service.protocol import Metered
from service.protocol.jobs import JOBS, for_every_kind
from service.queue.base import Job


def test_a_table_without_every_kind_is_refused_naming_what_is_missing() -> None:
    partial: dict[JobKind, int] = dict.fromkeys(JOB_KINDS[1:], 0)
    with pytest.raises(TypeError, match=rf"estimator table .*missing: \['{JOB_KINDS[0]}'\]"):
        for_every_kind(partial, "estimator")


def test_a_table_with_an_unknown_kind_is_refused() -> None:
    table = {**dict.fromkeys(JOB_KINDS, 0), "poison": 0}
    with pytest.raises(TypeError, match=r"unknown: \['poison'\]"):
        for_every_kind(table, "handler")  # type: ignore[arg-type]


def test_every_route_that_answers_a_job_serves_its_kinds_response_model() -> None:
    """A route's declared response_model is what its job's result is validated as."""
    routes = [r for r in create_app(Settings()).routes if isinstance(r, APIRoute)]
    served = {
        r.response_model
        for r in routes
        if isinstance(r.response_model, type) and issubclass(r.response_model, Metered)
    }
    assert served == {spec.response for spec in JOBS.values()}


def test_a_job_of_another_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="kind"):
        Job.model_validate({"id": "j", "kind": "poison", "payload": {}, "deadline": time.time()})


def test_fault_injection_names_a_job_kind() -> None:
    assert QueueSettings(fault_crash_kind="mcq_audit").fault_crash_kind == "mcq_audit"
    assert QueueSettings().fault_crash_kind is None
    with pytest.raises(ValidationError, match="fault_crash_kind"):
        QueueSettings(fault_crash_kind="poison")  # type: ignore[arg-type]
