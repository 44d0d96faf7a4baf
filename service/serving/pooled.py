"""Outcome and process judgments from a pooling reward model or PRM (docs/methods.md G).

The same requests and responses as the generative judge: a reward is a log-odds like the
verdict logit, so ``score = sigmoid(logit)``, the aggregations, the first-error index and fusion
are unchanged. What a pooling model cannot do (reasoning, sampled rationales, a reference in
the model's prompt) is refused with a 422 that says why, before any engine call.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.engine.adapters import served_id
from service.engine.base import Engine, PoolCall, TokenUsage
from service.errors import InvalidRequest, NotServedByModel
from service.protocol import OutcomeRequest, OutcomeResponse, ProcessRequest, Usage
from service.protocol.judge import JudgeOptions, ReferenceOptions
from service.scoring import pooled
from service.scoring.outcome import sigmoid, verdict
from service.serving.code import CodeServing
from service.serving.outcome import OutcomeServing
from service.serving.process import ProcessServing, SplitServing, StepJudgments
from service.serving.rules import RuleVerifier


def _refuse_generation(req: JudgeOptions, kind: str) -> None:
    if req.mode == "reasoning":
        raise NotServedByModel(
            f"mode='reasoning' needs a generative judge; the served {kind} model returns class "
            "logits without writing a rationale: use mode='direct'"
        )
    # samples > 1 is valid with reasoning only (the request model says so), refused above.


def _refuse_reference_in_prompt(req: ReferenceOptions, kind: str, verifier: str) -> None:
    if req.reference is not None and verifier == "model":
        raise NotServedByModel(
            f"the served {kind} model was trained on (question, response) alone and has no "
            "place for a reference; use verifier='rule' or 'hybrid' (the rule compares the "
            "answer with the reference, the model scores what the rule cannot decide) or leave "
            "the reference out"
        )


class PooledReader:
    """Rewards of (question, response) and of steps, from the served pooling model."""

    def __init__(self, engine: Engine, system_prompt: str | None, positive_class: int) -> None:
        self._engine = engine
        info = engine.model_info()
        self.kind = info.kind
        self._task = info.pooling_task or "classify"
        self._tag = info.step_tag
        self._system = system_prompt
        self._positive = positive_class

    def _logit(self, row: Sequence[float]) -> float:
        try:
            return pooled.row_logit(row, self._positive)
        except ValueError as exc:
            raise InvalidRequest(f"{exc}; set VERIFIER_ENGINE__POSITIVE_CLASS") from exc

    def _step_prompt(self, question: str, steps: Sequence[str]) -> pooled.StepPrompt:
        assert self._tag is not None
        try:
            return pooled.step_prompt(
                self._engine.tokenizer, question, steps, self._tag, self._system
            )
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from exc

    async def _rows(self, ids: Sequence[int]) -> tuple[list[list[float]], TokenUsage]:
        # A PRM's engine returns the rows at its step tag only (the pooler's step_tag_id).
        call = PoolCall(ids, self._task, use_activation=False)
        (res,) = await self._engine.pool([call])
        return res.rows, res.usage

    async def outcome(self, question: str, response: str) -> tuple[float, TokenUsage]:
        """One log-odds for the whole response. A PRM reads it as a single step."""
        if self.kind == "process_reward":
            prompt = self._step_prompt(question, [response])
            rows, usage = await self._rows(prompt.ids)
            return self._logit(rows[-1]), usage
        ids = pooled.reward_prompt_ids(self._engine.tokenizer, question, response, self._system)
        rows, usage = await self._rows(ids)
        # classify: one row; a *ForRewardModel's token rows: the last token's is the reward.
        return self._logit(rows[-1]), usage

    async def steps(self, question: str, steps: Sequence[str]) -> tuple[list[float], TokenUsage]:
        """One log-odds per step. A PRM: one call, a row at every step tag. A sequence RM:
        step k is the reward of steps 1..k as the response (k calls, batched by vLLM)."""
        if self.kind == "process_reward":
            prompt = self._step_prompt(question, steps)
            rows, usage = await self._rows(prompt.ids)
            if len(rows) != len(steps):
                raise InvalidRequest(f"the PRM returned {len(rows)} rows for {len(steps)} steps")
            return [self._logit(r) for r in rows], usage
        usage = TokenUsage()
        logits = []
        tok = self._engine.tokenizer
        calls = [
            PoolCall(
                pooled.reward_prompt_ids(tok, question, "\n".join(steps[: k + 1]), self._system),
                self._task,
            )
            for k in range(len(steps))
        ]
        for res in await self._engine.pool(calls):
            usage.add(res.usage)
            logits.append(self._logit(res.rows[-1]))
        return logits, usage


class PooledOutcomeServing(OutcomeServing):
    """POST /v1/judge/outcome on a pooling model: rule check as before, then the reward."""

    def __init__(
        self,
        engine: Engine,
        model_name: str,
        reader: PooledReader,
        rules: RuleVerifier | None,
        code: CodeServing | None = None,
    ) -> None:
        super().__init__(engine, model_name, rules, code)
        self._reader = reader

    async def judge(self, req: OutcomeRequest) -> OutcomeResponse:
        _refuse_generation(req, self._reader.kind)
        _refuse_reference_in_prompt(req, self._reader.kind, req.resolved_verifier())
        return await super().judge(req)

    async def _by_model(self, req: OutcomeRequest) -> OutcomeResponse:
        logit, usage = await self._reader.outcome(req.question, req.response)
        score = sigmoid(logit)
        return OutcomeResponse(
            score=score,
            logit=logit,
            reward=logit,
            verdict=verdict(score),
            mode=req.mode,
            model=served_id(self._model),
            decided_by="model",
            usage=Usage.of(usage),
        )


class PooledProcessServing(ProcessServing):
    """POST /v1/judge/process on a pooling model: the steps' rewards, then the aggregations
    and first-error index of every process judgment."""

    def __init__(
        self, engine: Engine, splitter: SplitServing, model_name: str, reader: PooledReader
    ) -> None:
        super().__init__(engine, splitter, model_name)
        self._reader = reader

    async def judge_steps(
        self, req: ProcessRequest, steps: Sequence[str], mode: str
    ) -> StepJudgments:
        _refuse_generation(req, self._reader.kind)
        _refuse_reference_in_prompt(req, self._reader.kind, "model")
        logits, usage = await self._reader.steps(req.question, steps)
        return StepJudgments(
            logits=logits, samples=[], exact_fallbacks=None, early_stopped=False, usage=usage
        )
