"""``/get_reward`` (OpenRLHF's remote reward model): each query judged as an outcome."""

from __future__ import annotations

import asyncio

from service.config import RewardSettings
from service.errors import InvalidRequest
from service.protocol import OutcomeRequest, OutcomeResponse, Usage
from service.protocol.compare import MAX_READS, CompareRequest, CompareResponse, CompareSpec
from service.protocol.reward import RewardRequest, RewardResponse
from service.protocol.reward_results import RewardResult, RewardsResponse
from service.protocol.rewards import RewardItem, RewardsRequest
from service.scoring.reward import BoundaryNotFound, ChatMarkers, chat_markers, split_query
from service.scoring.tokenizer import Tokenizer
from service.serving.compare import CompareServing
from service.serving.outcome import OutcomeServing
from service.serving.rewards import RewardsServing


class RewardServing:
    def __init__(
        self,
        outcome: OutcomeServing,
        tokenizer: Tokenizer,
        settings: RewardSettings,
        compare: CompareServing | None = None,
        rewards: RewardsServing | None = None,
    ) -> None:
        self._outcome = outcome
        self._rewards = rewards
        self._settings = settings
        self._markers: ChatMarkers = chat_markers(tokenizer)
        self._compare = compare

    async def reward(self, req: RewardRequest) -> RewardResponse:
        separator = self._settings.separator if req.separator is None else req.separator
        pairs = []
        for i, query in enumerate(req.query):
            prompt = req.prompts[i] if req.prompts else None
            try:
                pairs.append(split_query(query, prompt, separator, self._markers))
            except BoundaryNotFound as exc:
                raise InvalidRequest(f"query[{i}]: {exc}") from exc
        refs = req.references()
        if req.method == "compare":
            return await self._by_comparison(pairs, refs, req)
        specs = {
            i: item.model_copy(update={"prompt": pairs[i][0] or "(empty)", "response": pairs[i][1]})
            for i, item in req.spec_items().items()
        }
        for i, item in specs.items():  # a slow or invalid regex: 422 before any engine work
            try:
                item.check_patterns(f"labels[{i}]")
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from exc
        judged, by_spec = await asyncio.gather(
            asyncio.gather(
                *(
                    self._judge(q, r, ref, req)
                    for i, ((q, r), ref) in enumerate(zip(pairs, refs, strict=True))
                    if i not in specs
                )
            ),
            self._by_spec(specs, req),
        )
        rest = iter(judged)
        results = [None if i in specs else next(rest) for i in range(len(pairs))]
        usage = sum((res.usage for res in results if res is not None), by_spec.usage)
        # An empty response (or question) is not a correct answer: 0, and no engine call; an
        # undecided rule-only check is 0 too (OpenRLHF needs a number), flagged in extra_logs.
        scores = [
            res.score if res is not None and res.score is not None else 0.0 for res in results
        ]
        rewards = list(scores)
        logs = _extra_logs(results)
        if specs:  # the key only where a label is a spec: the usual logs keep their keys
            logs["decided_by_spec"] = [0.0] * len(pairs)
        for i, result in zip(sorted(specs), by_spec.results, strict=True):
            _spec_logs(logs, i, result)
            rewards[i] = result.reward
            scores[i] = min(1.0, max(0.0, result.reward))  # scores are in [0, 1]
        return RewardResponse(rewards=rewards, scores=scores, extra_logs=logs, usage=usage)

    async def _by_spec(self, specs: dict[int, RewardItem], req: RewardRequest) -> RewardsResponse:
        """The queries whose label is a spec (their prompt and response filled in), as one
        rewards request (each by its own spec)."""
        if not specs:
            return RewardsResponse(model="", results=[], usage=Usage())
        if self._rewards is None:
            raise RuntimeError("per-query specs need the rewards serving")
        items = [item for _, item in sorted(specs.items())]
        return await self._rewards.rewards(
            RewardsRequest(
                items=items, mode=req.mode, reasoning_tokens=req.reasoning_tokens, cache=req.cache
            )
        )

    async def _by_comparison(
        self, pairs: list[tuple[str, str]], refs: list[str | None], req: RewardRequest
    ) -> RewardResponse:
        """method='compare': the queries of one (question, label) compared in one comparison
        (a group larger than one comparison may read is cut in chunks); a query alone in its
        group, or with an empty response, is judged as an outcome."""
        groups: dict[tuple[str, str | None], list[int]] = {}
        alone: list[int] = []
        for i, ((question, response), ref) in enumerate(zip(pairs, refs, strict=True)):
            if question and response:
                groups.setdefault((question, ref), []).append(i)
            else:
                alone.append(i)
        spec = req.compare_spec()
        size = largest_group(spec, 1)  # /get_reward reads one sample
        chunks: list[tuple[str, str | None, list[int]]] = []
        for (question, ref), members in groups.items():
            for start in range(0, len(members), size):
                part = members[start : start + size]
                if len(part) > 1:
                    chunks.append((question, ref, part))
                else:
                    alone += part
        compared, judged = await asyncio.gather(
            asyncio.gather(
                *(self._compare_chunk(q, ref, part, pairs, req) for q, ref, part in chunks)
            ),
            asyncio.gather(*(self._judge(*pairs[i], refs[i], req) for i in alone)),
        )
        n = len(pairs)
        scores = [0.0] * n
        logs: dict[str, list[float]] = {
            "compare_reward": [0.0] * n,
            "compare_group_size": [0.0] * n,
            "model_score": [0.0] * n,
        }
        usage = Usage()
        for (_, _, part), resp in zip(chunks, compared, strict=True):
            usage += resp.usage
            for i, result in zip(part, resp.results, strict=True):
                scores[i] = result.score
                logs["compare_reward"][i] = result.reward
                logs["compare_group_size"][i] = float(len(part))
        for i, res in zip(alone, judged, strict=True):
            if res is not None:
                usage += res.usage
                scores[i] = res.score or 0.0
                logs["model_score"][i] = (res.score or 0.0) if res.decided_by == "model" else 0.0
        return RewardResponse(rewards=scores, scores=scores, extra_logs=logs, usage=usage)

    async def _compare_chunk(
        self,
        question: str,
        reference: str | None,
        part: list[int],
        pairs: list[tuple[str, str]],
        req: RewardRequest,
    ) -> CompareResponse:
        if self._compare is None:
            raise RuntimeError("method='compare' needs the compare serving")
        mode = req.mode or self._settings.mode
        reasoning = req.reasoning_tokens or self._settings.reasoning_tokens
        return await self._compare.compare(
            CompareRequest.model_validate(
                {
                    **req.compare_spec().model_dump(),
                    "question": question,
                    "responses": [pairs[i][1] for i in part],
                    "reference": reference,
                    "criteria": req.criteria,
                    "reasoning_tokens": reasoning if mode == "reasoning" else None,
                    "return_reads": False,
                }
            )
        )

    async def _judge(
        self, question: str, response: str, reference: str | None, req: RewardRequest
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
            reference=reference,
            criteria=req.criteria,
            verifier=req.verifier if reference is not None else None,
        )
        return await self._outcome.judge(outcome)


