"""create_app(), its lifespan and the worker process: the only composition root.

API process: the HTTP server is up at once (``/health``). With an in-process worker (the
default) the engine starts in the background and ``/ready`` turns 200 after it answered a
probe judgment; API-only (``serve --no-worker``) is ready when Redis answers. Every
model-using request goes through the job queue: local (asyncio) by default, Redis Streams when
``VERIFIER_REDIS_URL`` is set. vLLM spawns processes, so it is built here, never at import.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from service.api.deps import AppState
from service.api.errors import install_error_handlers
from service.api.middleware import AuthMiddleware, BodyLimitMiddleware, MetricsMiddleware
from service.api.routes import (
    calibrations,
    decisions,
    health,
    judge,
    mcq,
    pooling,
    rerank,
    results,
    reward,
    rewards,
    run_code,
    score,
    split,
)
from service.api.routes import metrics as metrics_api
from service.api.schema import state_limits
from service.config import Settings, get_settings
from service.engine.base import Engine
from service.engine.health import watch_engine
from service.ops.aio import CLOSE_TIMEOUT_S, bounded, wait_bounded
from service.ops.diagnostics import install_dump_signals, watch_loop
from service.ops.probe_server import ProbeState, start_probe_server
from service.ops.telemetry import Metrics
from service.protocol import OutcomeRequest
from service.queue.base import JobQueue
from service.queue.local import LocalQueue
from service.queue.worker import Worker
from service.sandbox.runner import Sandbox
from service.scoring.ties import default_tolerance
from service.serving.cache import JudgmentStore, MemoryStore, RedisStore
from service.serving.context import current_tenant
from service.serving.handler import JobRunner
from service.serving.services import Services
from service.stores import probability_calibrations
from service.stores.calibrations import CalibrationStore, MemoryCalibrations, RedisCalibrations
from service.stores.concurrency import RedisSlots
from service.stores.connection import connect
from service.stores.probability_calibrations import ProbabilityCalibrationStore
from service.stores.tenants import DEFAULT_TENANT

logger = logging.getLogger(__name__)

# `verifier worker` metrics ports when none is set: the first free one of these.
METRICS_PORT = 9101
METRICS_PORTS = 100

PROBE = OutcomeRequest(question="What is 2 + 2?", response="2 + 2 = 4. The answer is 4.")


def consumer_name(role: str) -> str:
    """Unique per process: Redis tracks pending jobs per consumer."""
    return f"{role}-{socket.gethostname()}-{os.getpid()}"


def make_queue(settings: Settings, role: str) -> JobQueue:
    """The queue of the model ``settings`` serve (one of ``models``: its own stream)."""
    if settings.redis_url:
        from service.queue.redis_streams import RedisQueue

        consumer = consumer_name(role)
        return RedisQueue(
            settings.redis_url, settings.queue, settings.redis, consumer, settings.queue_name
        )
    return LocalQueue(settings.queue)


def make_redis(settings: Settings) -> Redis | None:
    """Client for keys, quotas, the judgment cache and calibrations (the queue keeps its own
    connections); None without ``VERIFIER_REDIS_URL``."""
    if not settings.redis_url:
        return None
    return connect(settings.redis_url, settings.redis.timeout_s)


def _start_vllm(settings: Settings) -> Engine:
    from service.engine.models import model_architectures, resolve_kind, resolve_model
    from service.engine.vllm_engine import VLLMEngine

    model = resolve_model(settings)
    architectures = model_architectures(model)
    kind = resolve_kind(settings.engine.kind, architectures)
    if kind == "generative":
        return VLLMEngine.start(settings, model)
    from service.engine.pooling_engine import PoolingEngine

    return PoolingEngine.start(settings, model, kind, architectures)


async def start_engine(settings: Settings) -> Engine:
    """The configured backend: in-process vLLM, or a remote OpenAI-compatible server (then
    only its tokenizer is loaded here; vLLM is never imported)."""
    if settings.engine.backend == "openai":
        from service.engine.models import resolve_model
        from service.engine.openai_engine import OpenAIEngine

        # httpx logs every call at INFO: one line per engine call would flood the log.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        cfg = settings.engine.openai
        tokenizer = cfg.tokenizer or await asyncio.to_thread(resolve_model, settings)
        return await OpenAIEngine.start(settings, tokenizer)
    return await asyncio.to_thread(_start_vllm, settings)


async def start_audit_judge(settings: Settings) -> Engine:
    """The audit's remote judge (``audit.judge``), named by the model its server serves."""
    from service.engine.models import resolve_model
    from service.engine.openai_engine import OpenAIEngine

    logging.getLogger("httpx").setLevel(logging.WARNING)
    cfg = settings.audit.judge
    tokenizer = cfg.tokenizer or await asyncio.to_thread(resolve_model, settings)
    engine = await OpenAIEngine.start(
        settings, tokenizer, cfg=cfg, name=cfg.model, env="VERIFIER_AUDIT__JUDGE"
    )
    logger.info("audit judge: %s", engine.model_info().path)
    return engine


