"""Client of verifier-service: ``Client``, ``AsyncClient``, typed models and errors.

>>> from verifier_client import Client
>>> with Client("http://127.0.0.1:8000") as client:  # doctest: +SKIP
...     print(client.outcome(question="What is 2 + 2?", response="4").score)
"""

from verifier_client import models
from verifier_client._base import DEFAULT_BASE_URL, DEFAULT_TIMEOUT, IDEMPOTENCY_HEADER
from verifier_client._client import AsyncClient, Client
from verifier_client._retry import RetryPolicy
from verifier_client.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadGatewayError,
    BadRequestError,
    BudgetTooSmallError,
    CalibrationMismatchError,
    ClientDisconnectedError,
    ContextTooLongError,
    DeadlineExceededError,
    EngineFailureError,
    EngineUnavailableError,
    InternalServerError,
    InvalidRequestError,
    JobFailedError,
    MethodNotAllowedError,
    NotFoundError,
    NotReadyError,
    NotServedByModelError,
    OverloadedError,
    PayloadTooLargeError,
    QueueUnavailableError,
    QuotaExhaustedError,
    RateLimitError,
    ResponseValidationError,
    ServerError,
    ServiceUnavailableError,
    UnknownCalibrationError,
    VerifierError,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "IDEMPOTENCY_HEADER",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadGatewayError",
    "BadRequestError",
    "BudgetTooSmallError",
    "CalibrationMismatchError",
    "ClientDisconnectedError",
    "Client",
    "ContextTooLongError",
    "DeadlineExceededError",
    "EngineFailureError",
    "EngineUnavailableError",
    "InternalServerError",
    "InvalidRequestError",
    "JobFailedError",
    "MethodNotAllowedError",
    "NotFoundError",
    "NotReadyError",
    "NotServedByModelError",
    "OverloadedError",
    "PayloadTooLargeError",
    "QueueUnavailableError",
    "QuotaExhaustedError",
    "RateLimitError",
    "ResponseValidationError",
    "RetryPolicy",
    "ServerError",
    "ServiceUnavailableError",
    "UnknownCalibrationError",
    "VerifierError",
    "models",
]
