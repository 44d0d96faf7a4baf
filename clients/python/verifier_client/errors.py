"""The client's exception tree, mapped from the service's ``{"error": {"type", "message"}}``.

VerifierError
 +-- APIConnectionError          the request did not get an answer (after the retries)
 |    +-- APITimeoutError        ... because a timeout expired
 +-- ResponseValidationError     the answer did not match the response model
 +-- APIStatusError              the service answered 4xx/5xx (``status``, ``type``, ``message``)
      +-- BadRequestError        4xx
      |    +-- AuthenticationError      401 unauthorized
      |    +-- NotFoundError            404 not_found
      |    |    +-- ModelNotFoundError          model_not_found
      |    +-- MethodNotAllowedError    405 method_not_allowed
      |    +-- PayloadTooLargeError     413 payload_too_large
      |    +-- InvalidRequestError      422 invalid_request
      |    |    +-- ContextTooLongError         context_too_long
      |    |    +-- BudgetTooSmallError         budget_too_small
      |    |    +-- UnknownCalibrationError     unknown_calibration
      |    |    +-- CalibrationMismatchError    calibration_mismatch
      |    |    +-- CalibrationUnfittableError  calibration_unfittable
      |    |    +-- NotServedByModelError       not_served_by_model
      |    |    +-- CodeExecutionDisabledError  code_execution_disabled
      |    +-- ClientDisconnectedError  499 client_disconnected (the service's log only: the
      |    |                            caller had hung up)
      |    +-- RateLimitError           429 (retried first; carries ``retry_after``)
      |         +-- OverloadedError             overloaded
      |         +-- QuotaExhaustedError         quota_exhausted
      |         +-- ConcurrencyLimitedError     concurrency_limited
      +-- ServerError            5xx
           +-- InternalServerError      500 internal_error
           +-- BadGatewayError          502
           |    +-- EngineFailureError          engine_error
           |    +-- JobFailedError              job_failed
           +-- ServiceUnavailableError  503 (retried first)
           |    +-- NotReadyError               not_ready
           |    +-- QueueUnavailableError       queue_unavailable
           |    +-- EngineUnavailableError      engine_unavailable
           +-- DeadlineExceededError    504 deadline_exceeded

Each service error type has its own class, named after the service's (``NotServedByModel`` ->
``NotServedByModelError``); the tests hold the two trees together.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadGatewayError",
    "BadRequestError",
    "BudgetTooSmallError",
    "CalibrationMismatchError",
    "CalibrationUnfittableError",
    "ClientDisconnectedError",
    "ContextTooLongError",
    "DeadlineExceededError",
    "EngineFailureError",
    "EngineUnavailableError",
    "InternalServerError",
    "InvalidRequestError",
    "JobFailedError",
    "MethodNotAllowedError",
    "ModelNotFoundError",
    "NotFoundError",
    "NotReadyError",
    "NotServedByModelError",
    "CodeExecutionDisabledError",
    "OverloadedError",
    "ConcurrencyLimitedError",
    "PayloadTooLargeError",
    "QueueUnavailableError",
    "QuotaExhaustedError",
    "RateLimitError",
    "ResponseValidationError",
    "ServerError",
    "ServiceUnavailableError",
    "UnknownCalibrationError",
    "VerifierError",
    "error_from_response",
]


class VerifierError(Exception):
    """Base of every error the client raises."""


class APIConnectionError(VerifierError):
    """No answer from the service (connection refused or reset, DNS...)."""


class APITimeoutError(APIConnectionError):
    """A connect, read, write or pool timeout expired."""


class ResponseValidationError(VerifierError):
    """The service answered 2xx with a body that does not match the response model."""


class APIStatusError(VerifierError):
    """The service answered with an error status and its error body."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(f"HTTP {status} {error_type}: {message}")
        self.status = status
        self.type = error_type
        self.message = message
        self.retry_after = retry_after
        self.response = response


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(BadRequestError):
    pass


class NotFoundError(BadRequestError):
    pass


class ModelNotFoundError(NotFoundError):
    pass


class MethodNotAllowedError(BadRequestError):
    pass


class PayloadTooLargeError(BadRequestError):
    pass


class InvalidRequestError(BadRequestError):
    pass


class ContextTooLongError(InvalidRequestError):
    pass


class BudgetTooSmallError(InvalidRequestError):
    pass


class UnknownCalibrationError(InvalidRequestError):
    pass


class CalibrationMismatchError(InvalidRequestError):
    pass


class CalibrationUnfittableError(InvalidRequestError):
    pass


class NotServedByModelError(InvalidRequestError):
    pass


class CodeExecutionDisabledError(InvalidRequestError):
    pass


class ClientDisconnectedError(BadRequestError):
    pass


class RateLimitError(BadRequestError):
    pass


class OverloadedError(RateLimitError):
    pass


class QuotaExhaustedError(RateLimitError):
    pass


class ConcurrencyLimitedError(RateLimitError):
    pass


class ServerError(APIStatusError):
    pass


class InternalServerError(ServerError):
    pass


class BadGatewayError(ServerError):
    pass


class EngineFailureError(BadGatewayError):
    pass


class JobFailedError(BadGatewayError):
    pass


class ServiceUnavailableError(ServerError):
    pass


class NotReadyError(ServiceUnavailableError):
    pass


class QueueUnavailableError(ServiceUnavailableError):
    pass


class EngineUnavailableError(ServiceUnavailableError):
    pass


class DeadlineExceededError(ServerError):
    pass


# The error type decides first (it is more precise), then the status.
_BY_TYPE: dict[str, type[APIStatusError]] = {
    "unauthorized": AuthenticationError,
    "not_found": NotFoundError,
    "model_not_found": ModelNotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "payload_too_large": PayloadTooLargeError,
    "invalid_request": InvalidRequestError,
    "context_too_long": ContextTooLongError,
    "budget_too_small": BudgetTooSmallError,
    "unknown_calibration": UnknownCalibrationError,
    "calibration_mismatch": CalibrationMismatchError,
    "calibration_unfittable": CalibrationUnfittableError,
    "not_served_by_model": NotServedByModelError,
    "code_execution_disabled": CodeExecutionDisabledError,
    "overloaded": OverloadedError,
    "quota_exhausted": QuotaExhaustedError,
    "concurrency_limited": ConcurrencyLimitedError,
    "internal_error": InternalServerError,
    "engine_error": EngineFailureError,
    "job_failed": JobFailedError,
    "not_ready": NotReadyError,
    "queue_unavailable": QueueUnavailableError,
    "engine_unavailable": EngineUnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "client_disconnected": ClientDisconnectedError,
}
_BY_STATUS: dict[int, type[APIStatusError]] = {
    401: AuthenticationError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: RateLimitError,
    499: ClientDisconnectedError,
    500: InternalServerError,
    502: BadGatewayError,
    503: ServiceUnavailableError,
    504: DeadlineExceededError,
}


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the service sends seconds; an HTTP date is not used)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _error_fields(response: httpx.Response) -> tuple[str, str]:
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("type", "unknown")), str(error.get("message", ""))
    return "unknown", response.text[:500]


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for an error response (its class from the error type, else the status)."""
    error_type, message = _error_fields(response)
    status = response.status_code
    cls = _BY_TYPE.get(error_type) or _BY_STATUS.get(status)
    if cls is None:
        cls = BadRequestError if status < 500 else ServerError
    return cls(status, error_type, message, retry_after=_retry_after(response), response=response)
