"""The worker's HTTP side port: ``/metrics`` plus ``/health`` and ``/ready`` for probes.

A `verifier worker` serves no API, yet Kubernetes and Docker need to ask it whether it is
alive and whether its engine is up (the API's ``/health`` and ``/ready`` answer that for
``verifier serve``). This is prometheus_client's WSGI server with those two paths in front;
every other path is the metrics text: the worker's own, then the process-wide registry where
vLLM's engine in this process keeps its metrics (as the API's ``/metrics`` does).

Example:
    >>> state = ProbeState()  # doctest: +SKIP
    >>> start_probe_server(9101, registry, state)  # doctest: +SKIP
    >>> state.ready = True  # after the engine scored its probe judgment  # doctest: +SKIP
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import ThreadingWSGIServer

StartResponse = Callable[..., Any]


@dataclass
class ProbeState:
    """Read by the probe thread, written by the worker's event loop (a bool is atomic)."""

    ready: bool = False


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Probes every few seconds would flood the log."""


def probe_app(registry: CollectorRegistry, state: ProbeState) -> Callable[..., Iterable[bytes]]:
    """WSGI app: /health 200 while the process runs, /ready 200 once the engine is up."""

    def metrics(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        data = generate_latest(registry) + generate_latest(REGISTRY)
        headers = [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(data)))]
        start_response("200 OK", headers)
        return [data]

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/health":
            return _json(start_response, "200 OK", {"status": "ok"})
        if path == "/ready":
            if state.ready:
                return _json(start_response, "200 OK", {"status": "ready"})
            return _json(start_response, "503 Service Unavailable", {"status": "starting"})
        return metrics(environ, start_response)

    return app


def _json(start_response: StartResponse, status: str, body: dict[str, str]) -> list[bytes]:
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    start_response(status, headers)
    return [data]


def start_probe_server(port: int, registry: CollectorRegistry, state: ProbeState) -> None:
    """Serve on every interface (probes and scrapers come from outside the pod) in a daemon
    thread; raises OSError if the port is taken."""
    server = make_server(
        "", port, probe_app(registry, state), ThreadingWSGIServer, handler_class=_QuietHandler
    )
    threading.Thread(target=server.serve_forever, name="probe-server", daemon=True).start()
