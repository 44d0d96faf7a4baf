"""Step splitting and process judgments (docs/methods.md A.3, A.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.engine.adapters import served_id
from service.engine.base import Engine, GenerateCall, JudgeResult, TokenUsage
from service.errors import InvalidRequest, NotServedByModel
from service.protocol import (
    ProcessMode,
    ProcessRequest,
    ProcessResponse,
    SampleJudgment,
    SplitInfo,
    SplitMethod,
    SplitRequest,
    SplitResponse,
    Usage,
)
from service.scoring import prompts, splitting
from service.scoring.outcome import combine_samples, sigmoid
from service.scoring.process import aggregate, first_error_step
from service.scoring.tokenizer import encode
from service.serving.budget import split_copy_tokens
from service.serving.outcome import judge_calls, reference_of, sample_judgments


@dataclass(slots=True)
class Steps:
    steps: list[str]
    info: SplitInfo
    usage: TokenUsage


class SplitServing:
    """Serves POST /v1/split and splits responses for process judgments."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def _model_copy(self, response: str) -> tuple[str, TokenUsage]:
        tok = self._engine.tokenizer
        ids = prompts.split_prompt_ids(tok, response, splitting.SPLIT_MARKER)
        # Room for the copy, its markers (about 4 tokens each) and an echoed fence; the budget
        # estimator charges the same.
        max_tokens = split_copy_tokens(len(encode(tok, response)))
        (out,) = await self._engine.generate([GenerateCall(prompt_ids=ids, max_tokens=max_tokens)])
        if out.finish_reason == "length":
            return "", out.usage
        return prompts.strip_copy_wrapper(out.text), out.usage

    async def split(self, response: str, method: SplitMethod, max_steps: int) -> Steps:
        usage = TokenUsage()
        model_output = None
        if splitting.needs_model(response, method):
            try:
                model_output, usage = await self._model_copy(response)
            except NotServedByModel:
                if method == "model":
                    raise
                # auto on a pooling reward model: the heuristic split, as without a model
                model_output = None
            else:
                if not model_output:
                    model_output = ""  # truncated copy: parse_model_split rejects it
        result = splitting.choose_split(response, method, max_steps, model_output)
        info = SplitInfo(method_used=result.method_used, fallback_reason=result.fallback_reason)
        return Steps(steps=result.steps, info=info, usage=usage)

    async def handle(self, req: SplitRequest) -> SplitResponse:
        s = await self.split(req.response, req.method, req.max_steps)
        return SplitResponse(
            steps=s.steps,
            method_used=s.info.method_used,
            fallback_reason=s.info.fallback_reason,
            usage=Usage.of(s.usage),
        )


@dataclass(slots=True)
class StepJudgments:
    logits: list[float]
    samples: list[list[SampleJudgment]]
    exact_fallbacks: int | None
    early_stopped: bool
    usage: TokenUsage


class ProcessServing:
    """Serves POST /v1/judge/process; also the process half of /v1/score."""

    def __init__(self, engine: Engine, splitter: SplitServing, model_name: str) -> None:
        self._engine = engine
        self._splitter = splitter
        self._model = model_name

    async def steps_of(self, req: ProcessRequest) -> Steps:
        if req.steps is not None:
            if len(req.steps) > req.max_steps:
                raise InvalidRequest(
                    f"{len(req.steps)} steps given, over max_steps={req.max_steps}; "
                    "merge steps or raise max_steps"
                )
            return Steps(list(req.steps), SplitInfo(method_used="given"), TokenUsage())
        assert req.response is not None  # the request model guarantees one of them
        return await self._splitter.split(req.response, req.split, req.max_steps)

    async def _multi_step(
        self, req: ProcessRequest, question: str, steps: Sequence[str]
    ) -> StepJudgments:
        reasoning = req.mode == "reasoning"
        rendered = prompts.process_prompts(
            self._engine.tokenizer, question, steps, reasoning, reference_of(req)
        )
        per_step = [
            judge_calls(
                r,
                samples=req.samples,
                reasoning_tokens=req.reasoning_tokens if reasoning else 0,
                temperature=req.resolved_temperature(),
                seed=req.seed,
                cache=req.cache,
            )
            for r in rendered
        ]
        results: list[list[JudgeResult]] = []
        stopped = False
        if req.early_stop:
            for calls in per_step:
                results.append(await self._engine.judge(calls))
                score, _ = combine_samples([r.logit for r in results[-1]])
                if score < req.threshold:
                    stopped = len(results) < len(per_step)
                    break
        else:
            # All steps at once: vLLM batches them, and shared prefixes hit the cache.
            flat = await self._engine.judge([c for calls in per_step for c in calls])
            results = [flat[i : i + req.samples] for i in range(0, len(flat), req.samples)]
        usage = TokenUsage()
        for group in results:
            for r in group:
                usage.add(r.usage)
        with_rationale = reasoning and req.return_rationale
        return StepJudgments(
            logits=[combine_samples([r.logit for r in g])[1] for g in results],
            samples=[sample_judgments(g, with_rationale) for g in results],
            exact_fallbacks=None,
            early_stopped=stopped,
            usage=usage,
        )

    async def _single_pass(
        self, question: str, steps: Sequence[str], reference: prompts.Reference | None
    ) -> StepJudgments:
        prompt = prompts.single_pass_prompt(
            self._engine.tokenizer, question, steps, reference=reference
        )
        res = await self._engine.slot_logits(prompt.ids, prompt.slots)
        return StepJudgments(
            logits=res.logits,
            samples=[],
            exact_fallbacks=res.exact_fallbacks,
            early_stopped=False,
            usage=res.usage,
        )

    async def judge_steps(
        self, req: ProcessRequest, steps: Sequence[str], mode: ProcessMode
    ) -> StepJudgments:
        if mode == "single_pass":
            return await self._single_pass(req.question, steps, reference_of(req))
        return await self._multi_step(req, req.question, steps)

    async def judge(self, req: ProcessRequest) -> ProcessResponse:
        s = await self.steps_of(req)
        j = await self.judge_steps(req, s.steps, req.mode)
        scores = [sigmoid(x) for x in j.logits]
        usage = TokenUsage().add(s.usage).add(j.usage)
        return ProcessResponse(
            steps=s.steps,
            step_scores=scores,
            step_logits=j.logits,
            aggregate=aggregate(j.logits, req.aggregation),
            aggregation=req.aggregation,
            threshold=req.threshold,
            first_error_step=first_error_step(scores, req.threshold),
            early_stopped=j.early_stopped,
            mode=req.mode,
            model=served_id(self._model),
            split=s.info,
            exact_fallbacks=j.exact_fallbacks,
            step_samples=j.samples if req.samples > 1 else None,
            usage=Usage.of(usage),
        )