def _spec_logs(logs: dict[str, list[float]], i: int, result: RewardResult) -> None:
    """Query i's extra_logs when its own spec decided it (0 where a key does not apply)."""
    logs["decided_by_spec"][i] = 1.0
    logs["decided_by_rule"][i] = float(result.decided_by == "rule")
    logs["decided_by_model"][i] = float(result.decided_by in ("model", "rubric", "reward_model"))
    logs["rule_equivalent"][i] = float(result.decided_by == "rule" and result.reward == 1.0)
    logs["model_score"][i] = result.score or 0.0
    logs["verifier_logit"][i] = 0.0


def _extra_logs(results: list[OutcomeResponse | None]) -> dict[str, list[float]]:
    """Per query, which judge decided and what each said; 0 where a judge did not run."""
    if not results:
        return {}
    by_model = [r is not None and r.decided_by == "model" for r in results]
    return {
        "decided_by_rule": [float(r is not None and r.decided_by == "rule") for r in results],
        "decided_by_model": [float(m) for m in by_model],
        "rule_equivalent": [
            float(r is not None and r.rule is not None and bool(r.rule.equivalent)) for r in results
        ],
        "model_score": [
            (r.score or 0.0) if r is not None and m else 0.0
            for r, m in zip(results, by_model, strict=True)
        ],
        "verifier_logit": [_logit(r) for r in results],
    }


LOGIT_CLIP = 1e4  # a certain 1 or 0 (a rule decision, an empty response) as a finite logit


def _logit(result: OutcomeResponse | None) -> float:
    """The reward's logit: the model's, or +-LOGIT_CLIP for a certain 1 or 0; 0 undecided."""
    if result is None:
        return -LOGIT_CLIP
    if result.logit is not None:
        return max(-LOGIT_CLIP, min(LOGIT_CLIP, result.logit))
    if result.score is None:
        return 0.0
    return LOGIT_CLIP if result.score >= 0.5 else -LOGIT_CLIP


def largest_group(spec: CompareSpec, samples: int) -> int:
    """The most responses one comparison of ``spec`` may read (MAX_READS and the letters)."""
    n = 2
    while True:
        try:
            spec.check_compare(n + 1, samples)
        except ValueError:
            return n
        n += 1
        if n >= MAX_READS:
            return n