def make_judgment_store(settings: Settings, redis: Redis | None) -> JudgmentStore | None:
    """The judgment cache's store: Redis (shared by every worker) when configured; it uses
    the process's Redis client, which its owner closes."""
    cfg = settings.cache
    if not cfg.enabled:
        return None
    if redis is not None:
        return RedisStore(redis, settings.redis.prefix, cfg.max_entries, cfg.ttl_s)
    return MemoryStore(cfg.max_entries, cfg.ttl_s)


def make_calibrations(settings: Settings, redis: Redis | None) -> CalibrationStore:
    """Calibrations in Redis when configured (shared, kept across restarts), else memory."""
    if redis is not None:
        return RedisCalibrations(redis, settings.redis.prefix)
    return MemoryCalibrations()


def make_probability_calibrations(
    settings: Settings, redis: Redis | None
) -> ProbabilityCalibrationStore:
    """Probability calibrations in Redis when configured, else memory (API process only:
    the worker fits, the API stores and applies)."""
    if redis is not None:
        return probability_calibrations.redis_store(redis, settings.redis.prefix)
    return probability_calibrations.memory_store()


def tie_tolerance(settings: Settings) -> float:
    """The ranking tie tolerance: the setting, else one from the engine's dtype (a remote
    engine's is unknown: taken as bf16, the coarsest)."""
    if settings.ranking.tie_tolerance is not None:
        return settings.ranking.tie_tolerance
    if settings.engine.backend != "vllm":
        return default_tolerance("bfloat16")
    from service.engine.device import detect_device, resolve_dtype

    return default_tolerance(resolve_dtype(settings.engine.dtype, detect_device()))


async def start_services(
    settings: Settings,
    metrics: Metrics | None = None,
    calibrations: CalibrationStore | None = None,
    redis: Redis | None = None,
) -> Services:
    """Prepare the model, start the engine, score a probe judgment."""
    # Fail closed before the engine's long start: code execution on needs a working sandbox.
    sandbox = (
        await asyncio.to_thread(Sandbox.start, settings.code) if settings.code.enabled else None
    )
    judge = await start_audit_judge(settings) if settings.audit.remote_judge else None
    try:
        engine = await start_engine(settings)
    except BaseException:
        if judge is not None:
            await bounded(judge.shutdown(), CLOSE_TIMEOUT_S, "closing the audit judge")
        raise
    store = make_judgment_store(settings, redis)
    if store is not None and metrics is not None:
        metrics.watch_cache(store, settings.model_name)
    services = Services.build(
        engine,
        settings.model_name,
        store,
        calibrations,
        settings.reward,
        settings.rules,
        settings.engine,
        tie_tolerance=tie_tolerance(settings),
        sandbox=sandbox,
        audit_judge=judge,
    )
    # The probe runs outside any job, so it names its tenant as a job would (the tenant has no
    # default: a job path that forgets to set it must fail, not share another tenant's state).
    token = current_tenant.set(DEFAULT_TENANT)
    try:
        probe = await services.outcome.judge(PROBE.model_copy(update={"cache": False}))
    except Exception:
        await services.close()
        raise
    finally:
        current_tenant.reset(token)
    logger.info("engine ready; probe score %.4f", probe.score)
    return services


def make_worker(
    settings: Settings,
    queue: JobQueue,
    services: Services,
    metrics: Metrics,
    on_stall: Callable[[str], None] | None = None,
) -> Worker:
    bound = metrics.worker(settings.model_name)
    runner = JobRunner(services, bound, settings.queue.fault_crash_kind)
    return Worker(
        queue,
        runner,
        settings.queue,
        on_batch=bound.record_batch,
        on_progress=bound.record_progress,
        on_inflight=bound.inflight.set,
        on_stall=on_stall,
    )


async def _bring_up(state: AppState, run_worker: bool, hosted: Sequence[str] | None) -> None:
    try:
        if run_worker:
            # One engine and worker per model, started one after another (each start takes
            # both cores for a while).
            for name, settings in state.settings.by_model().items():
                if hosted is None or name in hosted:
                    await _host(state, name, settings)
        else:
            await state.queue_of(None).depth()  # Redis answers
    except Exception as exc:
        logger.exception("start failed")
        state.status, state.detail = "failed", f"start failed: {exc}"
        return
    state.status, state.detail = "ready", None


