"""POST /v1/rewards: a mixed RL batch, a verifier per sample (docs/api.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from service.api.errors import ERRORS
from service.api.pipeline import JobDep, served_model
from service.errors import DeadlineExceeded, InvalidRequest
from service.protocol import Metered
from service.protocol.reward_results import RewardResult, RewardsResponse, all_fallback
from service.protocol.reward_shapes import (
    NemoVerifyRequest,
    NemoVerifyResponse,
    SlimeRewardRequest,
)
from service.protocol.rewards import RewardItem, RewardsRequest

router = APIRouter(tags=["rl"], responses=ERRORS)

# How long past deadline_s the API waits for the worker's answer (which leaves the worker just
# before the deadline) before answering every item with the fallback itself.
DEADLINE_GRACE_S = 0.5


@router.post("/v1/rewards", response_model=RewardsResponse)
async def rewards(req: RewardsRequest, job: JobDep) -> Metered:
    """Each item verified by its own spec (math, choice, string, model, rubric, reward_model),
    or by named components combined by weights or a formula; with ``deadline_s`` the call
    answers on time, what was not decided flagged ``timed_out`` with ``fallback_reward``."""
    try:
        req.check_patterns()
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from exc
    timeout = None if req.deadline_s is None else req.deadline_s + DEADLINE_GRACE_S
    try:
        async with job.reward_slots(len(req.items)):
            return await job.run("rewards", req, timeout_s=timeout)
    except DeadlineExceeded:
        if req.deadline_s is None:
            raise
        # No worker answered in time (a long queue, no worker): every item is the fallback.
        return all_fallback(req, served_model(job.state.settings, req.model))


def _one(make: Callable[[], RewardItem]) -> RewardsRequest:
    """A stack's sample as a one-item rewards request; a bad spec is a 422 naming its field."""
    try:
        return RewardsRequest(items=[make()])
    except ValidationError as exc:
        where = "; ".join(
            ".".join(str(p) for p in e["loc"]) + f": {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequest(where) from exc
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from exc


async def _result(req: RewardsRequest, job: JobDep) -> RewardResult:
    resp = await rewards(req, job)
    assert isinstance(resp, RewardsResponse)  # the rewards job's response model
    return resp.results[0]


# With ?scalar=true the body is the reward alone, a JSON number (slime without --reward-key).
@router.post("/v1/rewards/slime", response_model=RewardResult | float)
async def slime_reward(req: SlimeRewardRequest, job: JobDep, scalar: bool = False) -> Any:
    """slime's remote reward model (``--rm-type remote_rm``): ``{prompt, response, label}``,
    where ``label`` is the gold answer or a /v1/rewards spec. Read the reward with
    ``--reward-key reward``, or add ``?scalar=true`` to the URL for a bare number."""
    result = await _result(_one(req.item), job)
    if scalar:
        return JSONResponse(result.reward)
    return result


@router.post("/verify", response_model=NemoVerifyResponse)
async def nemo_verify(req: NemoVerifyRequest, job: JobDep) -> NemoVerifyResponse:
    """NeMo Gym's resources-server ``/verify``: the body echoed with ``reward`` (and
    ``reward_components`` for a row with components), its final assistant message verified
    by the row's spec."""
    result = await _result(_one(req.item), job)
    extra: dict[str, Any] = {}
    if result.timed_out or result.failed is not None:
        # NeMo Gym's own marker of a failed judge, so its tooling can drop the sample
        extra = {
            "_ng_failure_class": "judge_failed",
            "_ng_failure_judge_error": result.failed or "timed out",
        }
    return NemoVerifyResponse.model_validate(
        {
            **req.model_dump(mode="json", exclude_unset=True),
            **extra,
            "reward": result.reward,
            "reward_components": result.reward_components,
            "decided_by": result.decided_by,
            "extracted_answer": result.extracted,
            "timed_out": result.timed_out,
            "failed": result.failed,
        }
    )
