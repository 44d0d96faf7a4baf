"""Schema fuzzing of the running session server, bounded for CI (loadtests/schema_fuzz.py is
the long mode): every operation of /openapi.json, positive and negative examples.

Checks: no 5xx, status codes, content types, headers and bodies as documented, invalid data
refused, and no request outliving the service's deadline.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import checks

from service.config import LimitSettings

# Examples per operation here; the long mode takes 200 or more.
EXAMPLES = int(os.environ.get("VERIFIER_FUZZ_EXAMPLES", "25"))
# A request may take its deadline plus the time to answer it: past that it outlived it.
DEADLINE_S = LimitSettings().request_timeout_s + 5.0
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


@pytest.fixture(scope="module")
def api_schema(server: Any) -> Any:
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples on every CI run; the long mode explores
)
def test_every_operation(case: Any) -> None:
    response = case.call(timeout=DEADLINE_S + 30)
    case.validate_response(response, checks=CHECKS)
    assert response.elapsed.total_seconds() < DEADLINE_S, "the request outlived its deadline"
