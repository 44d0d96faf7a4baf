"""Several named models behind one API (``VERIFIER_MODELS``): the settings, the routing by
``model``, the lists and readiness per model, the worker's choice of model.

Each model here is a fake engine on its own local queue and worker; the same on real vLLM
and Redis, with a worker process per model, is tests/e2e/test_models_http.py.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from pydantic import ValidationError

from loadtests.metrics_text import sample_sum
from service.api.deps import AppState
from service.api.pipeline import served_ids, served_model
from service.app import create_app, make_worker
from service.cli import _worker_settings
from service.config import Settings
from service.errors import ModelNotFound
from service.queue.local import LocalQueue
from service.serving.services import Services
from service.stores.keys import RedisNames
from tests.support.fakes import FakeEngine

BODY = {"question": "What is 2 + 2?", "response": "4"}
MODELS = [
    {"name": "judge"},
    {"name": "rm", "model": "/models/rm", "kind": "reward", "engine": {"dtype": "float32"}},
]


def settings(models: list[dict[str, Any]] = MODELS, **extra: Any) -> Settings:
    return Settings.model_validate({"models": models, **extra})


def test_the_models_come_from_one_json_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_MODELS", json.dumps(MODELS))
    monkeypatch.setenv("VERIFIER_ENGINE__MAX_MODEL_LEN", "8192")
    # Set here, so a run with the dtype forced (VERIFIER_ENGINE__DTYPE) checks the same thing.
    monkeypatch.setenv("VERIFIER_ENGINE__DTYPE", "bfloat16")
    s = Settings()
    assert s.model_names == ["judge", "rm"]
    assert s.model_name == "judge"  # the default: the first
    rm = s.for_model("rm")
    assert (rm.model_name, rm.queue_name, rm.models) == ("rm", "rm", [s.models[1]])
    # The entry's own settings, and the engine group's for the rest.
    assert (rm.engine.model, rm.engine.kind, rm.engine.dtype) == ("/models/rm", "reward", "float32")
    assert rm.engine.max_model_len == 8192
    judge = s.for_model("judge")
    assert (judge.engine.model, judge.engine.kind, judge.engine.dtype) == ("", "auto", "bfloat16")
    assert list(s.by_model()) == ["judge", "rm"]
    with pytest.raises(KeyError, match="served: judge, rm"):
        s.for_model("nope")


def test_one_model_keeps_its_meaning() -> None:
    s = Settings.model_validate({"engine": {"served_model_name": "solo"}})
    assert (s.model_names, s.queue_name, list(s.by_model())) == (["solo"], "", ["solo"])
    assert s.by_model()["solo"] is s


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([{"name": "a"}, {"name": "a"}], "repeated: a"),
        ([{"name": "a:b"}], "name"),
        ([{"name": "a/b"}], "name"),
        ([{"name": ""}], "name"),
        ([{"name": "a", "engine": {"model": "/x"}}], "set the entry's own"),
        ([{"name": "a", "engine": {"dtpye": "float32"}}], "did you mean 'dtype'"),
        ([{"name": "a", "engine": {"max_model_len": 512}}], "models\\['a'\\]: limits"),
        ([{"name": "a", "engine": {"lora_adapters": {"x:y": "/l"}}}], "models\\['a'\\]: engine"),
    ],
)
def test_a_model_list_that_cannot_be_served_is_refused_at_start(
    models: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(models)


def test_each_model_has_its_own_stream_and_dead_letters() -> None:
    one, judge, rm = RedisNames("p:"), RedisNames("p:", "judge"), RedisNames("p:", "rm")
    assert (one.stream, judge.stream, rm.stream) == ("p:jobs", "p:jobs:judge", "p:jobs:rm")
    assert (one.dead, judge.dead, rm.dead) == ("p:dead", "p:dead:judge", "p:dead:rm")
    # Results, cancels and idempotency records are by job id, so any queue reads them.
    assert judge.result("t", "j") == rm.result("t", "j") == one.result("t", "j")


def test_a_name_not_served_is_a_404_naming_every_served_one() -> None:
    s = settings([{"name": "judge", "engine": {"lora_adapters": {"terse": "/a"}}}, {"name": "rm"}])
    assert served_ids(s) == ["judge", "judge:terse", "rm"]
    assert served_model(s, None) == "judge"
    for name in ("judge", "judge:terse", "rm"):
        assert served_model(s, name) == name
    for wrong in ("gpt-4o", "rm:terse", "judge:nope"):
        with pytest.raises(ModelNotFound) as exc:
            served_model(s, wrong)
        assert (exc.value.status, exc.value.type) == (404, "model_not_found")
        assert "served: judge, judge:terse, rm" in exc.value.message


def test_a_worker_serves_the_model_it_is_given() -> None:
    s = settings()
    assert _worker_settings(s, "rm").model_name == "rm"
    for wrong in (None, "nope"):  # several models: --model is needed, and must be one
        with pytest.raises(typer.Exit):
            _worker_settings(s, wrong)
    assert _worker_settings(settings([{"name": "only"}]), None).model_name == "only"
    solo = Settings()
    assert _worker_settings(solo, None) is solo
    with pytest.raises(typer.Exit):
        _worker_settings(solo, "rm")


@asynccontextmanager
async def two_models(
    tokenizer: Any, tmp_path: Path, hosted: tuple[str, ...] = ("judge", "rm"), **extra: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with a fake generative judge and a fake reward model, each on its own queue
    and, if ``hosted``, a worker built as the lifespan builds it."""
    rm_dir = tmp_path / "rm"
    rm_dir.mkdir()
    config = {"architectures": ["LlamaForSequenceClassification"]}
    (rm_dir / "config.json").write_text(json.dumps(config))
    s = settings([{"name": "judge"}, {"name": "rm", "model": str(rm_dir)}], **extra)
    app = create_app(s, run_worker=False)
    state: AppState = app.state.svc
    engines = {
        "judge": FakeEngine(tokenizer, verdicts=lambda text: 1.0, name="judge"),
        "rm": FakeEngine(tokenizer, verdicts=lambda text: -1.0, name="rm", kind="reward"),
    }
    workers, tasks = [], []
    for name, engine in engines.items():
        queue = LocalQueue(s.queue)
        state.queues[name] = queue
        state.metrics.watch_queue(queue, name)
        if name not in hosted:
            continue
        state.hosted[name] = Services.build(engine, name)
        workers.append(make_worker(s.for_model(name), queue, state.hosted[name], state.metrics))
        tasks.append(asyncio.create_task(workers[-1].run()))
    state.status = "ready"
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            yield client
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        for queue in state.queues.values():
            await queue.close()


