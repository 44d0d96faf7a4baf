"""Job queue on Redis Streams: API processes submit, worker processes pull and complete.

Redis key names are listed in :mod:`service.stores.keys`. The life of a job:

1. ``submit``: admission (depth vs ``max_queue_depth`` -> ``Overloaded``), then one Lua
   call that claims the idempotency record (``SET NX``) and ``XADD``s the job JSON, then
   ``BLPOP`` on the job's notify list in slices of at most 1 s until the deadline, then
   ``GET`` of the result. On expiry (or when the caller is cancelled) a cancel marker is
   set and the caller's idempotency record is released, then ``DeadlineExceeded``.
2. ``pull``: ``XAUTOCLAIM`` entries idle for ``claim_idle_ms`` (a dead worker's jobs; this
   counts as a delivery), then ``XREADGROUP >`` for new ones. Each candidate is checked
   against ``XPENDING`` (delivery count, still ours?) and its cancel marker: expired or
   cancelled jobs are acked and dropped, jobs delivered more than ``max_deliveries``
   times are dead-lettered with a ``job_failed`` result, the rest are batched.
3. ``complete``: one Lua call: ``SET result NX EX``; only if that won, ``LPUSH notify`` +
   ``EXPIRE``; then ``XACK``. The first result for a job wins.
4. ``renew``: a slow but alive worker resets the idle time of the entries it still owns
   with ``XCLAIM ... JUSTID`` (which does not increment the delivery counter), so a
   renewal is not a delivery, while a reclaim by another consumer is.

Depth is "accepted but not completed": the group's ``pending`` (delivered, not acked)
plus its ``lag`` (not yet delivered), from ``XINFO GROUPS``; ``XLEN`` when Redis cannot
compute the lag. The stream is trimmed (``XTRIM MINID``) to the oldest pending entry, or
past the last delivered one, at the start of a pull that follows acks.

Redis down: every command fails within about ``redis.timeout_s`` (connect and socket
timeouts; one immediate retry on a dropped connection) and surfaces as
``QueueUnavailable`` (503). redis-py pools reconnect on the next command, so the queue
recovers by itself once Redis is back; a lost consumer group is recreated.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from redis import exceptions as rex

from service.config import QueueSettings, RedisSettings
from service.errors import DeadlineExceeded, InvalidRequest, JobFailed, Overloaded, ServiceError
from service.queue.base import BatchLimits, Delivery, Job, JobResult, check_pull_args
from service.queue.redis_scripts import CANCEL_LUA, COMPLETE_LUA, RENEW_LUA, SUBMIT_LUA
from service.stores.connection import connect, unavailable
from service.stores.keys import DEAD_MAXLEN, GROUP, JOB_FIELD, RedisNames
from service.stores.tenants import check_tenant

logger = logging.getLogger(__name__)

# Longest single blocking call (BLPOP, XREADGROUP BLOCK); longer waits loop in slices.
SLICE_S = 1.0
RETRY_AFTER_S = 1.0

_Candidate = tuple[str, Job]  # (stream entry id, job)
HOUSEKEEPING_S = 1.0  # at most this often: trim the stream; look for idle jobs to reclaim


def _group_missing(exc: rex.ResponseError) -> bool:
    """The stream or its consumer group does not exist (first use, or Redis lost its data)."""
    message = str(exc)
    return "NOGROUP" in message or "no such key" in message.lower()


def _next_id(entry_id: str) -> str:
    """The smallest stream id greater than ``entry_id``."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def _stream_entries(reply: Any) -> list[Any]:
    """The (id, fields) pairs of a one-stream XREADGROUP reply (RESP2: [[stream, entries]])."""
    return list(reply[0][1]) if reply else []


