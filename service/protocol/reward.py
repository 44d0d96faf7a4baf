"""Wire models of ``POST /get_reward``: OpenRLHF's remote reward model shape.

OpenRLHF (``--reward.remote_url``) posts ``{"query": [...], "prompts": [...], "labels": [...]}``
where each query is prompt plus response as one decoded string, and reads ``rewards``,
``scores`` (in [0, 1], used by dynamic filtering) and ``extra_logs``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.json_schema import SkipJsonSchema

from service.protocol.base import BudgetInfo, JudgeMode, Metered, ModelChoice, Usage, _non_blank
from service.protocol.calibrate import CalibrationChoice, check_outcome_method
from service.protocol.calibrated import CalibrationInfo
from service.protocol.compare import CompareSpec
from service.protocol.judge import VerifierKind
from service.protocol.limits import (
    Bounded,
    Documents,
    ReasoningTokens,
    Reference,
    Texts,
    bounded,
)
from service.protocol.reward_shapes import label_spec
from service.protocol.rewards import RewardItem


class RewardRequest(CalibrationChoice, ModelChoice):
    """POST /get_reward. The last four fields are this service's; unset, the settings apply."""

    query: Annotated[list[str], Texts, Documents] = Field(
        default_factory=list, description="Prompt + response, decoded."
    )
    prompts: list[str] = Field(
        default_factory=list,
        description="The prompts, when sent: a query that starts with its prompt is cut there.",
    )
    labels: list[Any] = Field(
        default_factory=list,
        description="Query i's reference (the gold answer or a reference solution): a string "
        "or a number; empty or null = none for that query (OpenRLHF sends '' without a label "
        "key). A query with a reference is verified `hybrid` unless `verifier` says otherwise. "
        "A label that is an object is that query's own verification spec, as /v1/rewards "
        "takes it (`{type: ...}`, or `{components, formula}`).",
    )
    separator: str | None = Field(
        default=None,
        description="Where the response starts (last occurrence); default "
        "VERIFIER_REWARD__SEPARATOR, else the chat template's assistant marker.",
    )
    mode: JudgeMode | None = Field(default=None, description="Default VERIFIER_REWARD__MODE.")
    reasoning_tokens: Annotated[int | None, ReasoningTokens] = Field(
        default=None, ge=1, description="Default VERIFIER_REWARD__REASONING_TOKENS."
    )
    cache: bool = True
    verifier: VerifierKind | None = Field(
        default=None,
        description="model | rule | hybrid for every query; default: hybrid for a query with "
        "a reference, model without. rule needs every query's label.",
    )
    criteria: Annotated[str | None, Reference] = Field(
        default=None, description="What counts as correct (rubric text), for every query."
    )
    method: Literal["outcome", "compare"] = Field(
        default="outcome",
        description="outcome: each query judged alone; compare: the queries of one prompt (and "
        "one label) compared with each other in one comparison, the reward being each one's "
        "compare score (a prompt with one query is judged alone).",
    )
    compare: CompareSpec | None = Field(
        default=None, description="method='compare': how (default pairwise, both orders)."
    )

    @model_validator(mode="after")
    def _lengths(self) -> RewardRequest:
        if self.prompts and len(self.prompts) != len(self.query):
            raise ValueError(
                f"prompts has {len(self.prompts)} items for {len(self.query)} queries; send one "
                "per query or none"
            )
        if self.labels and len(self.labels) != len(self.query):
            raise ValueError(
                f"labels has {len(self.labels)} items for {len(self.query)} queries; send one "
                "per query or none"
            )
        refs = self.references()
        specs = self.spec_items()
        if specs and self.method == "compare":
            raise ValueError(
                f"labels[{min(specs)}] is a verification spec; specs route queries one by one, "
                "not with method='compare'"
            )
        if self.verifier in ("rule", "hybrid"):
            missing = [i for i, r in enumerate(refs) if r is None and i not in specs]
            if missing:
                raise ValueError(
                    f"verifier={self.verifier!r} needs a label for every query; "
                    f"labels[{missing[0]}] is missing or empty"
                )
        if self.criteria is not None:
            _non_blank(self.criteria, "criteria")
        if self.method == "compare" and self.verifier in ("rule", "hybrid"):
            raise ValueError(
                f"verifier={self.verifier!r} with method='compare': a comparison is read by the "
                "model (each group's label is shown to it); use verifier='model' or unset"
            )
        check_outcome_method(self.method, self.calibration_id)
        if self.method != "compare" and self.compare is not None:
            raise ValueError("compare options apply to method='compare' only")
        if self.method == "compare":
            self.compare_spec().check_compare(2, 1, "a prompt's queries")
        return self

    def compare_spec(self) -> CompareSpec:
        return self.compare or CompareSpec()

    def bounded_parts(self) -> list[Bounded]:
        """Each label, read as a reference (a number is its text), or as a spec."""
        parts = [
            Bounded(f"labels[{i}]", ref, "reference")
            for i, ref in enumerate(self.references())
            if ref is not None
        ]
        for i, item in self.spec_items().items():
            parts += bounded(item, f"labels[{i}].")
        return parts

    def spec_items(self) -> dict[int, RewardItem]:
        """Per query whose label is a spec, that spec as a reward item (its prompt and response
        filled in by the serving, which splits the query)."""
        out: dict[int, RewardItem] = {}
        for i, label in enumerate(self.labels):
            if isinstance(label, dict):
                if "type" not in label and "components" not in label:
                    raise ValueError(
                        f"labels[{i}] is an object without `type` or `components`; an object "
                        "label is a verification spec (docs/api.md, /v1/rewards), a reference "
                        "is a string or a number"
                    )
                try:
                    out[i] = RewardItem.model_validate(
                        {"prompt": "(query)", "response": "", **label_spec(label)}
                    )
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"])
                    raise ValueError(f"labels[{i}].{where}: {first['msg']}") from exc
        return out

    def references(self) -> list[str | None]:
        """Query i's reference, or None (no label, an empty one, null, or a spec)."""
        refs: list[str | None] = []
        for i in range(len(self.query)):
            label = self.labels[i] if self.labels else None
            if label is None or isinstance(label, dict):
                refs.append(None)
            elif isinstance(label, bool) or not isinstance(label, str | int | float):
                raise ValueError(
                    f"labels[{i}] is {type(label).__name__}; a reference is a string or a number "
                    "(or an object: a verification spec)"
                )
            else:
                text = str(label)
                refs.append(text if text.strip() else None)
        return refs


