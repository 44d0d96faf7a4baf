"""``POST /v1/rewards``: a mixed RL batch, each item verified by its own spec (docs/api.md).

Every (item, component) check runs as its own task: rule and string checks need no engine,
model reads go through the outcome path (and the judgment cache), a rubric is one decision.
With ``deadline_s`` the job answers on time: checks still running then are cancelled (their
engine requests aborted) and answered with the fallback, flagged ``timed_out``; a check that
raises is answered the same way, flagged ``failed`` with its reason. Nothing becomes 0 unflagged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from service.config import RewardSettings
from service.engine.adapters import served_id
from service.errors import CodeExecutionDisabled, InvalidRequest, ServiceError
from service.protocol import OutcomeRequest, Usage
from service.protocol.base import JudgeMode
from service.protocol.decision_results import PredicateAnswer
from service.protocol.judge import VerifierKind
from service.protocol.reward_results import (
    CheckResult,
    CriterionResult,
    RewardsResponse,
    combine,
    fallback,
)
from service.protocol.rewards import (
    ChoiceSpec,
    CodeSpec,
    MathSpec,
    ModelSpec,
    RewardItem,
    RewardModelSpec,
    RewardsRequest,
    RubricSpec,
    Spec,
    StringSpec,
    rubric_decision,
)
from service.scoring import rewards as checks
from service.serving.code import CodeServing
from service.serving.context import job_arrival
from service.serving.decisions import DecisionServing
from service.serving.outcome import OutcomeServing

logger = logging.getLogger(__name__)

# The answer leaves the worker this long before the deadline, for the trip back to the API.
DELIVERY_MARGIN_S = 0.25
# Bound on waiting for cancelled checks to unwind (their engine aborts), inside the margin.
CLEANUP_TIMEOUT_S = 0.2


@dataclass(frozen=True, slots=True)
class _Done:
    result: CheckResult
    usage: Usage


class RewardsServing:
    """Serves /v1/rewards over the outcome path, the decisions path and the rule checks."""

    def __init__(
        self,
        outcome: OutcomeServing,
        decisions: DecisionServing,
        code: CodeServing,
        settings: RewardSettings,
        model_name: str,
        generative: bool,
    ) -> None:
        self._outcome = outcome
        self._decisions = decisions
        self._code = code
        self._settings = settings
        self._model = model_name
        self._generative = generative

    async def rewards(self, req: RewardsRequest) -> RewardsResponse:
        self._admit(req)
        keys = [(i, name) for i, item in enumerate(req.items) for name in item.specs()]
        remaining = self._remaining(req)
        if remaining is not None and remaining <= 0:  # it waited out its deadline in the queue
            return self._answer(req, dict.fromkeys(keys))
        tasks = {
            key: asyncio.ensure_future(self._check(req, req.items[key[0]], key[1])) for key in keys
        }
        try:
            done, pending = await asyncio.wait(tasks.values(), timeout=remaining)
        except asyncio.CancelledError:  # the job is cancelled (its caller left): so are its checks
            for task in tasks.values():
                task.cancel()
            raise
        if pending:
            for task in pending:
                task.cancel()
            # Plain wait: a check that swallows its cancellation is left behind, not awaited.
            await asyncio.wait(pending, timeout=CLEANUP_TIMEOUT_S)
        outcomes: dict[tuple[int, str], _Done | None] = {}
        for key, task in tasks.items():
            if task not in done:
                outcomes[key] = None
            elif (exc := task.exception()) is not None:  # a bug: the item fails, not the batch
                logger.error("a reward check raised", exc_info=exc)
                outcomes[key] = _Done(fallback(req, failed=f"internal error: {exc!r}"), Usage())
            else:
                outcomes[key] = task.result()
        return self._answer(req, outcomes)

    def _admit(self, req: RewardsRequest) -> None:
        """Refuse, before any engine work, a spec the served model cannot answer."""
        for i, item in enumerate(req.items):
            for name, spec in item.specs().items():
                where = f"items.{i}." + (f"components.{name}" if name else "verifier")
                if isinstance(spec, RewardModelSpec) and self._generative:
                    raise InvalidRequest(
                        f"{where}: type 'reward_model' needs a reward model served on vLLM's "
                        "pooling runner; this service serves a generative judge (use 'model')"
                    )
                if isinstance(spec, CodeSpec):
                    try:
                        self._code.admit(spec)
                    except CodeExecutionDisabled:
                        raise
                    except InvalidRequest as exc:
                        raise InvalidRequest(f"{where}: {exc.message}") from exc
                if isinstance(spec, ModelSpec | RubricSpec) and not self._generative:
                    raise InvalidRequest(
                        f"{where}: type {spec.type!r} needs a generative judge; this service "
                        "serves a reward model (use 'reward_model')"
                    )

    def _remaining(self, req: RewardsRequest) -> float | None:
        """Seconds left until the answer must leave; None without a deadline."""
        if req.deadline_s is None:
            return None
        arrival = job_arrival.get()
        elapsed = 0.0 if arrival is None else max(0.0, time.time() - arrival)
        return max(0.0, req.deadline_s - elapsed - DELIVERY_MARGIN_S)

    async def _check(self, req: RewardsRequest, item: RewardItem, name: str) -> _Done:
        spec = item.specs()[name]
        try:
            return await self._run(req, item, spec)
        except ServiceError as exc:
            reason = f"{exc.type}: {exc.message}"
        except (ArithmeticError, ValueError) as exc:  # a pattern over its bound, a bad read
            reason = str(exc)
        logger.info("a reward check failed: %s", reason)
        return _Done(fallback(req, failed=reason), Usage())

    async def _run(self, req: RewardsRequest, item: RewardItem, spec: Spec) -> _Done:
        if isinstance(spec, StringSpec):
            text = checks.string_input(item.response, spec.input)
            ok = checks.string_check(spec.operation, text, spec.operand())
            return _Done(CheckResult(reward=float(ok), decided_by="match", extracted=text), Usage())
        if isinstance(spec, ChoiceSpec):
            got = checks.choice_check(item.response, spec.answer, spec.options)
            return _Done(
                CheckResult(reward=float(got.correct), decided_by="match", extracted=got.extracted),
                Usage(),
            )
        if isinstance(spec, RubricSpec):
            return await self._rubric(req, item, spec)
        if isinstance(spec, CodeSpec):
            res = await self._code.verify(item.response, spec)
            return _Done(
                CheckResult(reward=res.reward, decided_by="code", reason=res.reason, code=res),
                Usage(),
            )
        if isinstance(spec, MathSpec | ModelSpec | RewardModelSpec):
            return await self._outcome_read(req, item, spec)
        raise InvalidRequest(f"type {spec.type!r} cannot be verified here")  # refused earlier

    def _judging(
        self, req: RewardsRequest, spec: MathSpec | ModelSpec | RubricSpec
    ) -> tuple[JudgeMode, int]:
        mode = spec.mode or req.mode or self._settings.mode
        tokens = spec.reasoning_tokens or req.reasoning_tokens or self._settings.reasoning_tokens
        return mode, tokens

    async def _outcome_read(
        self, req: RewardsRequest, item: RewardItem, spec: MathSpec | ModelSpec | RewardModelSpec
    ) -> _Done:
        if not item.response.strip():
            # An empty response is not a correct answer: 0 without an engine call (as /get_reward)
            return _Done(CheckResult(reward=0.0, decided_by="model", reason="empty"), Usage())
        mode: JudgeMode = "direct"
        tokens, reference, criteria = 1, None, None
        verifier: VerifierKind = "model"
        if not isinstance(spec, RewardModelSpec):
            mode, tokens = self._judging(req, spec)
            reference = spec.reference
            criteria = spec.criteria if isinstance(spec, ModelSpec) else None
            if isinstance(spec, MathSpec):
                verifier = "hybrid" if spec.model_fallback else "rule"
        samples, temperature = (
            (1, None)
            if isinstance(spec, RewardModelSpec)
            else (
                spec.samples,
                spec.temperature,
            )
        )
        resp = await self._outcome.judge(
            OutcomeRequest(
                question=item.prompt,
                response=item.response,
                mode=mode,
                reasoning_tokens=tokens,
                samples=samples,
                temperature=temperature,
                cache=req.cache,
                reference=reference,
                criteria=criteria,
                verifier=verifier,
            )
        )
        rule = resp.rule
        extracted = None if rule is None else rule.extracted
        reason = None if rule is None else rule.reason
        if resp.decided_by == "rule" or resp.score is None:  # undecided rule-only: 0, reason given
            result = CheckResult(
                reward=resp.score or 0.0, decided_by="rule", extracted=extracted, reason=reason
            )
        elif isinstance(spec, RewardModelSpec):
            reward = resp.reward if resp.reward is not None else resp.score
            result = CheckResult(reward=reward, decided_by="reward_model", score=resp.score)
        else:
            result = CheckResult(
                reward=resp.score,
                decided_by="model",
                score=resp.score,
                extracted=extracted,
                reason=reason,
            )
        return _Done(result, resp.usage)

    async def _rubric(self, req: RewardsRequest, item: RewardItem, spec: RubricSpec) -> _Done:
        mode, tokens = self._judging(req, spec)
        decision = await self._decisions.decide(
            rubric_decision(spec, item.prompt, item.response, mode, tokens)
        )
        probs = []
        for i, answer in enumerate(decision.answers):
            if not isinstance(answer, PredicateAnswer):
                raise ValueError(
                    f"criterion {i} could not be read (its prompt does not fit the model)"
                )
            probs.append(answer.probability)
        criteria = [checks.Criterion(c.weight, c.required) for c in spec.criteria]
        reward = checks.rubric_reward(criteria, probs, spec.aggregation)
        per = [
            CriterionResult(probability=p, holds=checks.holds(c, p))
            for c, p in zip(criteria, probs, strict=True)
        ]
        usage = Usage.model_validate(decision.usage.model_dump(include=set(Usage.model_fields)))
        return _Done(CheckResult(reward=reward, decided_by="rubric", criteria=per), usage)

    def _answer(
        self, req: RewardsRequest, outcomes: Mapping[tuple[int, str], _Done | None]
    ) -> RewardsResponse:
        results = []
        usage = Usage()
        for i, item in enumerate(req.items):
            parts: dict[str, CheckResult] = {}
            for name in item.specs():
                done = outcomes[(i, name)]
                if done is None:
                    parts[name] = fallback(req, timed_out=True)
                else:
                    parts[name] = done.result
                    usage += done.usage
            results.append(combine(req, i, item, parts))
        return RewardsResponse(
            model=served_id(self._model),
            results=results,
            timed_out=sum(r.timed_out for r in results),
            failed=sum(r.failed is not None for r in results),
            usage=usage,
        )