async def test_requests_are_answered_by_the_model_they_name(tokenizer: Any, tmp_path: Path) -> None:
    async with two_models(tokenizer, tmp_path) as client:
        answers = {}
        for model in (None, "judge", "rm"):
            body = BODY if model is None else {**BODY, "model": model}
            r = await client.post("/v1/judge/outcome", json=body)
            assert r.status_code == 200, r.text
            answers[model] = r.json()
        assert [answers[m]["model"] for m in (None, "judge", "rm")] == ["judge", "judge", "rm"]
        # The judge's verdict logit is +1, the reward model's reward -1.
        assert answers["judge"]["score"] > 0.5 > answers["rm"]["score"]
        assert answers[None]["score"] == answers["judge"]["score"]

        r = await client.post("/v1/judge/outcome", json={**BODY, "model": "gpt-4o"})
        assert r.status_code == 404
        assert r.json()["error"]["type"] == "model_not_found"
        assert "served: judge, rm" in r.json()["error"]["message"]

        # A job the reward model cannot answer keeps its typed 422.
        r = await client.post(
            "/v1/judge/outcome", json={**BODY, "model": "rm", "mode": "reasoning"}
        )
        assert r.status_code == 422, r.text

        # A job's result is found whichever model ran it.
        r = await client.post("/v1/judge/outcome", json={**BODY, "model": "rm", "cache": False})
        stored = await client.get(f"/v1/results/{r.headers['X-Job-Id']}")
        assert stored.json()["model"] == "rm"


async def test_every_model_is_listed_and_ready_on_its_own(tokenizer: Any, tmp_path: Path) -> None:
    async with two_models(tokenizer, tmp_path) as client:
        cards = (await client.get("/v1/models")).json()["data"]
        assert [(c["id"], c["kind"], c["ready"], c["workers"]) for c in cards] == [
            ("judge", "generative", True, 1),
            ("rm", "reward", True, 1),
        ]
        ready = (await client.get("/ready")).json()
        assert ready["model"] == "judge"
        assert ready["models"] == [
            {"name": "judge", "ready": True, "workers": 1},
            {"name": "rm", "ready": True, "workers": 1},
        ]