class _RewardFields(BaseModel):
    rewards: list[float] = Field(
        description="P(correct) of each response (= scores); a rule decision is 1 or 0; an "
        "undecided rule-only check 0 (see extra_logs). A query decided by its own spec label "
        "gets that spec's reward, which a formula or a reward model may take outside [0, 1]."
    )
    scores: list[float] = Field(description="P(correct) in [0, 1] (a spec's reward, clipped).")
    extra_logs: dict[str, list[float]] = Field(
        default_factory=dict,
        description="Per query: `verifier_logit` (the model's logp('1') - logp('0'); +-1e4 "
        "for a rule decision or an empty response; 0 undecided), `decided_by_rule` (1/0), "
        "`decided_by_model` (1/0), `rule_equivalent` (1/0; 0 also when undecided), "
        "`model_score` (the model's raw P(correct) where it judged, 0 where it did not); with "
        "a spec label, `decided_by_spec` (1/0; verifier_logit 0 for those queries).",
    )
    calibration: CalibrationInfo | None = Field(
        default=None,
        description="The calibration the model-decided scores went through (then "
        "extra_logs.model_score holds the raw ones); null: raw.",
    )


class RewardResponse(Metered, _RewardFields):
    usage: Usage = Field(default_factory=Usage)
    # OpenRLHF's shape has no budget, and a RewardRequest no max_eval_tokens (so the planner
    # never sets one): left out of the schema and of every body.
    budget: SkipJsonSchema[BudgetInfo | None] = Field(default=None, exclude=True)
