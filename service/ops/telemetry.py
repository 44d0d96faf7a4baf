"""Prometheus metrics, all defined here with explicit buckets, recorded where events happen."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from service.stores.tenants import TenantLabels


class UsageLike(Protocol):
    prompt_tokens: int
    generated_tokens: int
    cached_tokens: int
    engine_calls: int

    @property
    def total_tokens(self) -> int: ...


# The result label of verifier_budget_tokens_total: estimate admitted, actual spent, refused.
BudgetResult = Literal["granted", "spent", "refused"]

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TOKEN_BUCKETS = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 262144)
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUEUE_COUNTERS = ("redelivered", "dead", "dropped_expired", "duplicate_results")
CACHE_COUNTERS = ("hits", "misses", "evictions")
CACHE_ERROR_OPS = ("lookup", "write")  # the judgment cache's CacheOp values


class Metrics:
    """The service's metrics on their own registry (tests build as many as they like)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.tenant_label = TenantLabels()  # bounded label values for the per-tenant metrics
        r = self.registry
        self.requests = Counter(
            "verifier_requests", "HTTP requests", ["endpoint", "status"], registry=r
        )
        self.duration = Histogram(
            "verifier_request_duration_seconds",
            "HTTP request duration",
            ["endpoint"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.eval_tokens = Counter(
            "verifier_eval_tokens",
            "Tokens spent on evaluation",
            ["endpoint", "model", "kind"],
            registry=r,
        )
        self.request_eval_tokens = Histogram(
            "verifier_request_eval_tokens",
            "Evaluation tokens (prompt + generated) per request",
            ["endpoint"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.engine_calls = Counter(
            "verifier_engine_calls", "Engine calls", ["endpoint"], registry=r
        )
        self.budget_tokens = Counter(
            "verifier_budget_tokens",
            "Token budget by tenant: granted (estimate admitted), spent (actual), refused",
            ["tenant", "result"],
            registry=r,
        )
        self.budget_decisions = Counter(
            "verifier_budget_decisions",
            "Requests over their max_eval_tokens: refused (422) or degraded to direct",
            ["tenant", "decision"],
            registry=r,
        )
        # The queue's and the workers' metrics carry the model (VERIFIER_MODELS' name, or the
        # one served model's): each model has its own queue and workers.
        self.queue_wait = Histogram(
            "verifier_queue_wait_seconds",
            "Time from submit to a worker starting the job",
            ["model"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "verifier_queue_depth", "Jobs accepted and not yet completed", ["model"], registry=r
        )
        self.queue_full = Counter(
            "verifier_queue_full",
            "Requests refused 429 because their model's queue held max_queue_depth jobs",
            ["model"],
            registry=r,
        )
        self.batch_size = Histogram(
            "verifier_batch_size",
            "Jobs per worker batch",
            ["model"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.batch_tokens = Histogram(
            "verifier_batch_tokens",
            "Estimated tokens per worker batch",
            ["model"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.worker_progress = Gauge(
            "verifier_worker_progress_timestamp_seconds",
            "Unix time this process's worker loop of the model last pulled or finished a batch",
            ["model"],
            registry=r,
        )
        self.worker_inflight = Gauge(
            "verifier_worker_inflight_jobs",
            "Jobs this process's worker of the model is running",
            ["model"],
            registry=r,
        )
        self.jobs_cancelled = Counter(
            "verifier_jobs_cancelled",
            "Jobs cancelled before their answer (client_disconnect: the caller hung up)",
            ["reason"],
            registry=r,
        )
        self.reward_items_in_flight = Gauge(
            "verifier_reward_items_in_flight",
            "Reward items (samples) in flight through this API process, by tenant",
            ["tenant"],
            registry=r,
        )
        self.reward_items_limit = Gauge(
            "verifier_reward_items_limit",
            "Reward items one tenant may have in flight over every API process (0: no cap)",
            registry=r,
        )
        self.reward_concurrency_refused = Counter(
            "verifier_reward_concurrency_refused",
            "Reward calls refused at the tenant's cap on items in flight (429)",
            ["tenant"],
            registry=r,
        )
        self._queues: list[tuple[str, object]] = []
        self._caches: list[tuple[str, object]] = []
        self.registry.register(_Counters("verifier_jobs", QUEUE_COUNTERS, self._queues))
        self.registry.register(_Counters("verifier_judgment_cache", CACHE_COUNTERS, self._caches))
        self.registry.register(_CacheErrors(self._caches))

    def budget(self, tenant: str, result: BudgetResult) -> Counter:
        """The budget counter of ``tenant`` (its bounded label) and ``result``."""
        child: Counter = self.budget_tokens.labels(self.tenant_label(tenant), result)
        return child

    def decision(self, tenant: str, decision: str) -> Counter:
        """The budget-decision counter of ``tenant`` (its bounded label): refused or degraded."""
        child: Counter = self.budget_decisions.labels(self.tenant_label(tenant), decision)
        return child

    def record_usage(self, endpoint: str, model: str, usage: UsageLike) -> None:
        self.eval_tokens.labels(endpoint, model, "prompt").inc(usage.prompt_tokens)
        self.eval_tokens.labels(endpoint, model, "generated").inc(usage.generated_tokens)
        self.eval_tokens.labels(endpoint, model, "cached").inc(usage.cached_tokens)
        self.request_eval_tokens.labels(endpoint).observe(usage.total_tokens)
        self.engine_calls.labels(endpoint).inc(usage.engine_calls)

    def worker(self, model: str) -> WorkerMetrics:
        """The metrics of one model's worker and jobs in this process."""
        return WorkerMetrics(
            queue_wait=self.queue_wait.labels(model),
            batch_size=self.batch_size.labels(model),
            batch_tokens=self.batch_tokens.labels(model),
            progress=self.worker_progress.labels(model),
            inflight=self.worker_inflight.labels(model),
        )

    def watch_queue(self, queue: object, model: str) -> None:
        """Export a model's queue's plain int counters (read at scrape time, so never stale)."""
        self._queues.append((model, queue))

    def watch_cache(self, store: object, model: str) -> None:
        """Export a model's judgment store's hits, misses, evictions and tolerated errors by op
        (read at scrape time)."""
        self._caches.append((model, store))

    def render(self) -> bytes:
        """Our metrics, then the process-wide registry (vLLM's engine metrics live there)."""
        return generate_latest(self.registry) + generate_latest(REGISTRY)


@dataclass(frozen=True)
class WorkerMetrics:
    """One model's worker metrics (:meth:`Metrics.worker`), its label bound."""

    queue_wait: Histogram
    batch_size: Histogram
    batch_tokens: Histogram
    progress: Gauge
    inflight: Gauge

    def record_batch(self, size: int, tokens: int) -> None:
        self.batch_size.observe(size)
        self.batch_tokens.observe(tokens)

    def record_progress(self) -> None:
        self.progress.set_to_current_time()


class _Counters(Collector):
    """``<prefix>_<name>_total{model}`` summed over the plain int attributes of each model's
    watched objects: verifier_jobs_{redelivered,dead,dropped_expired,duplicate_results}_total
    and verifier_judgment_cache_{hits,misses,evictions}_total."""

    def __init__(
        self, prefix: str, names: tuple[str, ...], sources: list[tuple[str, object]]
    ) -> None:
        self._prefix = prefix
        self._names = names
        self._sources = sources

    def collect(self) -> Iterator[CounterMetricFamily]:
        what = self._prefix.removeprefix("verifier_").replace("_", " ")
        models = list(dict.fromkeys(model for model, _ in self._sources))
        for name in self._names:
            family = CounterMetricFamily(
                f"{self._prefix}_{name}", f"{what} {name.replace('_', ' ')}", labels=["model"]
            )
            for model in models:
                watched = (s for m, s in self._sources if m == model)
                family.add_metric([model], sum(int(getattr(s, name, 0)) for s in watched))
            yield family


class _CacheErrors(Collector):
    """``verifier_judgment_cache_errors_total{op}``: store failures the judgment cache
    tolerated (Redis unreachable; the judgment was scored afresh), summed over the watched
    stores' ``errors`` dicts, by operation (lookup, write)."""

    def __init__(self, sources: list[tuple[str, object]]) -> None:
        self._sources = sources

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "verifier_judgment_cache_errors",
            "judgment cache store failures tolerated (scored afresh), by operation",
            labels=["op"],
        )
        for op in CACHE_ERROR_OPS:
            total = sum(int(getattr(s, "errors", {}).get(op, 0)) for _, s in self._sources)
            family.add_metric([op], total)
        yield family