class RedisQueue:
    """A :class:`~service.queue.base.JobQueue` on Redis Streams, shared by many processes.

    Example::

        queue = RedisQueue(settings.redis_url, settings.queue, settings.redis, f"{host}-{pid}")
        result = await queue.submit(job)  # API side
        batch = await queue.pull(32, 65_536, block_ms=1000)  # worker side
        await queue.complete(batch[0], JobResult.success({...}))
        await queue.close()

    ``consumer`` must be unique per worker process (it owns the entries it reads), and one
    worker loop pulls per instance (held-back entries are per instance state); any number
    of tasks may call ``submit``, ``complete`` and ``renew`` concurrently.
    Counters for the metrics layer: ``dropped_expired``, ``redelivered``, ``dead``,
    ``duplicate_results``.
    """

    def __init__(
        self,
        url: str,
        settings: QueueSettings,
        redis: RedisSettings,
        consumer: str,
        model: str = "",
    ) -> None:
        if not consumer:
            raise ValueError("consumer must be a non-empty name, unique per worker process")
        self.names = RedisNames(redis.prefix, model)
        self._settings = settings
        self._consumer = consumer
        timeout = redis.timeout_s
        self._redis = connect(url, timeout)
        # Blocking calls wait up to SLICE_S server-side; their socket must wait longer.
        self._blocking = connect(url, timeout, timeout + SLICE_S)
        self._submit_lua = self._redis.register_script(SUBMIT_LUA)
        self._complete_lua = self._redis.register_script(COMPLETE_LUA)
        self._renew_lua = self._redis.register_script(RENEW_LUA)
        self._cancel_lua = self._redis.register_script(CANCEL_LUA)
        self._group_ready = False
        # Entries read but left out of a batch by its token cap; still pending for us
        # and offered first on the next pull.
        self._held: list[_Candidate] = []
        self._claim_cursor = "0-0"
        self._acks_since_trim = 0
        self._next_trim = 0.0
        self._next_claim = 0.0
        self._next_beat = 0.0
        self.dropped_expired = 0
        self.redelivered = 0
        self.dead = 0
        self.duplicate_results = 0

    @property
    def settings(self) -> QueueSettings:
        return self._settings

    # -- API side ---------------------------------------------------------------------

    async def submit(self, job: Job, idempotency_key: str | None = None) -> JobResult:
        if job.expired():
            raise DeadlineExceeded(f"job {job.id} was submitted after its deadline")
        idem = None if idempotency_key is None else self.names.idem(job.tenant, idempotency_key)
        with unavailable("submit"):
            if idem is not None:
                owner = await self._redis.get(idem)
                if owner is not None:
                    return await self._wait_for_owner(job, str(owner), idem)
            await self._admit()
            await self._ensure_group()
            owner = await self._submit_lua(
                keys=[self.names.stream] + ([idem] if idem else []),
                args=[job.to_json(), job.id, self._settings.result_ttl_s, JOB_FIELD],
            )
            if owner != job.id:
                return await self._wait_for_owner(job, str(owner), idem)
            if idem is not None:
                await self._join(job.id)
            return await self._wait_own(job, idem)

    async def _join(self, job_id: str) -> None:
        """Count one more caller waiting on a job that an idempotency key may share."""
        waiters = self.names.waiters(job_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(waiters)
            pipe.expire(waiters, self._settings.result_ttl_s)
            await pipe.execute()

    async def _admit(self) -> None:
        depth = await self._depth()
        if depth >= self._settings.max_queue_depth:
            raise Overloaded(
                f"the job queue is full ({depth} jobs); retry after {RETRY_AFTER_S:.0f} s "
                "or raise VERIFIER_QUEUE__MAX_QUEUE_DEPTH",
                retry_after=RETRY_AFTER_S,
            )

    async def _wait_own(self, job: Job, idem: str | None) -> JobResult:
        try:
            result = await self._wait_result(job.tenant, job.id, job.deadline, idem is not None)
        except asyncio.CancelledError:
            # The client went away: unless another caller shares the job, tell workers to
            # skip or abort it, then keep cancelling.
            await self._give_up(job.id, idem, leaving=idem is not None)
            raise
        if result is None:
            await self._give_up(job.id, idem)
            raise DeadlineExceeded(
                f"job {job.id} ({job.kind}) missed its deadline; retry with a longer "
                "timeout or a smaller request"
            )
        return result

    async def _wait_for_owner(self, job: Job, owner_id: str, idem: str | None) -> JobResult:
        """Another request with the same idempotency key runs the job: wait for its result."""
        await self._join(owner_id)
        try:
            result = await self._wait_result(job.tenant, owner_id, job.deadline, True)
        except asyncio.CancelledError:
            await self._give_up(owner_id, idem, leaving=True)  # cancels if we were the last
            raise
        if result is None:
            # Cancels only if nobody else waits (its first submitter usually still does).
            await self._give_up(owner_id, idem, leaving=True)
            raise DeadlineExceeded(
                f"job {owner_id} (same idempotency key) did not finish before this deadline"
            )
        return result.as_replay()

    async def _wait_result(
        self, tenant: str, job_id: str, deadline: float, shared: bool
    ) -> JobResult | None:
        """The job's result, or None once ``deadline`` has passed."""
        result_key = self.names.result(tenant, job_id)
        notify_key = self.names.notify(tenant, job_id)
        while True:
            raw = await self._redis.get(result_key)
            if raw is not None:
                return JobResult.from_json(raw)
            remaining = deadline - time.time()
            if remaining <= 0:
                return None
            # Never BLPOP with timeout 0: Redis reads it as "block forever".
            timeout = max(0.01, min(SLICE_S, remaining))
            popped = await self._blocking.blpop([notify_key], timeout=timeout)
            if popped is not None and shared:
                # Several callers may wait on one job (idempotency): pass the wake-up on.
                await self._rearm(notify_key)

    async def cancelled(self, deliveries: Sequence[Delivery]) -> set[str]:
        """Claimed jobs whose submitter set the cancel marker (one MGET)."""
        if not deliveries:
            return set()
        with unavailable("cancel check"):
            marks = await self._redis.mget([self.names.cancel(d.job.id) for d in deliveries])
        return {d.handle for d, mark in zip(deliveries, marks, strict=True) if mark is not None}

    async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
        """A stored result, only under the tenant that submitted it (keys are tenant-scoped)."""
        with unavailable("lookup"):
            raw = await self._redis.get(self.names.result(tenant, job_id))
        return None if raw is None else JobResult.from_json(raw)

    async def _rearm(self, notify_key: str) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(notify_key, "1")
            pipe.expire(notify_key, self._settings.result_ttl_s)
            await pipe.execute()

    async def _give_up(self, job_id: str, idem: str | None, *, leaving: bool = False) -> None:
        """Best effort: mark the job cancelled and free the idempotency key; ``leaving``: only
        if no other caller still waits on it."""
        try:
            await self._cancel_lua(
                keys=[self.names.cancel(job_id), self.names.waiters(job_id)]
                + ([idem] if idem else []),
                args=[self._settings.result_ttl_s, job_id, "1" if leaving else "0"],
            )
        except Exception as exc:
            # Best effort, also on the cancellation path: workers still drop the job once its
            # deadline has passed.
            logger.warning("could not mark job %s cancelled: %s", job_id, exc)

    # -- worker side ------------------------------------------------------------------

    async def pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        check_pull_args(max_jobs, max_tokens, block_ms)
        with unavailable("pull"):
            try:
                return await self._pull(max_jobs, max_tokens, block_ms)
            except rex.ResponseError as exc:
                if not _group_missing(exc):
                    raise
                logger.warning("consumer group %s is gone (Redis restarted?); recreating", GROUP)
                self._group_ready = False
                self._held.clear()
                return []

    async def _pull(self, max_jobs: int, max_tokens: int, block_ms: int) -> list[Delivery]:
        await self._ensure_group()
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + HOUSEKEEPING_S
            await self._beat()
        # Housekeeping runs on a clock, not on every pull: each costs round trips that would
        # otherwise sit on the latency of every batch.
        if self._acks_since_trim and now >= self._next_trim:
            self._next_trim = now + HOUSEKEEPING_S
            await self._trim()
        batch = BatchLimits(max_jobs, max_tokens)
        seen: set[str] = set()
        held, self._held = self._held, []
        await self._offer(batch, held, seen)
        if not batch.full and now >= self._next_claim:
            self._next_claim = now + min(HOUSEKEEPING_S, self._settings.claim_idle_ms / 4000)
            await self._offer(batch, await self._autoclaim(batch.room), seen)
        if not batch.deliveries:
            await self._read(batch, block_ms, seen, first_only=True)
        if batch.deliveries and not batch.full:
            # Wait out the batch window locally, then read without blocking: Redis expires
            # blocked commands on its cron tick (hz=10), so BLOCK 5 would last ~100 ms.
            if self._settings.batch_wait_ms:
                await asyncio.sleep(self._settings.batch_wait_ms / 1000)
            await self._read(batch, 0, seen, first_only=False)
        return batch.deliveries

    async def _read(
        self, batch: BatchLimits, wait_ms: int, seen: set[str], *, first_only: bool
    ) -> None:
        """XREADGROUP until the batch is full (or has a job, if first_only) or time is up."""
        end = time.monotonic() + wait_ms / 1000
        while True:
            left_ms = int((end - time.monotonic()) * 1000)
            # BLOCK 0 means forever: below 1 ms left, do a last non-blocking read instead.
            block = min(left_ms, int(SLICE_S * 1000)) if left_ms >= 1 else None
            client = self._redis if block is None else self._blocking
            reply = await client.xreadgroup(
                GROUP, self._consumer, {self.names.stream: ">"}, count=batch.room, block=block
            )
            entries = _stream_entries(reply)
            await self._offer(batch, await self._parse(entries), seen)
            if batch.full or block is None or (first_only and batch.deliveries):
                return

    async def _autoclaim(self, count: int) -> list[_Candidate]:
        """Take over entries idle for claim_idle_ms (their worker died or stalled)."""
        # Never JUSTID here: the reclaim must increment the delivery counter, or a job that
        # kills every worker would circulate forever instead of being dead-lettered.
        reply = await self._redis.xautoclaim(
            self.names.stream,
            GROUP,
            self._consumer,
            min_idle_time=self._settings.claim_idle_ms,
            start_id=self._claim_cursor,
            count=count,
        )
        self._claim_cursor = str(reply[0])
        entries = reply[1]
        if entries:
            self.redelivered += len(entries)
            logger.info("reclaimed %d idle jobs for %s", len(entries), self._consumer)
        return await self._parse(entries)

    async def _parse(self, entries: Sequence[Any]) -> list[_Candidate]:
        good: list[_Candidate] = []
        bad: list[tuple[str, str, Any]] = []
        for entry_id, fields in entries:
            raw = (fields or {}).get(JOB_FIELD)
            try:
                good.append((entry_id, Job.from_json(raw if raw is not None else "")))
            except (ValueError, ServiceError) as exc:
                bad.append((entry_id, f"{type(exc).__name__}: {exc}", raw))
        if bad:
            await self._bury_malformed(bad)
        return good

    async def _bury_malformed(self, bad: list[tuple[str, str, Any]]) -> None:
        """Keep each entry for inspection and ack it; answer its caller when it can be found.

        An entry that names a job id and a valid tenant but fails otherwise (a job kind this
        worker does not know: the API runs a newer version) gets a typed 422 at once, instead
        of its caller waiting for the deadline.
        """
        logger.error("dead-lettering %d malformed stream entries: %s", len(bad), bad[:3])
        answerable = [(entry_id, error, _address(raw)) for entry_id, error, raw in bad]
        async with self._redis.pipeline(transaction=True) as pipe:
            for entry_id, error, address in answerable:
                pipe.xadd(self.names.dead, {"entry": entry_id, "error": error}, maxlen=DEAD_MAXLEN)
                if address is None:
                    pipe.xack(self.names.stream, GROUP, entry_id)
            await pipe.execute()
        for entry_id, error, address in answerable:
            if address is not None:
                # The one way a result is stored: SET NX, wake the caller, XACK the entry.
                refused = InvalidRequest(f"this worker cannot run the job ({error[:300]})")
                await self._complete_lua(
                    keys=[
                        self.names.result(*address),
                        self.names.notify(*address),
                        self.names.stream,
                    ],
                    args=[
                        JobResult.from_error(refused).to_json(),
                        self._settings.result_ttl_s,
                        GROUP,
                        entry_id,
                    ],
                )
        self.dead += len(bad)
        self._acks_since_trim += len(bad)

    async def _offer(
        self, batch: BatchLimits, candidates: list[_Candidate], seen: set[str]
    ) -> None:
        fresh = [c for c in candidates if c[0] not in seen]
        seen.update(entry_id for entry_id, _ in fresh)
        for delivery in await self._screen(fresh):
            if not batch.offer(delivery):
                self._held.append((delivery.handle, delivery.job))

    async def _screen(self, candidates: list[_Candidate]) -> list[Delivery]:
        """Keep the candidates this consumer owns and should run; drop or bury the others."""
        if not candidates:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry_id, job in candidates:
                pipe.xpending_range(self.names.stream, GROUP, entry_id, entry_id, 1)
                pipe.exists(self.names.cancel(job.id))
            replies = await pipe.execute()
        keep: list[Delivery] = []
        drop: list[str] = []
        doomed: list[Delivery] = []
        now = time.time()
        for i, (entry_id, job) in enumerate(candidates):
            pending, cancelled = replies[2 * i], replies[2 * i + 1]
            if not pending or pending[0]["consumer"] != self._consumer:
                continue  # acked meanwhile, or reclaimed by another consumer: not ours
            delivery = Delivery(job, entry_id, int(pending[0]["times_delivered"]))
            if cancelled or job.expired(now):
                drop.append(entry_id)
            elif delivery.deliveries > self._settings.max_deliveries:
                doomed.append(delivery)
            else:
                keep.append(delivery)
        await self._drop(drop)
        for delivery in doomed:
            await self._bury(delivery)
        return keep

    async def _drop(self, entry_ids: list[str]) -> None:
        if not entry_ids:
            return
        await self._redis.xack(self.names.stream, GROUP, *entry_ids)
        self.dropped_expired += len(entry_ids)
        self._acks_since_trim += len(entry_ids)
        logger.info("dropped %d cancelled or expired jobs", len(entry_ids))

    async def _bury(self, delivery: Delivery) -> None:
        """Dead-letter a job that crashed workers max_deliveries times; its caller gets 502."""
        job = delivery.job
        logger.error(
            "job %s (%s) was delivered %d times; dead-lettering it",
            job.id,
            job.kind,
            delivery.deliveries,
        )
        error = JobFailed(
            f"job {job.id} ({job.kind}) crashed workers {self._settings.max_deliveries} times "
            "and was dead-lettered; check the worker logs"
        )
        await self._finish(delivery, JobResult.from_error(error), dead=True)
        self.dead += 1

    async def complete(self, delivery: Delivery, result: JobResult) -> bool:
        with unavailable("complete"):
            won = await self._finish(delivery, result, dead=False)
        if not won:
            self.duplicate_results += 1
            logger.info("job %s already had a result; this one is dropped", delivery.job.id)
        return won

    async def _finish(self, delivery: Delivery, result: JobResult, *, dead: bool) -> bool:
        job = delivery.job
        keys = [
            self.names.result(job.tenant, job.id),
            self.names.notify(job.tenant, job.id),
            self.names.stream,
        ]
        args: list[str | int] = [result.to_json(), self._settings.result_ttl_s, GROUP]
        args.append(delivery.handle)
        if dead:
            keys.append(self.names.dead)
            args += [job.to_json(), delivery.deliveries, DEAD_MAXLEN]
        won = await self._complete_lua(keys=keys, args=args)
        self._acks_since_trim += 1
        return bool(won)

    async def renew(self, deliveries: Sequence[Delivery]) -> None:
        """Reset the idle time of entries this consumer still owns (batch and held ones).

        ``XCLAIM <id> JUSTID`` with min-idle 0 does not increment the delivery counter:
        a renewal by a live worker is not a delivery. Entries another consumer already
        reclaimed are left alone (checked atomically in Lua).
        """
        ids = [d.handle for d in deliveries] + [entry_id for entry_id, _ in self._held]
        if not ids:
            return
        with unavailable("renew"):
            await self._beat()  # a worker busy with long jobs pulls seldom, but renews
            renewed = await self._renew_lua(
                keys=[self.names.stream], args=[GROUP, self._consumer, *ids]
            )
        if int(renewed) < len(ids):
            # Completed since the worker listed them, or reclaimed by another worker.
            logger.info(
                "%d of %d jobs to renew are no longer pending for %s",
                len(ids) - int(renewed),
                len(ids),
                self._consumer,
            )

    # -- housekeeping -----------------------------------------------------------------

    async def depth(self) -> int:
        """Jobs accepted but not completed: pending + lag of the group (XLEN as fallback)."""
        with unavailable("depth"):
            return await self._depth()

    async def _depth(self) -> int:
        try:
            groups = await self._redis.xinfo_groups(self.names.stream)
        except rex.ResponseError as exc:
            if not _group_missing(exc):
                raise
            groups = []
        ours = [g for g in groups if g["name"] == GROUP]
        if not ours:
            # Stream or group missing (first use, or Redis lost its data): create on enqueue.
            self._group_ready = False
        elif ours[0].get("lag") is not None:
            return int(ours[0]["pending"]) + int(ours[0]["lag"])
        return int(await self._redis.xlen(self.names.stream))

    async def _beat(self) -> None:
        """Mark this consumer alive (its time in the stream's worker set) and forget the ones
        silent for ten claim windows. Redis' own consumer idle time is no such mark: before
        Redis 7.2 a read that finds nothing does not reset it."""
        now = time.time()
        old = now - 10 * self._settings.claim_idle_ms / 1000
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self.names.workers, {self._consumer: now})
            pipe.zremrangebyscore(self.names.workers, "-inf", old)
            await pipe.execute()

    async def workers(self) -> int:
        """Workers of this stream seen within ``claim_idle_ms``: a worker pulls (at least
        every second while it has room) or renews the jobs it holds (three times a window)
        more often than that; one silent for longer is taken as gone, as its jobs are."""
        since = time.time() - self._settings.claim_idle_ms / 1000
        with unavailable("workers"):
            return int(await self._redis.zcount(self.names.workers, since, "+inf"))

    async def trim(self) -> int:
        """Remove acked entries from the stream; returns how many were removed."""
        with unavailable("trim"):
            return await self._trim()

    async def _trim(self) -> int:
        self._acks_since_trim = 0
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xpending(self.names.stream, GROUP)
            pipe.xinfo_groups(self.names.stream)
            summary, groups = await pipe.execute()
        if summary["pending"]:
            # Everything older than the oldest pending entry was delivered and acked.
            min_id = str(summary["min"])
        else:
            # Nothing pending: everything up to the last delivered entry was acked.
            last = next((g["last-delivered-id"] for g in groups if g["name"] == GROUP), "0-0")
            if last == "0-0":
                return 0
            min_id = _next_id(str(last))
        removed = await self._redis.xtrim(self.names.stream, minid=min_id, approximate=False)
        return int(removed)

    async def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            # From id 0, so that jobs added before the first worker started are delivered.
            await self._redis.xgroup_create(self.names.stream, GROUP, id="0", mkstream=True)
        except rex.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    async def close(self) -> None:
        """Close both connection pools. Held entries stay pending and are reclaimed later."""
        await self._redis.aclose()
        await self._blocking.aclose()


def _address(raw: Any) -> tuple[str, str] | None:
    """(tenant, job id) of a malformed job entry, when both can be read and the tenant is valid."""
    try:
        data = json.loads(raw)
        tenant, job_id = data.get("tenant", "default"), data["id"]
        if isinstance(tenant, str) and isinstance(job_id, str) and job_id:
            return check_tenant(tenant), job_id
    except (TypeError, ValueError, KeyError, AttributeError, ServiceError):
        pass
    return None