async def _host(state: AppState, name: str, settings: Settings) -> None:
    """Start one model's engine and its worker on its queue, in this process."""
    services = await start_services(settings, state.metrics, state.calibrations, state.redis)
    state.hosted[name] = services
    worker = make_worker(
        settings,
        state.queue_of(name),
        services,
        state.metrics,
        on_stall=lambda reason: _worker_failed(state, reason),
    )
    state.workers.append(worker)
    task = asyncio.create_task(worker.run(), name=f"worker-{name}")
    task.add_done_callback(lambda _: _worker_ended(state, worker))
    state.tasks.add(task)
    _watch_engine(state, worker, services, settings)


def _watch_engine(state: AppState, worker: Worker, services: Services, settings: Settings) -> None:
    """Start the engine health loop of one model an API process hosts."""
    interval = settings.queue.engine_health_s
    if not interval:
        return

    def dead(reason: str) -> None:
        reason = f"engine dead: {reason}"
        _worker_failed(state, reason)  # /ready 503 from now on
        worker.fail(reason)  # no new pulls; the jobs in flight fail with 503 engine_unavailable
        state.exit_code = 1
        # Exit after a moment, so probes see the 503 and in-flight requests get their answers.
        asyncio.get_running_loop().call_later(
            settings.queue.engine_dead_exit_s, _request_exit, state
        )

    engine = services.engine
    task = asyncio.create_task(
        watch_engine(engine, interval, state.stopping, dead), name="engine-health"
    )
    state.tasks.add(task)


def _request_exit(state: AppState) -> None:
    if state.request_exit is not None:
        logger.critical("engine dead; the server exits 1")
        state.request_exit()


def _worker_ended(state: AppState, worker: Worker) -> None:
    # A worker that gave up (wedged engine) takes the process out of rotation: /ready 503.
    if worker.failure is not None:
        _worker_failed(state, worker.failure)


def _worker_failed(state: AppState, reason: str) -> None:
    state.status, state.detail = "failed", f"worker stopped: {reason}"


def _exit_stalled(reason: str) -> None:
    """A worker process whose loop hung exits at once: its supervisor restarts it, other
    workers reclaim its jobs, and the reaper ends its engine."""
    logger.critical("worker loop stalled (%s); exiting 1", reason)
    sys.stderr.flush()
    os._exit(1)


def start_metrics_server(
    port: int | None, registry: CollectorRegistry, probes: ProbeState | None = None
) -> int | None:
    """Serve ``registry`` (and ``/health``, ``/ready`` from ``probes``) on ``port``; None takes
    the first free port from 9101; 0 is off."""
    if port == 0:
        return None
    candidates = [port] if port is not None else range(METRICS_PORT, METRICS_PORT + METRICS_PORTS)
    for candidate in candidates:
        try:
            start_probe_server(candidate, registry, probes or ProbeState())
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        return candidate
    if port is not None:
        raise SystemExit(
            f"error: port {port} of VERIFIER_QUEUE__WORKER_METRICS_PORT is in use; pick "
            "another, or unset it to take the first free port from 9101"
        )
    raise SystemExit(
        f"error: ports {METRICS_PORT}-{METRICS_PORT + METRICS_PORTS - 1} are all in use; set "
        "VERIFIER_QUEUE__WORKER_METRICS_PORT"
    )


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: AppState = app.state.svc
    for name, settings in state.settings.by_model().items():
        state.queues[name] = make_queue(settings, "api")
        state.metrics.watch_queue(state.queues[name], name)
    state.redis = make_redis(state.settings)
    state.calibrations = make_calibrations(state.settings, state.redis)
    state.probability_calibrations = make_probability_calibrations(state.settings, state.redis)
    if state.redis is not None:
        timeout = state.settings.limits.request_timeout_s
        state.reward_slots = RedisSlots(state.redis, state.settings.redis.prefix, timeout)
    bring_up = asyncio.create_task(_bring_up(state, app.state.run_worker, app.state.hosted))
    try:
        yield
    finally:
        bring_up.cancel()
        await asyncio.gather(bring_up, return_exceptions=True)
        await _shutdown(state)


