"""Requests are read as their schema says: no lax coercion of booleans, integers or strings.

Schema fuzzing (long mode) found `POST /get_reward` and `POST /v1/split` answering 200 to
`"cache": 0`; a JSON integer still fills a number field.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from service.protocol import OutcomeRequest, SplitRequest
from service.protocol.mcq import MCQAnswerRequest
from service.protocol.reward import RewardRequest

OUTCOME = {"question": "What is 2 + 2?", "response": "4"}
MCQ = {"question": "Which is a prime?", "options": ["4", "7"]}


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (OutcomeRequest, {**OUTCOME, "cache": 0}),
        (OutcomeRequest, {**OUTCOME, "return_rationale": "true"}),
        (OutcomeRequest, {**OUTCOME, "reasoning_tokens": "64"}),
        (OutcomeRequest, {**OUTCOME, "samples": 2.5}),
        (OutcomeRequest, {**OUTCOME, "question": 7}),
        (SplitRequest, {"response": "a\n\nb", "max_steps": True}),
        (SplitRequest, {"response": "a\n\nb", "max_eval_tokens": "512"}),
        (RewardRequest, {"query": [], "cache": 0}),
        (MCQAnswerRequest, {**MCQ, "max_eval_tokens": 512.5}),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused(
    model: type[BaseModel], body: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(body)


def test_json_integers_fill_number_fields_and_the_right_types_pass() -> None:
    req = OutcomeRequest.model_validate({**OUTCOME, "temperature": 1, "cache": False})
    assert (req.temperature, req.cache) == (1.0, False)
    assert isinstance(req.temperature, float)
    assert RewardRequest.model_validate({"query": ["q"], "cache": True}).cache is True
