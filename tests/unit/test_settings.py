"""Settings that fail fast, with the fix in the message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.config import QueueSettings, Settings


def test_the_old_prefix_name_is_refused_with_the_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_QUEUE__KEY_PREFIX", "tenant-a:")
    with pytest.raises(ValidationError, match="set VERIFIER_QUEUE__REDIS_PREFIX instead"):
        Settings()


def test_the_new_prefix_name_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIER_QUEUE__REDIS_PREFIX", "tenant-a:")
    assert Settings().queue.redis_prefix == "tenant-a:"
    assert QueueSettings().redis_prefix == "verifier:"
