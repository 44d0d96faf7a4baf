"""What a job spent: the per-job counter, the engine adding to it, the worker reporting it,
and the settlement a request whose client left waits for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import Request, Response

from service.api.deps import AppState
from service.api.pipeline import JobCall, spent_after_disconnect
from service.config import Settings
from service.engine.adapters import AdapterRequests
from service.engine.vllm_engine import VLLMEngine
from service.errors import ClientDisconnected, QueueUnavailable
from service.ops import spend
from service.ops.telemetry import Metrics
from service.protocol.jobs import JOBS
from service.queue.base import Job, JobResult
from service.queue.local import LocalQueue
from tests.support.jobs import make_job
from tests.support.workers import local_worker

pytestmark = pytest.mark.timeout(30)


# -- the counter ----------------------------------------------------------------------------


def test_a_counter_adds_what_is_recorded_in_its_context() -> None:
    with spend.counting() as spent:
        spend.record(10, 3)
        spend.record(5)
    assert (spent.prompt_tokens, spent.generated_tokens, spent.total) == (15, 3, 18)
    spend.record(100, 100)  # outside any job: nobody counts it
    assert spent.total == 18


async def test_tasks_a_job_spawns_add_to_its_counter_and_jobs_stay_apart() -> None:
    async def job(tokens: int) -> int:
        with spend.counting() as spent:

            async def request() -> None:
                await asyncio.sleep(0.01)
                spend.record(tokens, 1)

            await asyncio.gather(request(), request())
            return spent.total

    assert await asyncio.gather(job(10), job(100)) == [22, 202]


def test_negative_counts_are_ignored() -> None:
    with spend.counting() as spent:
        spend.record(-5, -1)
    assert spent.total == 0


# -- the engine adds as each request finishes or is aborted ---------------------------------


class FakeLLM:
    """vLLM's AsyncLLM as ``_run`` uses it: a stream of outputs, and abort."""

    def __init__(self, generated: int, hang: bool = False) -> None:
        self.generated = generated
        self.hang = hang
        self.aborted: list[str] = []

    def generate(
        self, prompt: Any, params: Any, request_id: str, lora_request: Any = None
    ) -> AsyncIterator[Any]:
        ids = list(prompt["prompt_token_ids"])

        async def stream() -> AsyncIterator[Any]:
            if self.hang:
                await asyncio.sleep(30)
            out = SimpleNamespace(token_ids=[7] * self.generated)
            yield SimpleNamespace(prompt_token_ids=ids, outputs=[out], num_cached_tokens=0)

        return stream()

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)


def _engine(llm: FakeLLM) -> VLLMEngine:
    engine = object.__new__(VLLMEngine)  # no tokenizer needed: only _run is exercised
    engine._llm = llm
    engine._adapters = AdapterRequests({})
    return engine


async def test_a_finished_engine_request_adds_its_prompt_and_generated_tokens() -> None:
    engine = _engine(FakeLLM(generated=4))
    with spend.counting() as spent:
        await engine._run([1, 2, 3], SimpleNamespace())
    assert (spent.prompt_tokens, spent.generated_tokens) == (3, 4)


async def test_an_aborted_engine_request_adds_its_prompt() -> None:
    llm = FakeLLM(generated=4, hang=True)
    engine = _engine(llm)
    with spend.counting() as spent:
        call = asyncio.create_task(engine._run([1, 2, 3, 4, 5], SimpleNamespace()))
        await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert (spent.prompt_tokens, spent.generated_tokens) == (5, 0)
    assert len(llm.aborted) == 1


# -- the worker reports it ------------------------------------------------------------------


@pytest.fixture
async def spending() -> AsyncIterator[tuple[LocalQueue, asyncio.Event]]:
    """A worker whose handler spends 40 tokens, then hangs if the job says so."""
    started = asyncio.Event()

    async def handle(job: Job) -> JobResult:
        spend.record(30, 10)
        started.set()
        if job.payload.get("hang"):
            await asyncio.sleep(30)
        return JobResult.success({})

    async with local_worker(handle) as queue:
        yield queue, started


async def test_a_finished_job_reports_what_it_spent(
    spending: tuple[LocalQueue, asyncio.Event],
) -> None:
    queue, _ = spending
    result = await queue.submit(make_job(timeout_s=20))
    assert result.ok
    assert result.spent_tokens == 40


