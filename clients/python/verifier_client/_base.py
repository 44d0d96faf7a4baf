"""What the sync and async clients share: endpoints, request building, response parsing.

Only the I/O differs between ``Client`` and ``AsyncClient`` (as in httpx); everything here is
pure. Adding an endpoint is one ``Endpoint`` line here and one short method in each client.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from verifier_client import models as m
from verifier_client.errors import (
    APIConnectionError,
    APITimeoutError,
    ResponseValidationError,
    error_from_response,
)

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# The service ends a job at its own deadline (300 s by default, answered 504), so the read
# timeout sits above it; connecting is quick or the service is not there.
DEFAULT_TIMEOUT = httpx.Timeout(330.0, connect=5.0)
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(frozen=True, slots=True)
class Endpoint(Generic[Req, Resp]):
    method: str
    path: str
    request: type[Req] | None
    response: type[Resp] | None


OUTCOME = Endpoint("POST", "/v1/judge/outcome", m.OutcomeRequest, m.OutcomeResponse)
PROCESS = Endpoint("POST", "/v1/judge/process", m.ProcessRequest, m.ProcessResponse)
SPLIT = Endpoint("POST", "/v1/split", m.SplitRequest, m.SplitResponse)
SCORE = Endpoint("POST", "/v1/score", m.ScoreRequest, m.ScoreResponse)
RERANK = Endpoint("POST", "/v1/rerank", m.RerankRequest, m.RerankResponse)
COMPARE = Endpoint("POST", "/v1/judge/compare", m.CompareRequest, m.CompareResponse)
DECIDE = Endpoint("POST", "/v1/decisions", m.DecisionRequest, m.DecisionResponse)
REWARDS = Endpoint("POST", "/v1/rewards", m.RewardsRequest, m.RewardsResponse)
MCQ_ANSWER = Endpoint("POST", "/v1/mcq/answer", m.MCQAnswerRequest, m.MCQAnswerResponse)
MCQ_BATCH = Endpoint("POST", "/v1/mcq/answer/batch", m.MCQBatchRequest, m.MCQBatchResponse)
CALIBRATE = Endpoint("POST", "/v1/mcq/calibrations", m.CalibrationRequest, m.CalibrationResponse)
MCQ_AUDIT = Endpoint("POST", "/v1/mcq/audit", m.AuditRequest, m.AuditResponse)
POPMCQ = Endpoint("POST", "/v1/mcq/popmcq", m.PopMCQRequest, m.PopMCQResponse)
CALIBRATIONS: Endpoint[BaseModel, m.CalibrationList] = Endpoint(
    "GET", "/v1/mcq/calibrations", None, m.CalibrationList
)
CALIBRATION: Endpoint[BaseModel, m.Calibration] = Endpoint(
    "GET", "/v1/mcq/calibrations/{id}", None, m.Calibration
)
DELETE_CALIBRATION: Endpoint[BaseModel, BaseModel] = Endpoint(
    "DELETE", "/v1/mcq/calibrations/{id}", None, None
)
FIT_PROBABILITY = Endpoint(
    "POST",
    "/v1/calibrations",
    m.ProbabilityCalibrationRequest,
    m.ProbabilityCalibrationResponse,
)
PROBABILITY_CALIBRATIONS: Endpoint[BaseModel, m.ProbabilityCalibrationList] = Endpoint(
    "GET", "/v1/calibrations", None, m.ProbabilityCalibrationList
)
PROBABILITY_CALIBRATION: Endpoint[BaseModel, m.ProbabilityCalibration] = Endpoint(
    "GET", "/v1/calibrations/{id}", None, m.ProbabilityCalibration
)
DELETE_PROBABILITY_CALIBRATION: Endpoint[BaseModel, BaseModel] = Endpoint(
    "DELETE", "/v1/calibrations/{id}", None, None
)
CALIBRATION_DEFAULTS: Endpoint[BaseModel, m.CalibrationDefaults] = Endpoint(
    "GET", "/v1/calibrations/defaults", None, m.CalibrationDefaults
)
# {id} is the target here: the one path parameter the request builder fills
SET_CALIBRATION_DEFAULT = Endpoint(
    "PUT", "/v1/calibrations/defaults/{id}", m.CalibrationDefault, m.CalibrationDefaults
)
CLEAR_CALIBRATION_DEFAULT: Endpoint[BaseModel, BaseModel] = Endpoint(
    "DELETE", "/v1/calibrations/defaults/{id}", None, None
)
MODELS: Endpoint[BaseModel, m.ModelList] = Endpoint("GET", "/v1/models", None, m.ModelList)
READY: Endpoint[BaseModel, m.Readiness] = Endpoint("GET", "/ready", None, m.Readiness)


@dataclass(frozen=True, slots=True)
class Prepared:
    method: str
    path: str
    json: Any
    headers: dict[str, str]


def build_request(
    endpoint: Endpoint[Any, Any],
    request: BaseModel | None,
    fields: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    path_id: str | None = None,
) -> Prepared:
    """Validate the body against the request model and fix the idempotency key once.

    The key is made here, before the first attempt, so every retry of this call carries the
    same one and the service runs (and charges) it once. Only set fields are sent: the
    service's defaults apply to the rest.
    """
    path = endpoint.path.format(id=path_id) if path_id is not None else endpoint.path
    if endpoint.request is None:
        return Prepared(endpoint.method, path, None, {})
    if request is not None and fields:
        raise TypeError("pass either a request model or keyword fields, not both")
    if request is None:
        request = endpoint.request.model_validate(fields)
    elif not isinstance(request, endpoint.request):
        raise TypeError(f"expected {endpoint.request.__name__}, got {type(request).__name__}")
    body = request.model_dump(mode="json", exclude_unset=True, by_alias=True)
    key = idempotency_key or uuid.uuid4().hex
    return Prepared(endpoint.method, path, body, {IDEMPOTENCY_HEADER: key})


def parse_response(endpoint: Endpoint[Any, Resp], response: httpx.Response) -> Resp | None:
    """The typed body of a 2xx answer; an error answer raises from the exception tree."""
    if not response.is_success:
        raise error_from_response(response)
    if endpoint.response is None:
        return None
    try:
        return endpoint.response.model_validate_json(response.content)
    except ValidationError as exc:
        raise ResponseValidationError(
            f"{endpoint.method} {endpoint.path}: the answer does not match "
            f"{endpoint.response.__name__}: {exc}"
        ) from exc


def transport_error(exc: httpx.TransportError) -> APIConnectionError:
    """httpx's transport failure as ours; only read/write timeouts count as timeouts."""
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout):
        return APITimeoutError(f"{type(exc).__name__}: {exc}")
    return APIConnectionError(f"{type(exc).__name__}: {exc}")


def default_headers(api_key: str | None, extra: dict[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": "verifier-client"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


def parse_json_object(response: httpx.Response) -> dict[str, Any]:
    """An untyped 2xx JSON object (stored results have the shape of their endpoint)."""
    if not response.is_success:
        raise error_from_response(response)
    try:
        body = response.json()
    except ValueError as exc:
        raise ResponseValidationError("the answer is not JSON") from exc
    if not isinstance(body, dict):
        raise ResponseValidationError("the answer is not a JSON object")
    return body
