"""Schema fuzzing of a running server, bounded for CI (loadtests/schema_fuzz.py is the long
mode, against the default limits): every operation of /openapi.json, positive and negative
examples.

Checks: no 5xx, status codes, content types, headers and bodies as documented, invalid data
refused, and no request outliving the service's deadline.

The server is the session's second one (``small_server``), with small request limits
(``SMALL_LIMITS``) and a LoRA adapter. /openapi.json states the running limits, so the positive
examples stay within them: hypothesis likes boundary values, and at the default limits one
example can be 16 samples of 1,024 reasoning tokens over 32,000-character texts, minutes of
engine time on a CPU without native bf16 (the whole module took 13 minutes on one).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.errors import UnsupportedSchema

from loadtests.harness import ROOT
from tests.support.small_server import SMALL_LIMITS

# Examples per operation here; the long mode takes 200 or more.
EXAMPLES = int(os.environ.get("VERIFIER_FUZZ_EXAMPLES", "25"))
# A request may take its deadline plus the time to answer it: past that it outlived it.
DEADLINE_S = SMALL_LIMITS["REQUEST_TIMEOUT_S"] + 5.0
# Fresh draws for an operation whose negative examples hit a mutation schemathesis cannot build.
RETRIES = 3
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


@pytest.fixture(scope="module")
def api_schema(small_server: Any) -> Any:
    # The long mode's config: a 413 for a text over its limit rejects invalid data too.
    config = SchemathesisConfig.from_path(ROOT / "loadtests" / "schemathesis.toml")
    schema = schemathesis.openapi.from_url(small_server.url + "/openapi.json", config=config)
    # The limits reach the schema (else the positive examples would not be bounded).
    body = schema.raw_schema["components"]["schemas"]["OutcomeRequest"]["properties"]
    assert body["question"]["maxLength"] == SMALL_LIMITS["MAX_TEXT_CHARS"]
    return schema


def _fuzz(operation: Any, mode: GenerationMode, attempt: int = 0) -> None:
    """Hypothesis over one operation; raises on the first failing (shrunk) example. Attempt 0
    draws the same examples on every CI run; a retry draws from seed ``attempt``."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        derandomize=attempt == 0,  # the long mode explores
        database=None,
    )
    def run(case: Any) -> None:
        response = case.call(timeout=DEADLINE_S + 30)
        case.validate_response(response, checks=CHECKS)
        assert response.elapsed < DEADLINE_S, "the request outlived its deadline"

    if attempt:
        run = seed(attempt)(run)
    run()


def _fuzz_negative(operation: Any) -> None:
    """Negative examples, drawn again where schemathesis drew a mutation it cannot generate
    from (a `not` it cannot complement: which subschema it mutates follows this process's
    string hashing, so a body with nested models meets one now and then). A schema that
    cannot be fuzzed still fails after the retries."""
    for attempt in range(RETRIES + 1):
        try:
            _fuzz(operation, GenerationMode.NEGATIVE, attempt)
            return
        except UnsupportedSchema:
            if attempt == RETRIES:
                raise


# schemathesis' pytest loader (from_fixture) does not run on pytest 9: the operations are
# enumerated here, one hypothesis run each, positive and negative examples.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation(api_schema: Any, mode: GenerationMode) -> None:
    failed: dict[str, str] = {}
    tested = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        try:
            if mode is GenerationMode.NEGATIVE:
                _fuzz_negative(operation)
            else:
                _fuzz(operation, mode)
        except Unsatisfiable:
            # No invalid input exists (no parameters, or only a free-form path string).
            assert mode is GenerationMode.NEGATIVE, operation.label
            continue
        except Exception as exc:  # collected, so one run reports every failing operation
            failed[operation.label] = f"{type(exc).__name__}: {exc}"[:2000]
        tested += 1
    # Every operation positively; the 12 that take a body negatively too.
    assert tested >= (19 if mode is GenerationMode.POSITIVE else 12)
    assert not failed, "\n\n".join(f"{label}: {err}" for label, err in failed.items())
