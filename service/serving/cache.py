"""The judgment cache: identical judgments are scored once.

A judgment is identified by the model (name, path, dtype), its prompt token ids, verdict and
rationale ids, rationale budget, temperature, seed and stop strings, and by the scope (the
tenant) it was asked in, so one tenant never learns from a hit what another asked. Greedy and
seeded judgments are cached; sampled ones without a seed never are (each must be a fresh draw).

:class:`CachingEngine` wraps any :class:`~service.engine.base.Engine`: a call found in the
store is answered from it; duplicates inside one ``judge()`` list, and identical calls in
flight in this process (other jobs of the same worker), are scored once. A cached answer costs
no engine tokens: its usage is ``cached_judgments=1`` and zero tokens.

Stores: :class:`MemoryStore` (LRU with TTL, per process) and :class:`RedisStore` (shared by
every worker; TTL per entry and a size cap kept with a sorted index). A store Redis cannot
reach never fails a judgment: the call is scored fresh, the failure is counted
(``verifier_judgment_cache_errors_total{op}``) and logged at most once per
``WARN_INTERVAL_S`` and operation. Any other error of a store is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from redis.asyncio import Redis

from service.engine.adapters import current_adapter
from service.engine.base import (
    Engine,
    GenerateCall,
    GenerateResult,
    JudgeCall,
    JudgeResult,
    ModelInfo,
    OptionCall,
    OptionResult,
    PoolCall,
    PoolResult,
    SlotLogits,
    SpanCall,
    SpanResult,
    TokenUsage,
)
from service.scoring.tokenizer import Tokenizer
from service.serving.context import current_tenant
from service.stores.connection import is_unreachable
from service.stores.keys import RedisNames

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachedJudgment:
    logit: float
    rationale: str | None
    rationale_tokens: int
    rationale_finish: str | None

    @classmethod
    def of(cls, result: JudgeResult) -> CachedJudgment:
        return cls(result.logit, result.rationale, result.rationale_tokens, result.rationale_finish)

    def result(self) -> JudgeResult:
        return JudgeResult(
            logit=self.logit,
            rationale=self.rationale,
            rationale_tokens=self.rationale_tokens,
            rationale_finish=self.rationale_finish,
            usage=TokenUsage(cached_judgments=1),
        )

    def to_json(self) -> str:
        return json.dumps(
            [self.logit, self.rationale, self.rationale_tokens, self.rationale_finish]
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> CachedJudgment:
        logit, rationale, tokens, finish = json.loads(raw)
        return cls(float(logit), rationale, int(tokens), finish)


def cacheable(call: JudgeCall) -> bool:
    """Greedy or seeded: the same call must give the same answer."""
    return call.cache and (call.temperature == 0 or call.seed is not None)


def judgment_key(model: ModelInfo, scope: str, call: JudgeCall) -> str:
    identity = [
        model.name,
        model.path,
        model.dtype,
        current_adapter.get(),  # an adapter's answer never answers the base or another adapter
        scope,
        list(call.prompt_ids),
        list(call.verdict_ids),
        list(call.after_rationale_ids),
        call.reasoning_tokens,
        call.temperature,
        call.seed,
        list(call.stop),
    ]
    raw = json.dumps(identity, separators=(",", ":")).encode()
    return hashlib.blake2b(raw, digest_size=20).hexdigest()


# The store operations whose failures are tolerated (and counted, by op).
CacheOp = Literal["lookup", "write"]
# While Redis is down every judgment fails a lookup and a write: warn once per this long.
WARN_INTERVAL_S = 30.0


class JudgmentStore(Protocol):
    hits: int
    misses: int
    evictions: int
    errors: dict[CacheOp, int]  # tolerated store failures, by operation

    async def get_many(self, keys: Sequence[str]) -> list[CachedJudgment | None]: ...

    async def put_many(self, items: Sequence[tuple[str, CachedJudgment]]) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """An LRU of at most ``max_entries`` judgments, each kept ``ttl_s`` seconds."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        self._max = max_entries
        self._ttl = ttl_s
        self._data: OrderedDict[str, tuple[float, CachedJudgment]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.errors: dict[CacheOp, int] = {"lookup": 0, "write": 0}

    async def get_many(self, keys: Sequence[str]) -> list[CachedJudgment | None]:
        now = time.monotonic()
        found: list[CachedJudgment | None] = []
        for key in keys:
            entry = self._data.get(key)
            if entry is not None and entry[0] <= now:
                del self._data[key]  # expired
                entry = None
            if entry is not None:
                self._data.move_to_end(key)
            found.append(None if entry is None else entry[1])
        return found

    async def put_many(self, items: Sequence[tuple[str, CachedJudgment]]) -> None:
        expires = time.monotonic() + self._ttl
        for key, value in items:
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)
            self.evictions += 1

    async def close(self) -> None:
        self._data.clear()


