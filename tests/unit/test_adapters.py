"""LoRA adapters per request: the names, the checks before the engine starts, the routing.

The engine side (an adapter's reads equal the merged weights' forward pass) is
tests/e2e/test_lora_http.py on real vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from service.api.pipeline import served_ids, served_model
from service.config import Settings
from service.engine import base
from service.engine.adapters import AdapterRequests, current_adapter, load_adapters, served_id
from service.errors import ModelNotFound
from service.protocol.base import adapter_of
from service.protocol.jobs import JOBS
from service.serving.cache import judgment_key
from tests.support.apps import app_client
from tests.support.fakes import FakeEngine

BODY = {"question": "What is 2 + 2?", "response": "4"}


def settings(**adapters: str) -> Settings:
    return Settings.model_validate(
        {"engine": {"served_model_name": "judge", "lora_adapters": adapters}}
    )


def test_a_name_with_a_colon_names_an_adapter() -> None:
    assert adapter_of(None) is None
    assert adapter_of("gpt-4o") is None  # any plain name: the served model answers
    assert adapter_of("judge:terse") == "terse"
    assert adapter_of("judge:a:b") == "a:b"


def test_served_model_answers_the_served_one_or_a_known_adapter() -> None:
    s = settings(terse="/a", strict="/b")
    assert served_ids(s) == ["judge", "judge:strict", "judge:terse"]
    assert served_model(s, None) == "judge"
    assert served_model(s, "whatever-the-trainer-calls-it") == "judge"
    assert served_model(s, "judge:terse") == "judge:terse"
    for wrong in ("judge:nope", "other:terse", "ft:gpt-4o:org"):
        with pytest.raises(ModelNotFound) as exc:
            served_model(s, wrong)
        assert (exc.value.status, exc.value.type) == (404, "model_not_found")
        assert "judge:strict, judge:terse" in exc.value.message


@pytest.mark.parametrize("name", ["", "a:b", "a/b"])
def test_an_adapter_name_a_request_could_not_spell_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="lora_adapters"):
        settings(**{name: "/a"})


def test_adapters_need_the_in_process_engine() -> None:
    with pytest.raises(ValidationError, match="in-process engine"):
        Settings.model_validate({"engine": {"backend": "openai", "lora_adapters": {"a": "/a"}}})


def _adapter(folder: Path, **spec: Any) -> str:
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, **spec}))
    return str(folder)


def test_adapter_folders_are_checked_before_the_engine_starts(tmp_path: Path) -> None:
    good = _adapter(tmp_path / "good")
    loaded = load_adapters({"b": good, "a": _adapter(tmp_path / "a", r=4)}, max_rank=8)
    assert [(a.name, a.rank, a.int_id) for a in loaded.values()] == [("a", 4, 1), ("b", 8, 2)]
    with pytest.raises(ValueError, match="no readable adapter_config.json"):
        load_adapters({"x": str(tmp_path / "missing")}, max_rank=8)
    with pytest.raises(ValueError, match="MAX_LORA_RANK"):
        load_adapters({"x": good}, max_rank=4)
    with pytest.raises(ValueError, match="not a LoRA adapter"):
        load_adapters({"x": _adapter(tmp_path / "ia3", peft_type="IA3")}, max_rank=8)


def test_every_job_that_reads_the_model_takes_the_model_field() -> None:
    without = [k for k, spec in JOBS.items() if "model" not in spec.request.model_fields]
    assert without == ["run_code"]  # the sandbox reads no model


def test_the_running_jobs_adapter_names_its_answers_and_its_engine_requests(
    tmp_path: Path,
) -> None:
    requests = AdapterRequests(load_adapters({"terse": _adapter(tmp_path / "t")}, max_rank=8))
    assert requests.current() is None
    assert served_id("judge") == "judge"
    token = current_adapter.set("terse")
    try:
        lora = requests.current()
        assert (lora.lora_name, lora.lora_int_id) == ("terse", 1)
        assert requests.current() is lora  # built once per adapter
        assert served_id("judge") == "judge:terse"
        current_adapter.set("gone")
        with pytest.raises(ModelNotFound):
            requests.current()
    finally:
        current_adapter.reset(token)


def test_a_cached_judgment_of_one_adapter_never_answers_another() -> None:
    info = base.ModelInfo(name="judge", path="/m", max_model_len=4096, device="cpu")
    call = base.JudgeCall(prompt_ids=[1, 2], verdict_ids=[3], after_rationale_ids=[4])
    keys = []
    for adapter in (None, "terse", "strict"):
        token = current_adapter.set(adapter)
        keys.append(judgment_key(info, "tenant", call))
        current_adapter.reset(token)
    assert len(set(keys)) == 3


class AdapterSeeingEngine(FakeEngine):
    """Records the adapter each verdict read ran under."""

    seen: list[str | None]

    async def _verdict(self, ids: Sequence[int]) -> tuple[float, base.TokenUsage]:
        self.seen.append(current_adapter.get())
        return await super()._verdict(ids)


async def test_requests_are_routed_to_their_adapter_over_http(tokenizer: Any) -> None:
    engine = AdapterSeeingEngine(tokenizer, name="judge")
    engine.seen = []
    async with app_client(engine, settings(terse="/a")) as client:
        listed = (await client.get("/v1/models")).json()["data"]
        assert [(m["id"], m["parent"], m["root"]) for m in listed[1:]] == [
            ("judge:terse", "judge", "/a")
        ]
        assert listed[0]["parent"] is None
        r = await client.post("/v1/judge/outcome", json={**BODY, "model": "judge:terse"})
        assert r.status_code == 200, r.text
        assert r.json()["model"] == "judge:terse"
        r = await client.post("/v1/judge/outcome", json={**BODY, "model": "my-policy"})
        assert r.json()["model"] == "judge"
        assert engine.seen == ["terse", None]
        for path, body in (
            ("/v1/judge/outcome", {**BODY, "model": "judge:nope"}),
            ("/v1/rerank", {"query": "q", "documents": ["a"], "model": "judge:nope"}),
            ("/get_reward", {"query": ["q a"], "model": "judge:nope"}),
        ):
            r = await client.post(path, json=body)
            assert r.status_code == 404, (path, r.text)
            error = r.json()["error"]
            assert error["type"] == "model_not_found"
            assert "judge:terse" in error["message"]
        assert len(engine.seen) == 2  # nothing refused reached the engine
