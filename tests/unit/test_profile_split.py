"""The profile splitter charges each sampled stack to one layer."""

from __future__ import annotations

from loadtests.experiments.profile_split import layer_of, report, split

SERVE = 'process 9:"python -m loadtests.mixed_load";process 10:"python -m service.cli serve"'


def stack(*frames: str) -> str:
    return ";".join([SERVE, "run (asyncio/runners.py:118)", *frames])


def test_engine_processes_are_charged_whole() -> None:
    spawned = (
        'process 9:"bench";process 11:"python -c from multiprocessing.spawn import spawn_main"'
    )
    model = f"{spawned};worker_main (vllm/v1/worker/gpu_worker.py:3);forward (torch/nn.py:1)"
    assert layer_of(model) == "engine: model"
    assert layer_of(f"{spawned};run_busy_loop (vllm/v1/engine/core.py:9)") == "engine: core"


def test_the_innermost_layer_wins() -> None:
    tokenizing = stack(
        "judge (service/serving/outcome.py:90)",
        "outcome_prompt (service/scoring/prompts.py:150)",
        "encode (tokenizers/__init__.py:1)",
    )
    assert layer_of(tokenizing) == "tokenization"
    assert layer_of(stack("handle (service/queue/worker.py:200)")) == "worker"
    redis = stack("handle (service/queue/worker.py:200)", "xadd (redis/commands/core.py:4)")
    assert layer_of(redis) == "queue"
    engine = stack("_run (service/engine/vllm_engine.py:200)", "generate (vllm/v1/async.py:4)")
    assert layer_of(engine) == "engine client"
    api = stack("__call__ (starlette/routing.py:9)", "validate (pydantic/main.py:3)")
    assert layer_of(api) == "API"
    body = stack("app (fastapi/routing.py:3)", "serialize_response (fastapi/routing.py:150)")
    assert layer_of(body) == "response"
    assert layer_of(stack("_run_once (asyncio/base_events.py:1900)")) == "other"


def test_split_counts_samples_and_reports_shares() -> None:
    lines = [
        stack("handle (service/queue/worker.py:200)") + " 3",
        'process 11:"VLLM::Worker";execute (vllm/v1/worker/runner.py:3) 5',
        "garbage",
    ]
    rows = report(split(lines))
    assert rows == [
        {"layer": "engine: model", "samples": 5, "share": 5 / 8},
        {"layer": "worker", "samples": 3, "share": 3 / 8},
    ]


def test_the_load_generator_is_left_out() -> None:
    client = 'process 9:"python -m loadtests.mixed_load";send (httpx/_client.py:3) 4'
    rows = report(split([client, stack("handle (service/queue/worker.py:200)") + " 1"]))
    assert rows == [{"layer": "worker", "samples": 1, "share": 1.0}]


def test_waiting_threads_are_left_out_and_spinning_is_its_own_layer() -> None:
    waiting = stack(
        "WorkerThread.run (anyio/_backends/_asyncio.py:1113)", "Condition.wait (t.py:3)"
    )
    spinning = stack("acquire_read (vllm/shm.py:7)", "sched_yield (vllm/distributed/utils.py:46)")
    rows = report(split([waiting + " 9", spinning + " 2"]))
    assert rows == [{"layer": "engine: spin-wait", "samples": 2, "share": 1.0}]
