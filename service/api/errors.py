"""The one renderer from an error to an HTTP response, and the app's exception handlers.

Every error body is built here from the protocol's ``ErrorResponse`` model, and every header
an error carries (``Retry-After``, ``WWW-Authenticate``, ``Allow``) is set here. Framework
errors (validation, an unparsable body, unknown routes and methods, anything unhandled) are
first mapped to the matching ``ServiceError``, so they take the same path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.errors import (
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    ServiceError,
    Unauthorized,
)
from service.protocol import ErrorDetail, ErrorResponse

logger = logging.getLogger(__name__)

UNPARSABLE_BODY = "the request body could not be parsed; send one JSON object encoded as UTF-8"
INTERNAL_ERROR = "internal error; see server logs"

# The OpenAPI ``responses`` of the routers: what each route may answer besides its model.
Responses = dict[int | str, dict[str, object]]
# Every route that submits a job (404: a `model` naming an adapter not served).
ERRORS: Responses = {
    code: {"model": ErrorResponse} for code in (401, 404, 413, 422, 429, 502, 503, 504)
}
# Routes that look a tenant's record up by id (another tenant's id is a 404 too).
NOT_FOUND: Responses = {404: {"model": ErrorResponse}}
# With auth on, every route but /health and /ready answers 401 to a missing or bad key.
UNAUTHORIZED: Responses = {401: {"model": ErrorResponse}}


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` value: whole seconds, at least 1 (the client waits at least that)."""
    return str(max(1, round(seconds)))


def error_response(exc: ServiceError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``exc`` as ``{"error": {"type", "message"}}`` with its status and headers.

    Example::

        error_response(Overloaded("the queue is full", retry_after=1.0))
        # 429, Retry-After: 1, {"error": {"type": "overloaded", "message": "the queue is full"}}
    """
    all_headers = {**exc.headers, **(headers or {})}
    if exc.retry_after:
        all_headers["Retry-After"] = retry_after(exc.retry_after)
    if exc.status == Unauthorized.status:
        all_headers["WWW-Authenticate"] = "Bearer"  # RFC 6750: the scheme a 401 asks for
    body = ErrorResponse(error=ErrorDetail(type=exc.type, message=exc.message))
    return JSONResponse(body.model_dump(mode="json"), exc.status, headers=all_headers or None)


def validation_error(exc: RequestValidationError) -> InvalidRequest:
    """FastAPI's validation errors as one ``InvalidRequest`` naming each field."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return InvalidRequest("; ".join(parts) or "invalid request")


def http_error(exc: StarletteHTTPException) -> ServiceError:
    """Starlette's HTTP errors (404, 405, FastAPI's 400 for a body it cannot parse)."""
    if exc.status_code == 400:  # FastAPI's "error parsing the body" (not UTF-8, say): a 422
        return InvalidRequest(UNPARSABLE_BODY)
    if exc.status_code == NotFound.status:
        return NotFound(str(exc.detail))
    if exc.status_code == MethodNotAllowed.status:
        return MethodNotAllowed(str(exc.detail))
    other = ServiceError(str(exc.detail))
    other.status, other.type = exc.status_code, "http_error"
    return other


def _allowed_methods(app: FastAPI, request: Request) -> str:
    """The methods of every route whose path matches (Starlette names only the first's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    """Route every error the app raises through :func:`error_response`."""

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = http_error(exc)
        headers = dict(exc.headers or {}) if error.status == exc.status_code else {}
        if exc.status_code == MethodNotAllowed.status:
            # Allow lists every route of the path (RFC 9110), not only the first one's.
            headers["Allow"] = _allowed_methods(app, request)
        return error_response(error, headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return error_response(ServiceError(INTERNAL_ERROR))
