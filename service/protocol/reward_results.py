"""Wire models of ``POST /v1/rewards``'s answer, and how an item's checks become its result.

Pure: the worker combines what its checks returned (``combine``); the API answers a call whose
job missed its deadline with every item's fallback (``all_fallback``), by the same rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.protocol.base import Metered, Usage
from service.protocol.code import CodeResult
from service.protocol.rewards import RewardItem, RewardsRequest
from service.scoring import rewards as checks

RewardDecider = Literal[
    "rule", "model", "match", "rubric", "reward_model", "code", "weighted", "formula", "fallback"
]


class CriterionResult(BaseModel):
    probability: float = Field(description="P(yes) that the criterion holds.")
    holds: bool = Field(
        description="P(yes) >= 0.5 for a positive weight; P(yes) < 0.5 for a penalty."
    )


class CheckResult(BaseModel):
    """One spec's result."""

    reward: float
    decided_by: RewardDecider = Field(
        description="rule: math-verify decided; model: the judge's P(correct); match: a string "
        "or choice check; rubric: the criteria's aggregate; reward_model: the served RM; code: "
        "the tests run in the sandbox; "
        "weighted / formula: the components combined; fallback: timed out or failed."
    )
    score: float | None = Field(
        default=None, description="The judge's raw P(correct), where a model read decided."
    )
    extracted: str | None = Field(
        default=None, description="What a rule, string or choice check read from the response."
    )
    reason: str | None = Field(
        default=None, description="Why a rule check decided as it did (e.g. no_answer)."
    )
    criteria: list[CriterionResult] | None = Field(
        default=None, description="A rubric's criteria, in order."
    )
    code: CodeResult | None = Field(
        default=None, description="A code spec's tests: passed, total and each case's run."
    )
    timed_out: bool = Field(default=False, description="Not decided by deadline_s.")
    failed: str | None = Field(
        default=None,
        description="Why it could not be decided (an engine error, a formula "
        "that divided by zero, a pattern over its time bound).",
    )


class RewardResult(CheckResult):
    """One item's result: ``reward`` is what a trainer uses; with components, each one's value
    and details too."""

    index: int
    id: str | None = None
    reward_components: dict[str, float] | None = Field(
        default=None,
        description="Each component's value by name (components only); a timed-out or failed "
        "component holds fallback_reward.",
    )
    components: dict[str, CheckResult] | None = None


class _RewardsFields(BaseModel):
    object: Literal["list"] = "list"
    model: str
    results: list[RewardResult]
    timed_out: int = Field(default=0, description="Items that timed out.")
    failed: int = Field(default=0, description="Items that failed.")


class RewardsResponse(Metered, _RewardsFields):
    pass


def fallback(
    req: RewardsRequest, *, timed_out: bool = False, failed: str | None = None
) -> CheckResult:
    return CheckResult(
        reward=req.fallback_reward, decided_by="fallback", timed_out=timed_out, failed=failed
    )


def combine(
    req: RewardsRequest, index: int, item: RewardItem, parts: dict[str, CheckResult]
) -> RewardResult:
    """An item's result: its one check, or its components combined (the fallback, flagged,
    when any component timed out or failed)."""
    if item.components is None:
        only = parts[""]
        return RewardResult(index=index, id=item.id, **only.model_dump())
    values = {name: part.reward for name, part in parts.items()}
    timed_out = any(p.timed_out for p in parts.values())
    failed = next((f"{n}: {p.failed}" for n, p in parts.items() if p.failed), None)
    decided_by: RewardDecider = "weighted" if item.formula is None else "formula"
    reward = req.fallback_reward
    if not timed_out and failed is None:
        try:
            formula = item.parsed_formula()
            if formula is None:
                weights = {name: spec.weight for name, spec in item.components.items()}
                reward = checks.weighted_sum(values, weights)
            else:
                reward = formula.evaluate(values)
        except (ArithmeticError, ValueError) as exc:
            failed = f"formula: {exc}"
    if timed_out or failed is not None:
        decided_by = "fallback"
    return RewardResult(
        index=index,
        id=item.id,
        reward=reward,
        decided_by=decided_by,
        timed_out=timed_out,
        failed=failed,
        reward_components=values,
        components=parts,
    )


def all_fallback(req: RewardsRequest, model: str) -> RewardsResponse:
    """Every item answered with the fallback, flagged ``timed_out``: the call's job was not
    answered by its deadline (no worker took it in time)."""
    results = [
        combine(req, i, item, {name: fallback(req, timed_out=True) for name in item.specs()})
        for i, item in enumerate(req.items)
    ]
    return RewardsResponse(
        model=model, results=results, timed_out=len(results), failed=0, usage=Usage()
    )
