"""Request limits, enforced in one place before a job is queued.

The request models declare what is bounded (``service.protocol.limits``); this module maps each
limit kind to its setting and status: a text over the size limit is a 413, a reference or
criteria over it a 422 (it is one field of a judging request), counts, samples and reasoning
budgets over their limits a 422.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel

from service.config import LimitSettings
from service.errors import InvalidRequest, PayloadTooLarge, ServiceError
from service.protocol.calibrate import ProbabilityCalibrationRequest
from service.protocol.decisions import DecisionRequest, Question, input_blocks
from service.protocol.limits import Bounded, LimitKind, bounded, limits_of
from service.scoring.decisions import Block


@dataclass(frozen=True)
class LimitRule:
    """A limit kind's setting (field of ``LimitSettings``), its error and a fix-it hint."""

    setting: str
    error: type[ServiceError]
    hint: str = ""

    @property
    def env(self) -> str:
        return f"VERIFIER_LIMITS__{self.setting.upper()}"


RULES: Final[dict[LimitKind, LimitRule]] = {
    "text": LimitRule("max_text_chars", PayloadTooLarge),
    "reference": LimitRule(
        "max_text_chars", InvalidRequest, "; send the final answer or a shorter solution"
    ),
    "documents": LimitRule("max_documents", InvalidRequest, "; send them in several requests"),
    "steps": LimitRule("max_steps", InvalidRequest),
    "samples": LimitRule("max_samples", InvalidRequest),
    "reasoning_tokens": LimitRule("max_reasoning_tokens", InvalidRequest),
}


# Budgets a request may leave to their defaults, capped at a smaller running limit. (Not
# `max_steps`: the steps given are checked against it when the request is parsed.)
NUMBERS: Final[frozenset[LimitKind]] = frozenset({"samples", "reasoning_tokens"})


def limit_value(settings: LimitSettings, kind: LimitKind) -> int:
    """The running limit of ``kind``."""
    value: int = getattr(settings, RULES[kind].setting)
    return value


def _decision_texts(
    blocks: list[Block], questions: list[Question], where: str = ""
) -> Iterator[Bounded]:
    """A decision's texts as the model reads them: input blocks, instructions, options."""
    for i, block in enumerate(blocks):
        yield Bounded(f"{where}input[{i}]" if block.header else f"{where}input", block.text, "text")
    for i, q in enumerate(questions):
        spec = q.spec()
        yield Bounded(f"{where}questions[{i}].instructions", spec.instructions, "text")
        for j, (text, desc) in enumerate(spec.options):
            yield Bounded(f"{where}questions[{i}].options[{j}]", f"{text} {desc or ''}", "text")


def checked(req: BaseModel) -> Iterator[Bounded]:
    """Every bounded value of ``req``: its declared fields, and a decision's rendered texts
    (a decisions calibration's too, whose questions in all count as its documents: each is
    one read)."""
    yield from bounded(req)
    if isinstance(req, DecisionRequest):
        yield from _decision_texts(req.blocks(), req.questions)
    if isinstance(req, ProbabilityCalibrationRequest):
        decisions = req.decision_examples()
        if decisions:
            questions = sum(len(ex.questions) for ex in decisions)
            yield Bounded("examples[*].questions", questions, "documents", count=True)
        for n, ex in enumerate(decisions):
            yield from _decision_texts(input_blocks(ex.input), ex.questions, f"examples[{n}].")


def cap_defaults(req: BaseModel, settings: LimitSettings) -> None:
    """Lower a number the caller left out (a reasoning budget, samples) to its running limit,
    in ``req`` and its nested models: a default above an operator's smaller limit is the
    operator's limit, not a refusal of every request that did not name the field."""
    for name in type(req).model_fields:
        value = getattr(req, name)
        if isinstance(value, BaseModel):
            cap_defaults(value, settings)
        elif isinstance(value, list | dict):
            for item in value.values() if isinstance(value, dict) else value:
                if isinstance(item, BaseModel):
                    cap_defaults(item, settings)
        if name in req.model_fields_set or not isinstance(value, int) or isinstance(value, bool):
            continue
        for limit in limits_of(type(req), name):
            if limit.kind in NUMBERS and not (limit.count or limit.each):
                setattr(req, name, min(value, limit_value(settings, limit.kind)))


def enforce(req: BaseModel, settings: LimitSettings) -> None:
    """Raise the first limit ``req`` is over: 413 for a text, 422 for anything else, the
    message naming the field path and the setting. A number left out is capped first."""
    cap_defaults(req, settings)
    for item in checked(req):
        rule = RULES[item.kind]
        limit = limit_value(settings, item.kind)
        if item.size <= limit:
            continue
        if isinstance(item.value, str):
            what = f"{item.path} has {item.size} characters"
        elif item.count:
            what = f"{item.path} has {item.size} items"
        else:
            what = f"{item.path}={item.size}"
        raise rule.error(f"{what}, over the limit of {limit} ({rule.env}){rule.hint}")
