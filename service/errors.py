"""One exception tree, one mapping to HTTP status.

ServiceError                      (500 internal_error)
 +-- InvalidRequest               422 invalid_request      a field is wrong; names the fix
 |    +-- ContextTooLong          422 context_too_long     prompt + new tokens exceed the model
 |    +-- UnknownCalibration      422 unknown_calibration  no such calibration for this tenant
 |    +-- CalibrationMismatch     422 calibration_mismatch fitted for another method, K or model
 +-- PayloadTooLarge              413 payload_too_large    a text or the body is over the limit
 +-- NotFound                     404 not_found            no such result (or another tenant's)
 +-- NotReady                     503 not_ready            the engine is still starting
 +-- QueueUnavailable             503 queue_unavailable    Redis cannot be reached
 +-- Overloaded                   429 overloaded           queue full (carries Retry-After)
 +-- DeadlineExceeded             504 deadline_exceeded    the request's deadline passed
 +-- EngineFailure                502 engine_error         the model backend failed
 +-- EngineUnavailable            503 engine_unavailable   the engine died; retry elsewhere
 +-- JobFailed                    502 job_failed           the job crashed max_deliveries workers

Every error reaches the client as ``{"error": {"type": ..., "message": ...}}``.
"""

from __future__ import annotations


class ServiceError(Exception):
    status = 500
    type = "internal_error"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class InvalidRequest(ServiceError):
    status = 422
    type = "invalid_request"


class ContextTooLong(InvalidRequest):
    type = "context_too_long"


class UnknownCalibration(InvalidRequest):
    type = "unknown_calibration"


class CalibrationMismatch(InvalidRequest):
    type = "calibration_mismatch"


class PayloadTooLarge(ServiceError):
    status = 413
    type = "payload_too_large"


class NotFound(ServiceError):
    status = 404
    type = "not_found"


class NotReady(ServiceError):
    status = 503
    type = "not_ready"


class QueueUnavailable(ServiceError):
    status = 503
    type = "queue_unavailable"


class JobFailed(ServiceError):
    status = 502
    type = "job_failed"


class Overloaded(ServiceError):
    status = 429
    type = "overloaded"


class DeadlineExceeded(ServiceError):
    status = 504
    type = "deadline_exceeded"


class EngineFailure(ServiceError):
    status = 502
    type = "engine_error"


class EngineUnavailable(ServiceError):
    status = 503
    type = "engine_unavailable"


def error_body(error_type: str, message: str) -> dict[str, dict[str, str]]:
    """The one error shape."""
    return {"error": {"type": error_type, "message": message}}
