"""Two judges of different kinds behind one API, on one Redis, on real vLLM.

``VERIFIER_MODELS`` names the default generative judge (``judge``) and a sequence reward model
built here from random weights (``rm``, ``loadtests.checkpoints.build_reward``). The API process
runs ``judge`` itself (``serve --model judge``); a worker process runs ``rm`` (``worker --model
rm``), each on its model's own stream. Requests are routed by ``model``: the RM's rewards are
checked against a PyTorch forward pass of its weights (float32 both, as in test_pooling_http).
Last, the RM's only worker is killed: the judge keeps answering while a request for the RM
waits in its queue, and a new RM worker answers it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis

from loadtests.checkpoints import build_reward
from loadtests.harness import free_port
from loadtests.metrics_text import has_sample, sample_sum
from tests.support.cluster import Cluster, Proc, wait_api, wait_worker
from tests.support.pooled_reference import RewardReference

TOL = 5e-3
CLAIM_IDLE_MS = 3000
QUESTION = "Tom has 3 apples and buys 2 more. How many apples does he have?"
RESPONSES = ["He has 5 apples.", "3 + 2 = 6, so he has 6 apples."]


@dataclass
class Two:
    cluster: Cluster
    api: Proc
    rm_folder: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api.port}"

    def judge(self, model: str | None, response: str = RESPONSES[0]) -> httpx.Response:
        body: dict[str, Any] = {"question": QUESTION, "response": response, "cache": False}
        if model is not None:
            body["model"] = model
        return httpx.post(self.url + "/v1/judge/outcome", json=body, timeout=300)

    def start_rm_worker(self) -> Proc:
        n = len(self.cluster.workers)
        proc = self.cluster.spawn(["worker", "--model", "rm"], f"rm-worker{n}", None, {})
        self.cluster.workers.append(proc)
        return proc


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    tmp = tmp_path_factory.mktemp("models")
    folder = build_reward(tmp / "rm")
    port = free_port()
    models = [
        {"name": "judge"},
        {"name": "rm", "model": str(folder), "engine": {"dtype": "float32"}},
    ]
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "VERIFIER_REDIS__PREFIX": f"t{uuid.uuid4().hex[:8]}:",
        "VERIFIER_MODELS": json.dumps(models),
        "VERIFIER_QUEUE__CLAIM_IDLE_MS": str(CLAIM_IDLE_MS),
        "VERIFIER_ENGINE__CPU_KVCACHE_GIB": "1",
        "VERIFIER_ENGINE__MAX_MODEL_LEN": "2048",
        "VERIFIER_LIMITS__REQUEST_TIMEOUT_S": "300",
    }
    c = Cluster(tmp=tmp, env=env, redis_port=port)
    c.start_redis()
    try:
        p = free_port()
        api = c.spawn(["serve", "--model", "judge", "--port", str(p)], "api", p, {})
        c.apis.append(api)
        two = Two(c, api, folder)
        worker = two.start_rm_worker()
        wait_api(api, timeout=600)
        wait_worker(worker)
        yield two
    finally:
        c.close()


@pytest.fixture(scope="module")
def rm_ref(two: Two) -> RewardReference:
    return RewardReference(two.rm_folder)


def models_ready(two: Two) -> list[dict[str, Any]]:
    models: list[dict[str, Any]] = httpx.get(two.url + "/ready", timeout=10).json()["models"]
    return models


def test_every_model_is_listed_with_its_kind_and_workers(two: Two) -> None:
    cards = httpx.get(two.url + "/v1/models", timeout=10).json()["data"]
    assert [(c["id"], c["kind"], c["ready"], c["workers"]) for c in cards] == [
        ("judge", "generative", True, 1),  # the API process's own worker
        ("rm", "reward", True, 1),
    ]
    assert cards[0]["dtype"] is not None  # the judge's engine runs in the API process
    assert cards[1]["root"] == str(two.rm_folder)
    assert models_ready(two) == [
        {"name": "judge", "ready": True, "workers": 1},
        {"name": "rm", "ready": True, "workers": 1},
    ]


def test_requests_are_answered_by_the_model_they_name(two: Two, rm_ref: RewardReference) -> None:
    for response in RESPONSES:
        r = two.judge("rm", response)
        assert r.status_code == 200, r.text
        body = r.json()
        (expected,) = rm_ref.logits(rm_ref.ids(QUESTION, response))
        assert body["model"] == "rm"
        assert abs(body["reward"] - expected) < TOL, (response, body["reward"], expected)
    judged = two.judge("judge").json()
    assert (judged["model"], judged.get("reward")) == ("judge", None)
    default = two.judge(None).json()
    assert default["model"] == "judge"


def test_each_model_has_its_own_metrics(two: Two) -> None:
    """After the routing test: the API process ran the judge's jobs, the worker the RM's."""
    api = httpx.get(two.url + "/metrics", timeout=10).text
    (worker,) = two.cluster.live_workers()
    rm = httpx.get(f"http://127.0.0.1:{worker.port}/metrics", timeout=10).text
    assert sample_sum(api, "verifier_batch_size_sum", model="judge") >= 2
    assert sample_sum(api, "verifier_batch_size_sum", model="rm") == 0
    assert sample_sum(rm, "verifier_batch_size_sum", model="rm") >= len(RESPONSES)
    # Both queues' depths on the API's page, read from Redis; vLLM's metrics by served name.
    for model in ("judge", "rm"):
        assert has_sample(api, "verifier_queue_depth", model=model)
    assert has_sample(api, "vllm:num_requests_running", model_name="judge")
    assert has_sample(rm, "vllm:num_requests_running", model_name="rm")


def test_a_model_not_served_is_a_404_naming_the_served_ones(two: Two) -> None:
    r = two.judge("gpt-4o")
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["type"] == "model_not_found"
    assert "served: judge, rm" in error["message"]


def test_each_model_has_its_own_stream(two: Two) -> None:
    prefix = two.cluster.env["VERIFIER_REDIS__PREFIX"]
    redis = Redis(port=two.cluster.redis_port, decode_responses=True)
    try:
        streams = sorted(k for k in redis.scan_iter(f"{prefix}jobs*"))
    finally:
        redis.close()
    assert streams == [f"{prefix}jobs:judge", f"{prefix}jobs:rm"]


def test_a_model_without_workers_waits_and_the_other_keeps_answering(two: Two) -> None:
    """Runs last in the module: it kills the RM's worker."""
    (worker,) = two.cluster.live_workers()
    worker.server.kill()
    deadline = time.monotonic() + CLAIM_IDLE_MS / 1000 + 10
    while models_ready(two)[1]["workers"] != 0:
        assert time.monotonic() < deadline, models_ready(two)
        time.sleep(0.5)
    assert models_ready(two)[1] == {"name": "rm", "ready": False, "workers": 0}

    with ThreadPoolExecutor(1) as pool:
        waiting: Future[httpx.Response] = pool.submit(two.judge, "rm")
        for _ in range(3):  # the judge answers while the RM's request waits in its queue
            assert two.judge("judge").status_code == 200
        assert not waiting.done()
        replacement = two.start_rm_worker()
        wait_worker(replacement)
        r = waiting.result(timeout=300)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "rm"
    assert models_ready(two)[1]["workers"] == 1
