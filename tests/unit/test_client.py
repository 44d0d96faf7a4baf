"""verifier_client without a server: error mapping, retries, idempotency keys, timeouts."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable

import httpx
import pytest
import verifier_client as vc
from verifier_client import models as m

OUTCOME_BODY = {
    "score": 0.75,
    "logit": 1.0986,
    "verdict": 1,
    "mode": "direct",
    "model": "m",
    "usage": {"prompt_tokens": 10, "generated_tokens": 1, "total_tokens": 11, "engine_calls": 1},
}
COMPARE_BODY = {
    "mode": "pairwise",
    "aggregation": "bradley_terry",
    "debias": "swap",
    "model": "m",
    "results": [
        {"index": 0, "reward": 0.4, "score": 0.6},
        {"index": 1, "reward": -0.4, "score": 0.4},
    ],
    "ranking": [0, 1],
    "preferences": [[None, 0.6], [0.4, None]],
    "position_consistency": 1.0,
    "first_position_rate": 0.5,
    "passes": 2,
    "reads": [
        {"order": [0, 1], "probabilities": [0.7, 0.3], "sample": 0, "reasoning": None},
        {"order": [1, 0], "probabilities": [0.5, 0.5], "sample": 0, "reasoning": None},
    ],
    "usage": {"prompt_tokens": 90, "generated_tokens": 2, "total_tokens": 92, "engine_calls": 2},
}
FAST = vc.RetryPolicy(attempts=4, initial_backoff_s=0.0, max_backoff_s=0.0)
Handler = Callable[[httpx.Request], httpx.Response]


def error(status: int, error_type: str, message: str = "m", **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"type": error_type, "message": message}}, headers=headers
    )


def scripted(answers: list[httpx.Response | Exception], seen: list[httpx.Request]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler


def client(
    answers: list[httpx.Response | Exception], seen: list[httpx.Request], **kw: object
) -> vc.Client:
    transport = httpx.MockTransport(scripted(answers, seen))
    return vc.Client("http://svc", transport=transport, retry=kw.pop("retry", FAST), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "error_type", "cls"),
    [
        (422, "invalid_request", vc.InvalidRequestError),
        (422, "context_too_long", vc.ContextTooLongError),
        (422, "budget_too_small", vc.BudgetTooSmallError),
        (422, "unknown_calibration", vc.UnknownCalibrationError),
        (413, "payload_too_large", vc.PayloadTooLargeError),
        (401, "unauthorized", vc.AuthenticationError),
        (404, "not_found", vc.NotFoundError),
        (429, "overloaded", vc.OverloadedError),
        (429, "quota_exhausted", vc.QuotaExhaustedError),
        (429, "concurrency_limited", vc.ConcurrencyLimitedError),
        (502, "engine_error", vc.EngineFailureError),
        (502, "job_failed", vc.JobFailedError),
        (503, "not_ready", vc.NotReadyError),
        (503, "queue_unavailable", vc.QueueUnavailableError),
        (504, "deadline_exceeded", vc.DeadlineExceededError),
        (500, "internal_error", vc.InternalServerError),
        (599, "teapot", vc.ServerError),
        (418, "teapot", vc.BadRequestError),
    ],
)
def test_errors_map_to_the_tree(status: int, error_type: str, cls: type[vc.APIStatusError]) -> None:
    exc = vc.errors.error_from_response(error(status, error_type, "why", **{"Retry-After": "2"}))
    assert type(exc) is cls
    assert (exc.status, exc.type, exc.message, exc.retry_after) == (status, error_type, "why", 2.0)


def test_an_error_without_the_shape_keeps_the_text() -> None:
    exc = vc.errors.error_from_response(httpx.Response(502, text="bad gateway"))
    assert isinstance(exc, vc.BadGatewayError)
    assert (exc.type, exc.message) == ("unknown", "bad gateway")


def test_retries_429_and_503_with_one_idempotency_key_then_returns_the_typed_answer() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(503, "not_ready"),
        error(429, "overloaded", **{"Retry-After": "0"}),
        httpx.Response(200, json=OUTCOME_BODY),
    ]
    with client(answers, seen) as c:
        out = c.outcome(question="q", response="r", mode="direct")
    assert isinstance(out, m.OutcomeResponse)
    assert out.score == 0.75
    assert len(seen) == 3
    keys = {r.headers[vc.IDEMPOTENCY_HEADER] for r in seen}
    assert len(keys) == 1
    assert keys != {""}
    # Only the fields set are sent: the service's defaults apply to the rest.
    assert json.loads(seen[0].read()) == {"question": "q", "response": "r", "mode": "direct"}


def test_each_call_has_its_own_key_and_a_given_key_is_used() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [httpx.Response(200, json=OUTCOME_BODY)] * 3
    with client(list(answers), seen) as c:
        c.outcome(question="q", response="r")
        c.outcome(question="q", response="r")
        c.outcome(m.OutcomeRequest(question="q", response="r"), idempotency_key="mine")
    keys = [r.headers[vc.IDEMPOTENCY_HEADER] for r in seen]
    assert keys[0] != keys[1]
    assert keys[2] == "mine"


def test_retry_after_is_waited_for() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(429, "overloaded", **{"Retry-After": "0.4"}),
        httpx.Response(200, json=OUTCOME_BODY),
    ]
    start = time.monotonic()
    with client(answers, seen) as c:
        c.outcome(question="q", response="r")
    assert time.monotonic() - start >= 0.4
    assert len(seen) == 2


def test_a_retry_after_beyond_the_cap_is_raised_at_once() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(429, "quota_exhausted", **{"Retry-After": "3600"})
    ]
    with client(answers, seen) as c, pytest.raises(vc.QuotaExhaustedError) as info:
        c.outcome(question="q", response="r")
    assert info.value.retry_after == 3600.0
    assert len(seen) == 1


def test_connection_errors_are_retried_read_timeouts_are_not() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("closed"),
        httpx.Response(200, json=OUTCOME_BODY),
    ]
    with client(answers, seen) as c:
        assert c.outcome(question="q", response="r").score == 0.75
    assert len(seen) == 3
    assert len({r.headers[vc.IDEMPOTENCY_HEADER] for r in seen}) == 1

    seen.clear()
    with client([httpx.ReadTimeout("slow")], seen) as c, pytest.raises(vc.APITimeoutError):
        c.outcome(question="q", response="r")
    assert len(seen) == 1


def test_request_errors_are_raised_at_once_and_retries_give_up() -> None:
    seen: list[httpx.Request] = []
    refused = error(422, "invalid_request", "question: empty")
    with (
        client([refused], seen) as c,
        pytest.raises(vc.InvalidRequestError, match="question: empty"),
    ):
        c.outcome(question="q", response="r")
    assert len(seen) == 1

    seen.clear()
    with (
        client([error(503, "not_ready")] * 4, seen) as c,
        pytest.raises(vc.ServiceUnavailableError),
    ):
        c.outcome(question="q", response="r")
    assert len(seen) == FAST.attempts


def test_a_body_that_does_not_match_the_model_is_a_typed_error() -> None:
    seen: list[httpx.Request] = []
    bad = httpx.Response(200, json={"score": "high"})
    with (
        client([bad], seen) as c,
        pytest.raises(vc.ResponseValidationError, match="OutcomeResponse"),
    ):
        c.outcome(question="q", response="r")


def test_requests_are_validated_before_sending() -> None:
    seen: list[httpx.Request] = []
    with client([], seen) as c, pytest.raises(ValueError, match="samples"):
        c.outcome(question="q", response="r", samples=0)
    assert seen == []


async def test_the_async_client_retries_with_one_key_too() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.ConnectError("refused"),
        error(429, "overloaded", **{"Retry-After": "0"}),
        httpx.Response(200, json=OUTCOME_BODY),
    ]
    transport = httpx.MockTransport(scripted(answers, seen))
    async with vc.AsyncClient("http://svc", transport=transport, retry=FAST) as c:
        out = await c.outcome(question="q", response="r")
    assert out.verdict == 1
    assert len(seen) == 3
    assert len({r.headers[vc.IDEMPOTENCY_HEADER] for r in seen}) == 1


def test_compare_posts_the_set_fields_and_returns_the_typed_answer() -> None:
    seen: list[httpx.Request] = []
    with client([httpx.Response(200, json=COMPARE_BODY)], seen) as c:
        out = c.compare(question="q", responses=["a", "b"], debias="swap", return_reads=True)
    assert isinstance(out, m.CompareResponse)
    assert out.ranking == [0, 1]
    assert out.preferences[0][1] == 0.6
    assert out.reads is not None
    assert [r.order for r in out.reads] == [[0, 1], [1, 0]]
    (sent,) = seen
    assert (sent.method, sent.url.path) == ("POST", "/v1/judge/compare")
    assert sent.headers[vc.IDEMPOTENCY_HEADER]
    assert json.loads(sent.read()) == {
        "question": "q",
        "responses": ["a", "b"],
        "debias": "swap",
        "return_reads": True,
    }


def test_compare_takes_a_request_model_and_validates_it_before_sending() -> None:
    seen: list[httpx.Request] = []
    request = m.CompareRequest(question="q", responses=["a", "b", "c"], mode="listwise")
    with client([httpx.Response(200, json=COMPARE_BODY)], seen) as c:
        c.compare(request, idempotency_key="k")
    assert seen[0].headers[vc.IDEMPOTENCY_HEADER] == "k"
    assert json.loads(seen[0].read())["mode"] == "listwise"
    seen.clear()
    with client([], seen) as c, pytest.raises(ValueError, match="mode"):
        c.compare(question="q", responses=["a", "b"], mode="roundrobin")
    assert seen == []


async def test_the_async_client_compares_too() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(503, "not_ready"),
        httpx.Response(200, json=COMPARE_BODY),
    ]
    transport = httpx.MockTransport(scripted(answers, seen))
    async with vc.AsyncClient("http://svc", transport=transport, retry=FAST) as c:
        out = await c.compare(question="q", responses=["a", "b"])
    assert out.position_consistency == 1.0
    assert [r.url.path for r in seen] == ["/v1/judge/compare"] * 2
    assert len({r.headers[vc.IDEMPOTENCY_HEADER] for r in seen}) == 1


def test_sync_and_async_clients_have_the_same_methods_and_signatures() -> None:
    def public(cls: type) -> dict[str, inspect.Signature]:
        names = [n for n, f in vars(cls).items() if callable(f) and not n.startswith("_")]
        return {
            n: inspect.signature(getattr(cls, n)) for n in names if n not in ("close", "aclose")
        }

    sync, asyn = public(vc.Client), public(vc.AsyncClient)
    assert set(sync) == set(asyn)
    names = {"outcome", "process", "split", "score", "rerank", "compare", "result", "mcq_answer"}
    assert names <= set(sync)
    for name in sync:
        assert inspect.iscoroutinefunction(getattr(vc.AsyncClient, name)), name
        assert list(sync[name].parameters) == list(asyn[name].parameters), name


def test_timeouts_are_explicit() -> None:
    with vc.Client() as c:
        timeout = c._http.timeout
    assert (timeout.connect, timeout.read) == (5.0, 330.0)
    assert vc.DEFAULT_TIMEOUT.read is not None
    assert vc.DEFAULT_TIMEOUT.read > 300