# KEYS: index, entry keys... ARGV: ttl, max entries, now, values... Stores each entry with its
# TTL, indexes it by time, forgets index entries past the TTL, then evicts the oldest over the
# cap. Returns how many were evicted.
_PUT_LUA = """
local ttl, cap, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 2], 'EX', ttl)
  redis.call('ZADD', KEYS[1], now, KEYS[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
local over = redis.call('ZCARD', KEYS[1]) - cap
local evicted = 0
if over > 0 then
  local oldest = redis.call('ZPOPMIN', KEYS[1], over)
  for j = 1, #oldest, 2 do
    evicted = evicted + redis.call('DEL', oldest[j])
  end
end
redis.call('EXPIRE', KEYS[1], ttl)
return evicted
"""


class RedisStore:
    """Judgments in Redis, shared by every worker: ``EX ttl_s`` each, at most ``max_entries``."""

    def __init__(self, redis: Redis, prefix: str, max_entries: int, ttl_s: int) -> None:
        self._redis = redis
        self._names = RedisNames(prefix)
        self._max = max_entries
        self._ttl = ttl_s
        self._put = redis.register_script(_PUT_LUA)
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.errors: dict[CacheOp, int] = {"lookup": 0, "write": 0}

    async def get_many(self, keys: Sequence[str]) -> list[CachedJudgment | None]:
        if not keys:
            return []
        raw = await self._redis.mget([self._names.judgment(k) for k in keys])
        return [None if r is None else CachedJudgment.from_json(r) for r in raw]

    async def put_many(self, items: Sequence[tuple[str, CachedJudgment]]) -> None:
        if not items:
            return
        evicted = await self._put(
            keys=[self._names.judgment_index, *(self._names.judgment(k) for k, _ in items)],
            args=[self._ttl, self._max, time.time(), *(v.to_json() for _, v in items)],
        )
        self.evictions += int(evicted)

    async def close(self) -> None:
        """Nothing to release: the Redis client belongs to the process that passed it in."""


