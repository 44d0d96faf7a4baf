"""Text that is not valid Unicode is refused with a 422 naming the field, never a 500."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.protocol import OutcomeRequest, ProcessRequest
from service.protocol.textcheck import check_unicode


def test_lone_surrogate_in_a_field_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"response contains a lone surrogate \(U\+D98C\)"):
        OutcomeRequest.model_validate({"question": "q", "response": "c \ud98c"})


def test_lone_surrogate_in_a_list_item() -> None:
    with pytest.raises(ValidationError, match=r"steps\[1\] contains a lone surrogate"):
        ProcessRequest.model_validate({"question": "q", "steps": ["a", "b\udfff"]})


def test_surrogate_in_a_key_is_not_echoed() -> None:
    with pytest.raises(ValueError, match="lone surrogate") as info:
        check_unicode({"a\ud800": 1})
    str(info.value).encode("utf-8")  # the message itself is valid UTF-8


def test_valid_text_passes_and_pairs_are_fine() -> None:
    req = OutcomeRequest.model_validate({"question": "q 🙂", "response": "\u202eevil\x00"})
    assert req.question == "q 🙂"


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    deep: object = "x"
    for _ in range(100_000):
        deep = [deep]
    check_unicode({"question": deep})  # iterative: no RecursionError
    with pytest.raises(ValidationError):
        OutcomeRequest.model_validate({"question": deep, "response": "r"})


def test_too_many_steps_are_refused_when_the_request_is_parsed() -> None:
    # Before: refused by the worker, after the quota was reserved and the job queued.
    with pytest.raises(ValidationError, match="100 steps given, over max_steps=64"):
        ProcessRequest.model_validate({"question": "q", "steps": ["s"] * 100})
    assert len(ProcessRequest.model_validate({"question": "q", "steps": ["s"] * 64}).steps) == 64