async def test_an_aborted_job_answers_what_it_spent_and_the_caller_reads_it(
    spending: tuple[LocalQueue, asyncio.Event],
) -> None:
    queue, started = spending
    job = make_job(timeout_s=20, payload={"hang": True})
    caller = asyncio.create_task(queue.submit(job))
    await started.wait()
    caller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await caller
    assert await spent_after_disconnect(queue, job.tenant, job.id) == 40
    stored = await queue.lookup(job.tenant, job.id)
    assert stored is not None
    assert stored.error_type == "client_disconnected"


# -- the settlement's choice: what was spent, or the estimate after a bounded wait ----------


class SlowQueue:
    """``lookup`` as a queue answers it: the stored result once it exists."""

    def __init__(self, result: JobResult | None, after_s: float = 0.0, fail: bool = False):
        self.result = result
        self.ready_at = asyncio.get_running_loop().time() + after_s
        self.fail = fail
        self.lookups = 0

    async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
        self.lookups += 1
        if self.fail:
            raise QueueUnavailable("redis is down")
        if asyncio.get_running_loop().time() < self.ready_at:
            return None
        return self.result


def _disconnected(spent: int | None) -> JobResult:
    result = JobResult.failure(499, "client_disconnected", "the caller left")
    return result if spent is None else result.with_spent(spent)


async def test_the_spent_count_that_arrives_in_time_is_settled() -> None:
    queue: Any = SlowQueue(_disconnected(123), after_s=0.3)
    assert await spent_after_disconnect(queue, "t", "j", wait_s=2.0) == 123


async def test_no_answer_within_the_bound_leaves_the_estimate() -> None:
    queue: Any = SlowQueue(_disconnected(123), after_s=5.0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await spent_after_disconnect(queue, "t", "j", wait_s=0.3) is None
    assert loop.time() - start < 0.6
    assert queue.lookups >= 2  # it kept looking until the bound


async def test_an_answer_without_a_count_or_a_failing_queue_leaves_the_estimate() -> None:
    uncounted: Any = SlowQueue(_disconnected(None))
    assert await spent_after_disconnect(uncounted, "t", "j", wait_s=0.3) is None
    down: Any = SlowQueue(None, fail=True)
    assert await spent_after_disconnect(down, "t", "j", wait_s=0.3) is None


async def test_a_lookup_that_hangs_is_left_behind_at_the_bound() -> None:
    released = asyncio.Event()

    class Hung:
        async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
            while not released.is_set():
                with contextlib.suppress(asyncio.CancelledError):  # swallows its cancel
                    await released.wait()
            return None

    loop = asyncio.get_running_loop()
    start = loop.time()
    hung: Any = Hung()
    try:
        assert await spent_after_disconnect(hung, "t", "j", wait_s=0.2) is None
        assert loop.time() - start < 0.5
    finally:
        released.set()  # let the task left behind end before the loop closes


# -- JobCall.run: the budget metric records the settled amount ------------------------------


class LeftQueue:
    """A queue whose job never answers its submitter; ``lookup`` has ``stored`` (or nothing)."""

    def __init__(self, stored: JobResult | None) -> None:
        self.stored = stored

    async def submit(self, job: Job, idempotency_key: str | None = None) -> JobResult:
        await asyncio.sleep(30)
        raise AssertionError("the client left first")

    async def lookup(self, tenant: str, job_id: str) -> JobResult | None:
        return self.stored


async def _spent_after_hang_up(stored: JobResult | None) -> tuple[float, float]:
    """(granted, spent) budget tokens of a request whose client hangs up at once."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    route = SimpleNamespace(path="/v1/judge/outcome")
    request = Request({"type": "http", "headers": [], "route": route}, receive)
    state = AppState(settings=Settings(), metrics=Metrics())
    queue: Any = LeftQueue(stored)
    state.queues[state.settings.model_name] = queue
    req = JOBS["outcome"].request.model_validate({"question": "q", "response": "r"})
    with pytest.raises(ClientDisconnected):
        await JobCall(state, request, Response()).run("outcome", req)
    return (
        state.metrics.budget("default", "granted")._value.get(),
        state.metrics.budget("default", "spent")._value.get(),
    )


async def test_a_request_whose_client_left_is_charged_what_its_job_spent() -> None:
    granted, spent = await _spent_after_hang_up(_disconnected(7))
    assert granted > 7
    assert spent == 7


async def test_without_a_count_in_time_it_is_charged_the_estimate() -> None:
    granted, spent = await _spent_after_hang_up(None)
    assert spent == granted > 0