async def test_each_models_queue_and_workers_have_their_own_metrics(
    tokenizer: Any, tmp_path: Path
) -> None:
    async with two_models(tokenizer, tmp_path) as client:
        for model in ("judge", "rm", "rm"):
            r = await client.post(
                "/v1/judge/outcome", json={**BODY, "model": model, "cache": False}
            )
            assert r.status_code == 200, r.text
        text = (await client.get("/metrics")).text
    for model, jobs in (("judge", 1), ("rm", 2)):
        assert sample_sum(text, "verifier_queue_wait_seconds_count", model=model) == jobs
        assert sample_sum(text, "verifier_batch_size_sum", model=model) == jobs
        assert sample_sum(text, "verifier_worker_progress_timestamp_seconds", model=model) > 0
        assert f'verifier_queue_depth{{model="{model}"}} 0.0' in text
        assert f'verifier_jobs_dead_total{{model="{model}"}} 0.0' in text


async def test_a_full_queue_refuses_its_model_only(tokenizer: Any, tmp_path: Path) -> None:
    """No worker reads the RM's queue, of one job: a second RM request is a 429 counted for
    the RM, and the judge answers all the while."""
    extra = {"queue": {"max_queue_depth": 1}, "limits": {"request_timeout_s": 3}}
    async with two_models(tokenizer, tmp_path, hosted=("judge",), **extra) as client:
        body = {**BODY, "model": "rm", "cache": False}
        waiting = asyncio.create_task(client.post("/v1/judge/outcome", json=body))

        async def queued() -> None:
            depth = 'verifier_queue_depth{model="rm"} 1.0'
            while depth not in (await client.get("/metrics")).text:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(queued(), 5)
        r = await client.post("/v1/judge/outcome", json=body)
        assert r.status_code == 429, r.text
        assert r.json()["error"]["type"] == "overloaded"
        assert (await client.post("/v1/judge/outcome", json=BODY)).status_code == 200
        assert (await waiting).status_code == 504  # its deadline passed in the queue
        text = (await client.get("/metrics")).text
    assert sample_sum(text, "verifier_queue_full_total", model="rm") == 1
    assert sample_sum(text, "verifier_queue_full_total", model="judge") == 0


def test_serve_runs_in_process_only_models_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from service.cli import app

    monkeypatch.setenv("VERIFIER_MODELS", json.dumps(MODELS))
    r = CliRunner().invoke(app, ["serve", "--model", "nope"])
    assert r.exit_code == 2
    assert "--model nope: VERIFIER_MODELS names judge, rm" in r.output
    # Without Redis, a model left out of this process would have no worker anywhere.
    r = CliRunner().invoke(app, ["serve", "--model", "rm"])
    assert r.exit_code == 2
    assert "set VERIFIER_REDIS_URL" in r.output


def test_each_engine_of_a_process_gets_its_own_cpu_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two models in one process: vLLM's engine core reads its cores and KV cache space from
    the environment when spawned, so each engine's start sets its own; the operator's win."""
    from service.engine import vllm_engine

    monkeypatch.setattr(vllm_engine, "_SET_HERE", set())
    for key in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE", "VLLM_CACHE_ROOT"):
        monkeypatch.delenv(key, raising=False)
    s = settings(
        [
            {"name": "judge", "engine": {"cpu_threads_bind": "0", "cpu_kvcache_gib": 1}},
            {"name": "rm", "engine": {"cpu_threads_bind": "1", "cpu_kvcache_gib": 3}},
        ]
    )
    seen = []
    for name in ("judge", "rm"):
        vllm_engine.configure_vllm_env(s.for_model(name), "cpu")
        seen.append((os.environ["VLLM_CPU_OMP_THREADS_BIND"], os.environ["VLLM_CPU_KVCACHE_SPACE"]))
    assert seen == [("0", "1"), ("1", "3")]
    monkeypatch.setattr(vllm_engine, "_SET_HERE", set())
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")  # the operator's
    vllm_engine.configure_vllm_env(s.for_model("rm"), "cpu")
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "7"
