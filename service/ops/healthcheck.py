"""Container health check: exit 0 if this container's process answers ``/health``.

``python -m service.ops.healthcheck`` asks the API port (``verifier serve``) and, if nothing
listens there, the worker's probe port (``verifier worker``), so one image-level
HEALTHCHECK fits every role the image runs.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from service.config import get_settings

TIMEOUT_S = 3.0
# service.app.METRICS_PORT, the first port a worker tries; not imported, since importing the
# app (FastAPI and the whole service) every 15 s would cost more than the check itself.
WORKER_PORT = 9101


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def main() -> int:
    settings = get_settings()
    worker_port = settings.queue.worker_metrics_port or WORKER_PORT
    ports = (settings.port, worker_port)
    return 0 if any(healthy(f"http://127.0.0.1:{p}/health") for p in ports) else 1


if __name__ == "__main__":
    sys.exit(main())
