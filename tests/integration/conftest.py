"""Fixtures of the queue's Redis tests: a real Redis at 127.0.0.1:6379, a fresh key prefix
per test (its keys deleted afterwards), queues under that prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any
from uuid import uuid4

import pytest
import redis
from redis.asyncio import Redis

from service.config import QueueSettings, RedisSettings
from service.queue.base import JobResult
from service.queue.redis_streams import RedisQueue
from service.stores.keys import RedisNames
from tests.support.jobs import MakeQueue, Spawn

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def r() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL, decode_responses=True, protocol=2)
    try:
        await client.ping()
    except redis.ConnectionError:
        pytest.fail(
            "no Redis at 127.0.0.1:6379; start one: redis-server --daemonize yes "
            "--bind 127.0.0.1 --port 6379 --save '' --appendonly no"
        )
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(r: Redis) -> AsyncIterator[str]:
    value = f"test:{uuid4().hex}:"
    yield value
    keys = [k async for k in r.scan_iter(match=value + "*")]
    if keys:
        await r.delete(*keys)


@pytest.fixture
def names(prefix: str) -> RedisNames:
    return RedisNames(prefix)


@pytest.fixture
async def make_queue(prefix: str) -> AsyncIterator[MakeQueue]:
    made: list[RedisQueue] = []

    def make(
        consumer: str = "c1", url: str = REDIS_URL, model: str = "", **overrides: Any
    ) -> RedisQueue:
        values: dict[str, Any] = {
            "claim_idle_ms": 300,
            "batch_wait_ms": 5,
            "max_deliveries": 3,
            **overrides,
        }
        redis = RedisSettings(prefix=prefix, timeout_s=1.0)
        queue = RedisQueue(url, QueueSettings(**values), redis, consumer, model)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        await queue.close()


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """Background submits; any still running at teardown are cancelled."""
    tasks: list[asyncio.Task[JobResult]] = []

    def start(coro: Coroutine[Any, Any, JobResult]) -> asyncio.Task[JobResult]:
        tasks.append(asyncio.create_task(coro))
        return tasks[-1]

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
