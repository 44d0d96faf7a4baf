"""ASGI middleware: body-size limit (413 before parsing) and request metrics."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.deps import AppState
from service.api.errors import error_response
from service.errors import PayloadTooLarge, ServiceError, Unauthorized
from service.ops.telemetry import Metrics
from service.stores.auth import authenticate


class BodyTooLarge(Exception):
    pass


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"request body exceeds {limit} bytes; send less or raise VERIFIER_LIMITS__MAX_BODY_BYTES"
    )


class BodyLimitMiddleware:
    """Refuse bodies over ``limit`` bytes, by Content-Length or while streaming (chunked)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _declared_length(scope) > self.limit:
            await error_response(_too_large(self.limit))(scope, receive, send)
            return
        exchange = _LimitedExchange(self.limit, scope, receive, send)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except BodyTooLarge:
            await exchange.refuse()


class _LimitedExchange:
    """One request's receive and send under a body limit met while the body streams in."""

    def __init__(self, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        self.limit, self._scope, self._receive, self._send = limit, scope, receive, send
        self.seen = 0
        self.started = self.over = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.limit:
                self.over = True
                raise BodyTooLarge
        return message

    async def send(self, message: Message) -> None:
        if self.over:
            # FastAPI caught the refusal inside its body read and answers with its own error
            # (a 400, then our 422): the client gets the 413 instead, and nothing of that.
            if message["type"] == "http.response.start":
                await self.refuse()
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def refuse(self) -> None:
        if not self.started:
            self.started = True
            await error_response(_too_large(self.limit))(self._scope, self._receive, self._send)


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return 0


class MetricsMiddleware:
    """Count requests and time them, labelled by route template (not raw path: bounded labels)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            endpoint = _endpoint(scope)
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.duration.labels(endpoint).observe(time.perf_counter() - start)


def _endpoint(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


OPEN_PATHS = frozenset({"/health", "/ready"})


class AuthMiddleware:
    """Bearer API keys on every route but liveness and readiness (docs and metrics included).

    The key's record (tenant, quota) is attached as ``request.state.api_key``.
    """

    def __init__(self, app: ASGIApp, state: AppState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                header = value.decode("latin-1")
        try:
            if self.state.redis is None:
                raise Unauthorized(
                    "auth is enabled but no Redis is configured (VERIFIER_REDIS_URL)"
                )
            record = await authenticate(self.state.redis, self.state.settings.redis.prefix, header)
        except ServiceError as exc:
            await error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["api_key"] = record
        await self.app(scope, receive, send)
