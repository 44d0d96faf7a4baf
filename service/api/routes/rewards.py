"""POST /v1/rewards: a mixed RL batch, a verifier per sample (docs/api.md)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.errors import DeadlineExceeded, InvalidRequest
from service.protocol import Metered
from service.protocol.reward_results import RewardsResponse, all_fallback
from service.protocol.rewards import RewardsRequest

router = APIRouter(prefix="/v1", tags=["rl"], responses=ERRORS)

# How long past deadline_s the API waits for the worker's answer (which leaves the worker just
# before the deadline) before answering every item with the fallback itself.
DEADLINE_GRACE_S = 0.5


@router.post("/rewards", response_model=RewardsResponse)
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
        return await job.run("rewards", req, timeout_s=timeout)
    except DeadlineExceeded:
        if req.deadline_s is None:
            raise
        # No worker answered in time (a long queue, no worker): every item is the fallback.
        return all_fallback(req, job.state.settings.model_name)
