"""Outcome judgments: request -> prompts -> engine calls -> scores."""

from __future__ import annotations

from service.engine.base import Engine, JudgeCall, JudgeResult, TokenUsage
from service.protocol import OutcomeRequest, OutcomeResponse, SampleJudgment, Usage
from service.scoring import prompts
from service.scoring.outcome import combine_samples, sigmoid, verdict


def judge_calls(
    rendered: prompts.RenderedJudge,
    *,
    samples: int = 1,
    reasoning_tokens: int = 0,
    temperature: float = 0.0,
    seed: int | None = None,
    cache: bool = True,
) -> list[JudgeCall]:
    """One ``JudgeCall`` per sample; sample i is seeded ``seed + i`` when a seed is given."""
    return [
        JudgeCall(
            prompt_ids=rendered.prompt_ids,
            verdict_ids=rendered.verdict_ids,
            after_rationale_ids=rendered.after_rationale_ids,
            reasoning_tokens=reasoning_tokens,
            temperature=temperature,
            seed=None if seed is None else seed + i,
            stop=(prompts.VERDICT_MARKER,),
            cache=cache,
        )
        for i in range(samples)
    ]


def sample_judgments(results: list[JudgeResult], with_rationale: bool) -> list[SampleJudgment]:
    return [
        SampleJudgment(
            score=sigmoid(r.logit),
            logit=r.logit,
            rationale=r.rationale if with_rationale else None,
            rationale_tokens=r.rationale_tokens,
            rationale_finish=r.rationale_finish,
        )
        for r in results
    ]


class OutcomeServing:
    """Serves POST /v1/judge/outcome."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self._engine = engine
        self._model = model_name

    async def judge(self, req: OutcomeRequest) -> OutcomeResponse:
        reasoning = req.mode == "reasoning"
        rendered = prompts.outcome_prompt(
            self._engine.tokenizer, req.question, req.response, reasoning
        )
        calls = judge_calls(
            rendered,
            samples=req.samples,
            reasoning_tokens=req.reasoning_tokens if reasoning else 0,
            temperature=req.resolved_temperature(),
            seed=req.seed,
            cache=req.cache,
        )
        results = await self._engine.judge(calls)
        usage = TokenUsage()
        for r in results:
            usage.add(r.usage)
        score, logit = combine_samples([r.logit for r in results])
        with_rationale = reasoning and req.return_rationale
        per_sample = sample_judgments(results, with_rationale)
        return OutcomeResponse(
            score=score,
            logit=logit,
            verdict=verdict(score),
            mode=req.mode,
            model=self._model,
            rationale=per_sample[0].rationale if with_rationale else None,
            samples=per_sample if req.samples > 1 else None,
            usage=Usage.of(usage),
        )
