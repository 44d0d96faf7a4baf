"""Outcome judgments: request -> rule check (with a reference) -> prompts -> engine calls ->
scores (docs/methods.md A.2, E)."""

from __future__ import annotations

from service.engine.adapters import served_id
from service.engine.base import Engine, JudgeCall, JudgeResult, TokenUsage
from service.protocol import OutcomeRequest, OutcomeResponse, SampleJudgment, Usage
from service.protocol.code import CodeTests
from service.protocol.judge import ReferenceOptions, RuleInfo
from service.scoring import prompts
from service.scoring.answers import RuleCheck
from service.scoring.outcome import combine_samples, sigmoid, verdict
from service.serving.code import CodeServing
from service.serving.rules import RuleVerifier


def reference_of(req: ReferenceOptions) -> prompts.Reference | None:
    """What the model's prompt shows of a request's reference (None without one)."""
    if req.reference is None:
        return None
    return prompts.Reference(req.reference, req.criteria)


def rule_info(check: RuleCheck) -> RuleInfo:
    return RuleInfo(
        extracted=check.extracted,
        reference=check.reference,
        equivalent=check.equivalent,
        reason=check.reason,
    )


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

    def __init__(
        self,
        engine: Engine,
        model_name: str,
        rules: RuleVerifier | None = None,
        code: CodeServing | None = None,
    ) -> None:
        self._engine = engine
        self._model = model_name
        # the pool starts at the first check: a service that never gets a reference runs none
        self._rules = rules or RuleVerifier()
        self._code = code or CodeServing(None)

    async def judge(self, req: OutcomeRequest) -> OutcomeResponse:
        if req.tests:  # the tests decide (a ranking asks the model separately to break ties)
            return await self._by_tests(req)
        verifier = req.resolved_verifier()
        info = None
        if verifier != "model":
            assert req.reference is not None  # the request model refuses rule/hybrid without
            check = await self._rules.check(req.response, req.reference)
            info = rule_info(check)
            if check.equivalent is not None or verifier == "rule":
                return self._by_rule(req, info)
        resp = await self._by_model(req)
        resp.rule = info
        return resp

    def admit_tests(self, tests: CodeTests) -> None:
        """Refuse, before any engine work, tests this service cannot run (code off, a
        language not served)."""
        self._code.admit(tests)

    async def _by_tests(self, req: OutcomeRequest) -> OutcomeResponse:
        """The tests' reward (1/0, or the pass share), no engine call."""
        res = await self._code.verify(req.response, req)
        return OutcomeResponse(
            score=res.reward,
            logit=None,
            verdict=verdict(res.reward),
            mode=req.mode,
            model=served_id(self._model),
            decided_by="code",
            code=res,
            usage=Usage(),
        )

    def _by_rule(self, req: OutcomeRequest, info: RuleInfo) -> OutcomeResponse:
        """The rule's decision: 1 or 0, no engine call; undecided (rule only): null."""
        score = None if info.equivalent is None else float(info.equivalent)
        return OutcomeResponse(
            score=score,
            logit=None,
            verdict=None if score is None else verdict(score),
            mode=req.mode,
            model=served_id(self._model),
            decided_by=None if score is None else "rule",
            rule=info,
            usage=Usage(),
        )

    async def _by_model(self, req: OutcomeRequest) -> OutcomeResponse:
        reasoning = req.mode == "reasoning"
        rendered = prompts.outcome_prompt(
            self._engine.tokenizer, req.question, req.response, reasoning, reference_of(req)
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
            model=served_id(self._model),
            decided_by="model",
            rationale=per_sample[0].rationale if with_rationale else None,
            samples=per_sample if req.samples > 1 else None,
            usage=Usage.of(usage),
        )
