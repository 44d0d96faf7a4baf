"""Open-loop load: requests at a fixed arrival rate for a fixed time, whatever the answers do.

A closed loop (N clients, each waiting for its answer) slows down with the server and hides
its queueing: coordinated omission. Here the i-th request is scheduled at ``start + i / rate``
(or at Poisson arrivals with that mean rate) and its latency is counted from that scheduled
time, so time spent waiting for a free connection or for a late event loop is in the figures.
The latency from the actual send is reported next to it (``service_latency_ms``).

Bounded: at most ``max_requests`` requests, ``duration_s`` of sending, and ``timeout_s`` for
the last answers; targets must be loopback unless ``allow_remote`` is set.

Example:
    >>> cfg = LoadConfig(url="http://127.0.0.1:8000", rate=4, duration_s=5)  # doctest: +SKIP
    >>> result = asyncio.run(run_load(cfg, builtin_payloads(Settings(), 8)))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx

from loadtests.stats import summary
from service.config import Settings
from service.evals.data import load_gsm8k_solutions

Arrival = Literal["uniform", "poisson"]
MAX_REQUESTS_CAP: Final = 100_000
DEFAULT_ENDPOINT: Final = "/v1/judge/outcome"


@dataclass(frozen=True)
class LoadConfig:
    url: str = "http://127.0.0.1:8000"
    endpoint: str = DEFAULT_ENDPOINT
    rate: float = 4.0
    duration_s: float = 30.0
    max_requests: int | None = None
    timeout_s: float = 60.0
    max_inflight: int = 256
    arrival: Arrival = "uniform"
    seed: int = 0
    allow_remote: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.duration_s <= 0 or self.timeout_s <= 0:
            raise ValueError("rate, duration and timeout must be positive")
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        if self.planned > MAX_REQUESTS_CAP:
            raise ValueError(
                f"{self.planned} requests planned; the cap is {MAX_REQUESTS_CAP} (lower the rate, "
                "the duration or max_requests)"
            )

    @property
    def planned(self) -> int:
        """Requests to schedule: rate x duration, at most max_requests."""
        n = max(1, int(self.rate * self.duration_s))
        return min(n, self.max_requests) if self.max_requests else n


@dataclass
class Sample:
    index: int
    scheduled_s: float  # since the start
    sent_s: float
    latency_ms: float  # from the scheduled time (coordinated omission included)
    service_latency_ms: float  # from the actual send
    status: str  # HTTP status code, or "timeout" / "transport"


def check_target(url: str, allow_remote: bool) -> None:
    """Refuse a non-loopback target unless explicitly allowed (a load test is an attack on
    someone else's server)."""
    host = urlsplit(url).hostname or ""
    if allow_remote:
        return
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as exc:
        raise ValueError(f"cannot resolve {host!r}: {exc}") from exc
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise ValueError(f"{host} is not a loopback address; pass --allow-remote to load it")


def builtin_payloads(settings: Settings, n: int, data: Path | None = None) -> list[dict[str, Any]]:
    """Direct outcome judgments of GSM8K example solutions (every candidate of the first
    questions), each scored afresh so the judgment cache does not answer the load."""
    path = data or settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    items = load_gsm8k_solutions(path, limit=max(1, (n + 3) // 4))
    bodies = [
        {"question": item.question, "response": c.solution, "cache": False}
        for item in items
        for c in item.candidates
    ]
    return bodies[:n]


def read_payloads(path: Path) -> list[dict[str, Any]]:
    """A JSON object (one body), a JSON list of bodies, or JSON lines; used in turn."""
    text = path.read_text(encoding="utf-8").strip()
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        loaded = [json.loads(line) for line in text.splitlines() if line.strip()]
    bodies = loaded if isinstance(loaded, list) else [loaded]
    if not bodies or not all(isinstance(b, dict) for b in bodies):
        raise ValueError(f"{path}: expected a JSON object, a list of objects or JSON lines")
    return bodies


def schedule(cfg: LoadConfig) -> list[float]:
    """Send offsets in seconds: every 1/rate, or exponential gaps with that mean (Poisson);
    all within the duration."""
    if cfg.arrival == "uniform":
        return [i / cfg.rate for i in range(cfg.planned)]
    rng = random.Random(cfg.seed)
    offsets: list[float] = []
    t = 0.0
    while len(offsets) < cfg.planned:
        if t >= cfg.duration_s:
            break
        offsets.append(t)
        t += rng.expovariate(cfg.rate)
    return offsets


async def run_load(
    cfg: LoadConfig,
    payloads: Sequence[dict[str, Any]],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Send the schedule, wait for the answers (at most timeout_s after the last send)."""
    check_target(cfg.url, cfg.allow_remote)
    if not payloads:
        raise ValueError("no payloads")
    offsets = schedule(cfg)
    samples: list[Sample] = []
    limits = httpx.Limits(
        max_connections=cfg.max_inflight, max_keepalive_connections=cfg.max_inflight
    )
    async with httpx.AsyncClient(
        base_url=cfg.url.rstrip("/"), timeout=cfg.timeout_s, limits=limits, headers=cfg.headers
    ) as client:
        start = time.perf_counter()

        async def one(i: int, offset: float) -> None:
            sent = time.perf_counter()
            try:
                response = await client.post(cfg.endpoint, json=payloads[i % len(payloads)])
                status = str(response.status_code)
            except httpx.TimeoutException:
                status = "timeout"
            except httpx.TransportError:
                status = "transport"
            done = time.perf_counter()
            samples.append(
                Sample(
                    index=i,
                    scheduled_s=offset,
                    sent_s=sent - start,
                    latency_ms=(done - (start + offset)) * 1000,
                    service_latency_ms=(done - sent) * 1000,
                    status=status,
                )
            )
            if progress is not None:
                progress(len(samples), len(offsets))

        tasks = []
        for i, offset in enumerate(offsets):
            delay = start + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, offset)))
        sending_s = time.perf_counter() - start
        # The client's own timeout bounds every request; this bounds the whole wait.
        _, pending = await asyncio.wait(tasks, timeout=cfg.timeout_s + 5) if tasks else ((), ())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        wall_s = time.perf_counter() - start
    return report(cfg, offsets, samples, sending_s, wall_s)


def report(
    cfg: LoadConfig,
    offsets: Sequence[float],
    samples: list[Sample],
    sending_s: float,
    wall_s: float,
) -> dict[str, Any]:
    """The result JSON: configuration, counts, latency percentiles, errors, every sample."""
    samples.sort(key=lambda s: s.index)
    ok = [s for s in samples if s.status.startswith("2")]
    statuses = Counter(s.status for s in samples)
    statuses.update(
        {"unanswered": len(offsets) - len(samples)} if len(offsets) > len(samples) else {}
    )
    last_done = max((s.scheduled_s + s.latency_ms / 1000 for s in ok), default=0.0)
    lags = [(s.sent_s - s.scheduled_s) * 1000 for s in samples]
    return {
        "config": {**asdict(cfg), "headers": sorted(cfg.headers)},  # header values may be keys
        "offered_rate": len(offsets) / cfg.duration_s,
        "scheduled": len(offsets),
        "answered": len(samples),
        "ok": len(ok),
        "errors": len(offsets) - len(ok),
        "status_counts": dict(sorted(statuses.items())),
        "errors_by_status": {k: v for k, v in sorted(statuses.items()) if not k.startswith("2")},
        "throughput_ok_per_s": len(ok) / last_done if last_done > 0 else 0.0,
        "sending_s": sending_s,
        "wall_s": wall_s,
        "latency_ms": summary([s.latency_ms for s in ok]),
        "service_latency_ms": summary([s.service_latency_ms for s in ok]),
        "send_lag_ms": summary(lags),
        "samples": [asdict(s) for s in samples],
    }
