"""Job kinds: one closed set, covered exactly by the worker's dispatch table and the budget."""

from __future__ import annotations

import time
from typing import get_args

import pytest
from pydantic import ValidationError

from service.config import QueueSettings
from service.protocol.jobs import JOB_KINDS, JobKind
from service.queue.base import Job
from service.serving import budget
from service.serving.handler import ROUTES


def test_dispatch_table_runs_exactly_the_job_kinds() -> None:
    assert sorted(ROUTES) == sorted(JOB_KINDS)


def test_budget_estimates_exactly_the_job_kinds() -> None:
    assert sorted(budget.ESTIMATORS) == sorted(JOB_KINDS)


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_both_tables_take_the_same_request_model(kind: JobKind) -> None:
    assert ROUTES[kind][0] is budget.ESTIMATORS[kind][0]


def test_kinds_are_distinct() -> None:
    assert len(set(get_args(JobKind))) == len(JOB_KINDS) > 0


def test_a_job_of_another_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="kind"):
        Job.model_validate({"id": "j", "kind": "poison", "payload": {}, "deadline": time.time()})


def test_fault_injection_names_a_job_kind() -> None:
    assert QueueSettings(fault_crash_kind="mcq_audit").fault_crash_kind == "mcq_audit"
    assert QueueSettings().fault_crash_kind is None
    with pytest.raises(ValidationError, match="fault_crash_kind"):
        QueueSettings(fault_crash_kind="poison")  # type: ignore[arg-type]
