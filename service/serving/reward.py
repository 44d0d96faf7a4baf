"""``/get_reward`` (OpenRLHF's remote reward model): each query judged as an outcome."""

from __future__ import annotations

import asyncio

from service.config import RewardSettings
from service.errors import InvalidRequest
from service.protocol import OutcomeRequest, OutcomeResponse, Usage
from service.protocol.reward import RewardRequest, RewardResponse
from service.scoring.reward import BoundaryNotFound, ChatMarkers, chat_markers, split_query
from service.scoring.tokenizer import Tokenizer
from service.serving.outcome import OutcomeServing


class RewardServing:
    def __init__(
        self, outcome: OutcomeServing, tokenizer: Tokenizer, settings: RewardSettings
    ) -> None:
        self._outcome = outcome
        self._settings = settings
        self._markers: ChatMarkers = chat_markers(tokenizer)

    async def reward(self, req: RewardRequest) -> RewardResponse:
        separator = self._settings.separator if req.separator is None else req.separator
        pairs = []
        for i, query in enumerate(req.query):
            prompt = req.prompts[i] if req.prompts else None
            try:
                pairs.append(split_query(query, prompt, separator, self._markers))
            except BoundaryNotFound as exc:
                raise InvalidRequest(f"query[{i}]: {exc}") from exc
        results = await asyncio.gather(*(self._judge(q, r, req) for q, r in pairs))
        usage = sum((res.usage for res in results if res is not None), Usage())
        # An empty response (or question) is not a correct answer: 0, and no engine call.
        scores = [res.score if res is not None else 0.0 for res in results]
        logits = [res.logit if res is not None else float("-inf") for res in results]
        return RewardResponse(
            rewards=scores,
            scores=scores,
            extra_logs={"verifier_logit": [max(v, -1e4) for v in logits]} if results else {},
            usage=usage,
        )

    async def _judge(
        self, question: str, response: str, req: RewardRequest
    ) -> OutcomeResponse | None:
        if not question or not response:
            return None
        mode = req.mode or self._settings.mode
        outcome = OutcomeRequest(
            question=question,
            response=response,
            mode=mode,
            reasoning_tokens=req.reasoning_tokens or self._settings.reasoning_tokens,
            cache=req.cache,
        )
        return await self._outcome.judge(outcome)
