"""POST /get_reward: OpenRLHF's remote reward model (``--reward.remote_url``)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import calibrated
from service.api.errors import ERRORS
from service.api.pipeline import JobDep
from service.protocol import Metered
from service.protocol.reward import RewardRequest, RewardResponse

router = APIRouter(tags=["rl"], responses=ERRORS)


@router.post("/get_reward", response_model=RewardResponse)
async def get_reward(req: RewardRequest, job: JobDep) -> Metered:
    """Each query (prompt + response, decoded) judged as an outcome; rewards = scores = P(correct).

    ``labels[i]`` is query i's reference: checked by rule first, the model where the rule
    cannot decide (docs/methods.md E).

    With several reward URLs OpenRLHF sends some calls with empty lists: answered at once with
    empty lists.
    """
    if not req.query:
        return RewardResponse(rewards=[], scores=[], extra_logs={})
    cal = None
    if req.method == "outcome":
        mode = req.mode or job.state.settings.reward.mode
        cal = await job.probability_calibration(req.model, req.calibration_id, "outcome", mode)
    async with job.reward_slots(len(req.query)):
        resp = await job.run("reward", req)
    assert isinstance(resp, RewardResponse)  # the reward job's response model
    return calibrated.reward(resp, cal)
