"""The budget policy: run a request as is, degrade it to fit ``max_eval_tokens``, or refuse it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from service.errors import BudgetTooSmall
from service.kinds import JobKind
from service.protocol.compare import CompareRequest
from service.serving.budget.estimates import Estimate, estimate


@dataclass(frozen=True)
class BudgetPlan:
    """What to run: `request` (the original or a degraded copy) and its estimate."""

    request: BaseModel
    estimate: Estimate
    degraded: bool
    note: str | None


def _degradable(req: BaseModel) -> bool:
    """Whether lowering to direct with one sample would change (and cheapen) the request."""
    if isinstance(req, CompareRequest):
        return req.reasoning
    return getattr(req, "mode", None) == "reasoning" or getattr(req, "samples", 1) > 1


def _degrade(req: BaseModel) -> BaseModel:
    if isinstance(req, CompareRequest):
        return req.degraded()
    # Re-validated (not model_copy) so the model validators check the lowered request too.
    return type(req).model_validate({**req.model_dump(), "mode": "direct", "samples": 1})


def _refusal(kind: JobKind, req: BaseModel, est: int, limit: int) -> BudgetTooSmall:
    fixes = [f"raise max_eval_tokens to at least {est}"]
    if _degradable(req):
        fixes += ["set budget_policy='degrade' (reasoning lowered to direct, one sample)"]
        fixes += ["lower reasoning_tokens or samples"]
    else:
        fixes += ["shorten the texts"]
        if kind in ("score", "rerank"):
            fixes += ["send fewer documents"]
        compare = kind == "compare" or getattr(req, "method", None) == "compare"
        if getattr(req, "mode", None) == "direct" and kind != "outcome" and not compare:
            fixes += ["use mode='single_pass' for the process part (one call per response)"]
    return BudgetTooSmall(
        f"estimated {est} tokens for this {kind} request, over max_eval_tokens={limit}; "
        + ", or ".join(fixes),
        estimate=est,
        limit=limit,
    )


def _degraded_plan(kind: JobKind, req: BaseModel, before: int, limit: int) -> BudgetPlan:
    lowered = _degrade(req)
    after = estimate(kind, lowered)
    if after.total > limit:
        raise BudgetTooSmall(
            f"estimated {before} tokens for this {kind} request, still {after.total} with "
            f"reasoning lowered to direct, over max_eval_tokens={limit}; raise max_eval_tokens "
            f"to at least {after.total} or shorten the texts",
            estimate=after.total,
            limit=limit,
        )
    note = (
        f"reasoning lowered to direct to fit max_eval_tokens={limit} "
        f"(estimate {before} -> {after.total})"
    )
    return BudgetPlan(request=lowered, estimate=after, degraded=True, note=note)


def plan(kind: JobKind, req: BaseModel) -> BudgetPlan:
    """Check `req` against its ``max_eval_tokens``; degrade it or raise ``BudgetTooSmall``.

    - no limit, or the estimate fits: the request as is;
    - over, ``budget_policy='degrade'`` and reasoning (or samples > 1): a copy in direct mode
      with one sample, if that fits (else ``BudgetTooSmall``);
    - over otherwise: ``BudgetTooSmall`` (422 budget_too_small).
    """
    est = estimate(kind, req)
    # getattr: the fields live on the request models' BudgetOptions; tolerate models without.
    limit: int | None = getattr(req, "max_eval_tokens", None)
    if limit is None or est.total <= limit:
        return BudgetPlan(request=req, estimate=est, degraded=False, note=None)
    if getattr(req, "budget_policy", "refuse") == "degrade" and _degradable(req):
        return _degraded_plan(kind, req, est.total, limit)
    raise _refusal(kind, req, est.total, limit)