async def _shutdown(state: AppState) -> None:
    """Drain the worker, then close everything; every step is bounded."""
    settings = state.settings
    state.stopping.set()
    for worker in state.workers:
        worker.stop()  # drain: finish and complete the jobs in flight
    if state.tasks:
        # The worker's watchdog ends every job by its deadline plus the grace.
        drain_s = settings.limits.request_timeout_s + settings.queue.stuck_grace_s + 5
        await wait_bounded(list(state.tasks), drain_s, "draining the worker")
    for services in state.hosted.values():
        await services.close()  # the engine's shutdown is bounded inside
    state.hosted.clear()
    for queue in state.queues.values():
        await bounded(queue.close(), CLOSE_TIMEOUT_S, "closing the queue")
    if state.redis is not None:
        await bounded(state.redis.aclose(), CLOSE_TIMEOUT_S, "closing Redis")


def _state_limits_in_schema(app: FastAPI, settings: Settings) -> None:
    """/openapi.json states each request limit as these settings make it."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = state_limits(FastAPI.openapi(app), settings.limits)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(
    settings: Settings | None = None,
    *,
    run_worker: bool = True,
    hosted: Sequence[str] | None = None,
) -> FastAPI:
    """Build the ASGI app. Nothing heavy happens until the lifespan starts. With a worker,
    each served model runs in-process, or those ``hosted`` names."""
    settings = settings or get_settings()
    metrics = Metrics()
    metrics.reward_items_limit.set(settings.reward.max_concurrent_items)
    app = FastAPI(
        title="verifier-service",
        version="0.1.0",
        summary="Judges LLM outputs with evaluation-time compute.",
        lifespan=_lifespan,
    )
    app.state.svc = AppState(settings=settings, metrics=metrics)
    app.state.run_worker = run_worker
    app.state.hosted = hosted
    app.include_router(health.router)
    app.include_router(metrics_api.router)
    app.include_router(results.router)
    app.include_router(judge.router)
    app.include_router(split.router)
    app.include_router(score.router)
    app.include_router(rerank.router)
    app.include_router(mcq.router)
    app.include_router(calibrations.router)
    app.include_router(reward.router)
    app.include_router(rewards.router)
    app.include_router(run_code.router)
    app.include_router(pooling.router)
    app.include_router(decisions.router)
    _state_limits_in_schema(app, settings)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_body_bytes)
    if settings.auth.enabled:
        app.add_middleware(AuthMiddleware, state=app.state.svc)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


async def run_worker_process(settings: Settings) -> int:
    """`verifier worker`: engine + Redis queue + worker loop + its own /metrics port.

    SIGTERM/SIGINT drain: stop reading, finish and complete the batch, shut the engine down.
    SIGUSR1/SIGUSR2 dump thread/task stacks. Returns the exit code: 0 after a drain, 1 when
    the worker gave up on a wedged engine (a supervisor restarts it).
    """
    if not settings.redis_url:
        raise SystemExit("verifier worker needs VERIFIER_REDIS_URL (the API and workers share it)")
    loop = asyncio.get_running_loop()
    install_dump_signals(loop)
    metrics = Metrics()
    probes = ProbeState()
    port = start_metrics_server(settings.queue.worker_metrics_port, metrics.registry, probes)
    logger.info("worker %s metrics on port %s", consumer_name("worker"), port or "(off)")
    queue = make_queue(settings, "worker")
    metrics.watch_queue(queue, settings.model_name)
    redis = make_redis(settings)
    services = await start_services(settings, metrics, make_calibrations(settings, redis), redis)
    worker = make_worker(settings, queue, services, metrics, on_stall=_exit_stalled)

    def drain() -> None:
        probes.ready = False  # out of rotation while the jobs in flight finish
        worker.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, drain)
    done = asyncio.Event()
    watchdogs = []
    if settings.queue.worker_stall_s:
        stall_s = settings.queue.worker_stall_s
        watchdogs.append(asyncio.create_task(watch_loop(stall_s, done), name="watchdog"))
    if settings.queue.engine_health_s:
        # A dead engine: stop pulling, answer the jobs in flight 503, exit 1 (below).
        health = watch_engine(services.engine, settings.queue.engine_health_s, done, worker.fail)
        watchdogs.append(asyncio.create_task(health, name="engine-health"))
    probes.ready = True
    logger.info("worker %s ready (metrics port %s)", consumer_name("worker"), port or "off")
    try:
        await worker.run()
    finally:
        done.set()  # the watchdog disarms and ends on its own (bounded: it wakes every second)
        if watchdogs:
            await wait_bounded(watchdogs, CLOSE_TIMEOUT_S, "the loop watchdog")
        await services.close()
        await bounded(queue.close(), CLOSE_TIMEOUT_S, "closing the queue")
        if redis is not None:
            await bounded(redis.aclose(), CLOSE_TIMEOUT_S, "closing Redis")
    if worker.failure is not None:
        logger.error("worker stopped: %s", worker.failure)
        return 1
    return 0
