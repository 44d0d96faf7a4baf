"""Wire models of ``POST /get_reward``: OpenRLHF's remote reward model shape.

OpenRLHF (``--reward.remote_url``) posts ``{"query": [...], "prompts": [...], "labels": [...]}``
where each query is prompt plus response as one decoded string, and reads ``rewards``,
``scores`` (in [0, 1], used by dynamic filtering) and ``extra_logs``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from service.protocol.base import BudgetInfo, JudgeMode, Metered, ServiceModel, Usage


class RewardRequest(ServiceModel):
    """POST /get_reward. The last four fields are this service's; unset, the settings apply."""

    query: list[str] = Field(default_factory=list, description="Prompt + response, decoded.")
    prompts: list[str] = Field(
        default_factory=list,
        description="The prompts, when sent: a query that starts with its prompt is cut there.",
    )
    labels: list[Any] = Field(
        default_factory=list, description="Accepted and not used (the judge needs no reference)."
    )
    separator: str | None = Field(
        default=None,
        description="Where the response starts (last occurrence); default "
        "VERIFIER_REWARD__SEPARATOR, else the chat template's assistant marker.",
    )
    mode: JudgeMode | None = Field(default=None, description="Default VERIFIER_REWARD__MODE.")
    reasoning_tokens: int | None = Field(
        default=None, ge=1, description="Default VERIFIER_REWARD__REASONING_TOKENS."
    )
    cache: bool = True

    @model_validator(mode="after")
    def _lengths(self) -> RewardRequest:
        if self.prompts and len(self.prompts) != len(self.query):
            raise ValueError(
                f"prompts has {len(self.prompts)} items for {len(self.query)} queries; send one "
                "per query or none"
            )
        return self


class _RewardFields(BaseModel):
    rewards: list[float] = Field(description="P(correct) of each response (= scores).")
    scores: list[float] = Field(description="P(correct) in [0, 1].")
    extra_logs: dict[str, list[float]] = Field(
        default_factory=dict, description="Per query: `verifier_logit` (logp('1') - logp('0'))."
    )


class RewardResponse(Metered, _RewardFields):
    usage: Usage = Field(default_factory=Usage)
    # OpenRLHF's shape has no budget, and a RewardRequest no max_eval_tokens (so the planner
    # never sets one): left out of the schema and of every body.
    budget: SkipJsonSchema[BudgetInfo | None] = Field(default=None, exclude=True)