class CachingEngine:
    """An ``Engine`` that answers repeated judgments from a :class:`JudgmentStore`."""

    def __init__(self, engine: Engine, store: JudgmentStore) -> None:
        self._engine = engine
        self.store = store
        # Judgments being scored in this process right now, by key: later duplicates wait.
        self._inflight: dict[str, asyncio.Future[CachedJudgment]] = {}
        # Per op: when the last warning was logged, and the failures not logged since.
        self._warned_at: dict[CacheOp, float] = {}
        self._unlogged: dict[CacheOp, int] = {"lookup": 0, "write": 0}

    @property
    def tokenizer(self) -> Tokenizer:
        return self._engine.tokenizer

    def model_info(self) -> ModelInfo:
        return self._engine.model_info()

    async def generate(self, calls: Sequence[GenerateCall]) -> list[GenerateResult]:
        return await self._engine.generate(calls)

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> SlotLogits:
        return await self._engine.slot_logits(prompt_ids, slots)

    async def abort(self, request_id: str) -> None:
        await self._engine.abort(request_id)

    async def option_logprobs(self, calls: Sequence[OptionCall]) -> list[OptionResult]:
        return await self._engine.option_logprobs(calls)

    async def span_logprobs(self, calls: Sequence[SpanCall]) -> list[SpanResult]:
        return await self._engine.span_logprobs(calls)

    async def pool(self, calls: Sequence[PoolCall]) -> list[PoolResult]:
        return await self._engine.pool(calls)

    async def check_health(self) -> None:
        await self._engine.check_health()

    async def shutdown(self) -> None:
        await self._engine.shutdown()

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]:
        info, scope = self._engine.model_info(), current_tenant.get()
        keys = [judgment_key(info, scope, c) if cacheable(c) else None for c in calls]
        results: list[JudgeResult | None] = [None] * len(calls)
        owned: dict[str, asyncio.Future[CachedJudgment]] = {}
        first: dict[str, int] = {}  # owned key -> the call that scores it
        waits: list[tuple[int, asyncio.Future[CachedJudgment]]] = []
        for i, key in enumerate(keys):
            if key is None:
                continue
            shared = owned.get(key) or self._inflight.get(key)
            if shared is not None:
                waits.append((i, shared))  # scored once, by whoever asked first
            else:
                owned[key] = self._inflight[key] = asyncio.get_running_loop().create_future()
                first[key] = i
        try:
            await self._score_owned(calls, keys, owned, first, results)
        finally:
            for key, future in owned.items():
                self._inflight.pop(key, None)
                if not future.done():
                    future.cancel()  # waiters score it themselves (see _await_shared)
        for i, future in waits:
            results[i] = await self._await_shared(calls[i], future)
        self.store.hits += len(waits)
        return [r for r in results if r is not None]

    async def _score_owned(
        self,
        calls: Sequence[JudgeCall],
        keys: Sequence[str | None],
        owned: dict[str, asyncio.Future[CachedJudgment]],
        first: dict[str, int],
        results: list[JudgeResult | None],
    ) -> None:
        stored = await self._lookup(list(owned))
        for key, value in zip(owned, stored, strict=True):
            if value is not None:
                results[first[key]] = value.result()
                owned[key].set_result(value)
        self.store.hits += sum(v is not None for v in stored)
        fresh = [i for i, key in enumerate(keys) if key is None or i == first.get(key, -1)]
        fresh = [i for i in fresh if results[i] is None]
        if not fresh:
            return
        self.store.misses += sum(keys[i] is not None for i in fresh)
        scored = await self._engine.judge([calls[i] for i in fresh])
        new: list[tuple[str, CachedJudgment]] = []
        for i, result in zip(fresh, scored, strict=True):
            results[i] = result
            owner = keys[i]
            if owner is not None:
                value = CachedJudgment.of(result)
                owned[owner].set_result(value)
                new.append((owner, value))
        await self._store(new)

    async def _await_shared(
        self, call: JudgeCall, future: asyncio.Future[CachedJudgment]
    ) -> JudgeResult:
        try:
            return (await asyncio.shield(future)).result()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # The job that was scoring it gave up (its deadline): score it here instead.
            return (await self._engine.judge([call]))[0]

    async def _lookup(self, keys: list[str]) -> list[CachedJudgment | None]:
        try:
            return await self.store.get_many(keys)
        except Exception as exc:
            if not is_unreachable(exc):
                raise  # a bug, not an outage: a silent miss forever would hide it
            self._tolerate("lookup", exc)
            return [None] * len(keys)

    async def _store(self, items: list[tuple[str, CachedJudgment]]) -> None:
        try:
            await self.store.put_many(items)
        except Exception as exc:
            if not is_unreachable(exc):
                raise
            self._tolerate("write", exc)

    def _tolerate(self, op: CacheOp, exc: BaseException) -> None:
        """Count a store failure; warn at once, then at most once per ``WARN_INTERVAL_S``."""
        self.store.errors[op] += 1
        self._unlogged[op] += 1
        now = time.monotonic()
        last = self._warned_at.get(op)
        if last is not None and now - last < WARN_INTERVAL_S:
            return
        logger.warning(
            "judgment cache %s failed %d time(s) since the last warning; scoring afresh: %s",
            op,
            self._unlogged[op],
            exc,
        )
        self._warned_at[op] = now
        self._unlogged[op] = 0
