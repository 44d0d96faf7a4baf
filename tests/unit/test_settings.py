"""Settings that fail fast, with the fix in the message."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from service.config import (
    EngineSettings,
    OpenAIEngineSettings,
    QueueSettings,
    RedisSettings,
    Settings,
    SettingsGroup,
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("VERIFIER_QUEUE__KEY_PREFIX", "VERIFIER_REDIS__PREFIX"),
        ("VERIFIER_QUEUE__REDIS_PREFIX", "VERIFIER_REDIS__PREFIX"),
        ("VERIFIER_QUEUE__REDIS_TIMEOUT_S", "VERIFIER_REDIS__TIMEOUT_S"),
    ],
)
def test_an_old_redis_name_is_refused_with_the_new_one(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    monkeypatch.setenv(old, "3")
    with pytest.raises(ValidationError, match=f"set {new} "):
        Settings()


def test_the_redis_group_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_REDIS__PREFIX", "tenant-a:")
    monkeypatch.setenv("VERIFIER_REDIS__TIMEOUT_S", "0.5")
    monkeypatch.setenv("VERIFIER_REDIS_URL", "redis://127.0.0.1:6379/0")
    settings = Settings()
    assert settings.redis == RedisSettings(prefix="tenant-a:", timeout_s=0.5)
    assert settings.redis_url == "redis://127.0.0.1:6379/0"  # the URL stays top level
    assert RedisSettings().prefix == "verifier:"


def test_a_typo_in_a_nested_env_name_fails_naming_the_valid_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VERIFIER_QUEUE__MAX_QUEUE_DEPHT", "3")
    with pytest.raises(ValidationError) as info:
        Settings()
    message = str(info.value)
    assert "unknown setting 'max_queue_depht'" in message
    assert "did you mean 'max_queue_depth'?" in message
    assert "valid names: batch_wait_ms, claim_idle_ms," in message  # the whole group, sorted


def test_a_typo_two_groups_deep_fails_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_ENGINE__OPENAI__MODLE", "judge")
    with pytest.raises(ValidationError, match="did you mean 'model'"):
        Settings()


def test_a_typo_in_a_constructor_argument_fails_naming_the_valid_names() -> None:
    with pytest.raises(ValidationError, match="unknown setting 'timeout'.*valid names: "):
        RedisSettings(timeout=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="unknown setting 'modle'"):
        EngineSettings(openai=OpenAIEngineSettings(), modle="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="unknown setting 'colour'; valid names"):
        QueueSettings(colour="blue")  # type: ignore[call-arg]  # nothing close: no guess


def test_every_nested_group_refuses_unknown_names() -> None:
    groups = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }
    assert groups  # the check below can fail
    for name, group in groups.items():
        assert issubclass(group, SettingsGroup), name
        with pytest.raises(ValidationError, match="unknown setting"):
            group.model_validate({"no_such_setting": 1})


def test_correct_names_still_set_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_QUEUE__MAX_QUEUE_DEPTH", "3")
    monkeypatch.setenv("VERIFIER_ENGINE__OPENAI__MODEL", "judge")
    settings = Settings()
    assert settings.queue.max_queue_depth == 3
    assert settings.engine.openai.model == "judge"
