"""POST /get_reward: OpenRLHF's remote reward model (``--reward.remote_url``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import QueueDep, StateDep
from service.api.limits import check_counts, check_many
from service.api.pipeline import run_job
from service.api.routes.judge import ERRORS
from service.protocol.reward import RewardRequest, RewardResponse

router = APIRouter(tags=["rl"], responses=ERRORS)


@router.post("/get_reward", response_model=RewardResponse)
async def get_reward(
    req: RewardRequest, request: Request, response: Response, state: StateDep, queue: QueueDep
) -> RewardResponse:
    """Each query (prompt + response, decoded) judged as an outcome; rewards = scores = P(correct).

    With several reward URLs OpenRLHF sends some calls with empty lists: answered at once with
    empty lists.
    """
    if not req.query:
        return RewardResponse(rewards=[], scores=[], extra_logs={})
    check_counts(state.settings.limits, documents=len(req.query))
    check_many(state.settings.limits, "query", req.query)
    return await run_job(
        state, queue, request, response, "reward", req, RewardResponse, "/get_reward"
    )
