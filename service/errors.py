"""One exception tree, one mapping to HTTP status.

ServiceError                      (500 internal_error)
 +-- InvalidRequest               422 invalid_request      a field is wrong; names the fix
 |    +-- ContextTooLong          422 context_too_long     prompt + new tokens exceed the model
 |    +-- UnknownCalibration      422 unknown_calibration  no such calibration for this tenant
 |    +-- CalibrationMismatch     422 calibration_mismatch fitted for another method, K, target,
 |    |                                                     mode or model
 |    +-- CalibrationUnfittable   422 calibration_unfittable the labelled reads cannot be fitted
 |    +-- BudgetTooSmall          422 budget_too_small     the estimate is over max_eval_tokens
 |    +-- NotServedByModel        422 not_served_by_model  the served model's kind cannot answer
 +-- PayloadTooLarge              413 payload_too_large    a text or the body is over the limit
 +-- Unauthorized                 401 unauthorized         no, a wrong or a revoked API key
 +-- NotFound                     404 not_found            no such route or result (or another
 |                                                         tenant's)
 +-- MethodNotAllowed             405 method_not_allowed   the path has no route for the method
 +-- NotReady                     503 not_ready            the engine is still starting
 +-- QueueUnavailable             503 queue_unavailable    Redis cannot be reached
 +-- Overloaded                   429 overloaded           queue full (carries Retry-After)
 +-- QuotaExhausted               429 quota_exhausted      the tenant's token quota is used up
 |                                                         (Retry-After: the next window)
 +-- ConcurrencyLimited           429 concurrency_limited  the tenant's reward items in flight
                                                           are at the cap (Retry-After: 1)
 +-- DeadlineExceeded             504 deadline_exceeded    the request's deadline passed
 +-- EngineFailure                502 engine_error         the model backend failed
 +-- EngineUnavailable            503 engine_unavailable   the engine died; retry elsewhere
 +-- JobFailed                    502 job_failed           the job crashed max_deliveries workers
 +-- ClientDisconnected           499 client_disconnected  the caller hung up; the job was
                                                           cancelled (logged, never sent)

Every error reaches the client as ``{"error": {"type": ..., "message": ...}}``, rendered by
``service.api.errors`` (this module stays free of the web framework: workers import it too).
"""

from __future__ import annotations


class ServiceError(Exception):
    status = 500
    type = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.headers = headers or {}  # sent with the error (besides Retry-After)


class InvalidRequest(ServiceError):
    status = 422
    type = "invalid_request"


class ContextTooLong(InvalidRequest):
    type = "context_too_long"


class UnknownCalibration(InvalidRequest):
    type = "unknown_calibration"


class CalibrationMismatch(InvalidRequest):
    type = "calibration_mismatch"


class CalibrationUnfittable(InvalidRequest):
    type = "calibration_unfittable"


class BudgetTooSmall(InvalidRequest):
    """The request's estimate is over its ``max_eval_tokens`` (and could not be degraded)."""

    type = "budget_too_small"

    def __init__(self, message: str, *, estimate: int, limit: int) -> None:
        super().__init__(message)
        self.estimate = estimate
        self.limit = limit


class NotServedByModel(InvalidRequest):
    """The request needs what the served model's kind does not do (generation on a pooling
    reward model, class logits on a generative judge)."""

    type = "not_served_by_model"


class CodeExecutionDisabled(InvalidRequest):
    """A request sent code to run, and this service runs none."""

    type = "code_execution_disabled"

    # The message travels with the job's error and is rebuilt from it in the API process.
    def __init__(
        self,
        message: str = "code execution is off on this service: start it (the API and its "
        "workers) with VERIFIER_CODE__ENABLED=true on a host with bubblewrap "
        "(docs/reliability.md, 'The code sandbox'); /v1/models says whether it is on",
    ) -> None:
        super().__init__(message)


class PayloadTooLarge(ServiceError):
    status = 413
    type = "payload_too_large"


class NotFound(ServiceError):
    status = 404
    type = "not_found"


class ModelNotFound(NotFound):
    """A request named a model or adapter this deployment does not serve (OpenAI's type)."""

    type = "model_not_found"


class Unauthorized(ServiceError):
    status = 401
    type = "unauthorized"


class MethodNotAllowed(ServiceError):
    status = 405
    type = "method_not_allowed"


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


class ConcurrencyLimited(ServiceError):
    """The tenant's reward items in flight are at the cap; ``retry_after`` is short."""

    status = 429
    type = "concurrency_limited"


class QuotaExhausted(ServiceError):
    """The tenant's quota for this window is used up; ``retry_after`` = seconds to the next."""

    status = 429
    type = "quota_exhausted"


class ClientDisconnected(ServiceError):
    """The HTTP client left before its answer: the job is cancelled. Nobody reads the
    response, so the status (nginx's 499) only shows in logs and access metrics."""

    status = 499
    type = "client_disconnected"


class DeadlineExceeded(ServiceError):
    status = 504
    type = "deadline_exceeded"


class EngineFailure(ServiceError):
    status = 502
    type = "engine_error"


class EngineUnavailable(ServiceError):
    status = 503
    type = "engine_unavailable"
