"""The serving objects over one engine, built once it answered.

The job handler that runs them for the worker is ``service.serving.handler``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from service.config import EngineSettings, RewardSettings, RuleSettings
from service.engine.base import Engine
from service.ops.aio import CLOSE_TIMEOUT_S, bounded
from service.sandbox.runner import Sandbox
from service.scoring.ties import DTYPE_TOLERANCE
from service.serving.audit import AuditServing
from service.serving.cache import CachingEngine, JudgmentStore
from service.serving.calibrate import CalibrationServing
from service.serving.code import CodeServing
from service.serving.compare import CompareServing
from service.serving.decisions import DecisionServing
from service.serving.mcq import MCQServing
from service.serving.outcome import OutcomeServing
from service.serving.pooled import PooledOutcomeServing, PooledProcessServing, PooledReader
from service.serving.pooling import PoolingServing
from service.serving.popmcq import PopMCQServing
from service.serving.process import ProcessServing, SplitServing
from service.serving.reward import RewardServing
from service.serving.rewards import RewardsServing
from service.serving.rules import RuleVerifier
from service.serving.score import ScoreServing
from service.stores.calibrations import CalibrationStore, MemoryCalibrations


@dataclass
class Services:
    """Everything that needs the engine, built once it answered."""

    engine: Engine
    outcome: OutcomeServing
    split: SplitServing
    process: ProcessServing
    score: ScoreServing
    mcq: MCQServing
    audit: AuditServing
    popmcq: PopMCQServing
    reward: RewardServing
    rewards: RewardsServing
    pooling: PoolingServing
    rules: RuleVerifier
    decisions: DecisionServing
    compare: CompareServing
    calibrate: CalibrationServing
    code: CodeServing
    judgments: JudgmentStore | None = None
    audit_judge: Engine | None = None  # the audit's remote judge, when configured

    @classmethod
    def build(
        cls,
        engine: Engine,
        model_name: str,
        judgments: JudgmentStore | None = None,
        calibrations: CalibrationStore | None = None,
        reward: RewardSettings | None = None,
        rules: RuleSettings | None = None,
        engine_settings: EngineSettings | None = None,
        tie_tolerance: float = DTYPE_TOLERANCE["bfloat16"],
        sandbox: Sandbox | None = None,
        audit_judge: Engine | None = None,
    ) -> Services:
        """Serving objects over ``engine``; with a store, judgments go through the cache. A
        pooling reward model or PRM gets the pooled outcome and process paths."""
        if judgments is not None:
            engine = CachingEngine(engine, judgments)
        rule_cfg = rules or RuleSettings()
        verifier = RuleVerifier(workers=rule_cfg.workers, timeout_s=rule_cfg.timeout_s)
        split = SplitServing(engine)
        code = CodeServing(sandbox)
        outcome: OutcomeServing
        process: ProcessServing
        generative = engine.model_info().kind == "generative"
        if generative:
            outcome = OutcomeServing(engine, model_name, verifier, code)
            process = ProcessServing(engine, split, model_name)
        else:
            cfg = engine_settings or EngineSettings()
            reader = PooledReader(engine, cfg.reward_system_prompt, cfg.positive_class)
            outcome = PooledOutcomeServing(engine, model_name, reader, verifier, code)
            process = PooledProcessServing(engine, split, model_name, reader)
        mcq_calibrations = calibrations or MemoryCalibrations()
        compare = CompareServing(engine, model_name, mcq_calibrations)
        score = ScoreServing(outcome, process, model_name, compare, tie_tolerance)
        mcq = MCQServing(engine, model_name, mcq_calibrations)
        decisions = DecisionServing(engine, model_name, mcq_calibrations)
        reward_cfg = reward or RewardSettings()
        rewards = RewardsServing(outcome, decisions, code, reward_cfg, model_name, generative)
        return cls(
            engine=engine,
            audit=AuditServing(engine, model_name, audit_judge),
            popmcq=PopMCQServing(engine, model_name, mcq),
            outcome=outcome,
            split=split,
            process=process,
            score=score,
            mcq=mcq,
            reward=RewardServing(outcome, engine.tokenizer, reward_cfg, compare, rewards),
            rewards=rewards,
            pooling=PoolingServing(engine, model_name),
            rules=verifier,
            decisions=decisions,
            compare=compare,
            calibrate=CalibrationServing(outcome, compare, decisions, mcq, model_name),
            code=code,
            judgments=judgments,
            audit_judge=audit_judge,
        )

    async def close(self) -> None:
        """Shut the engine down (bounded inside), the rule checks, then the judgment store."""
        await self.engine.shutdown()
        if self.audit_judge is not None:
            await bounded(self.audit_judge.shutdown(), CLOSE_TIMEOUT_S, "closing the audit judge")
        # close() joins the pool's processes for at most 10 s; in a thread, off the loop
        await bounded(asyncio.to_thread(self.rules.close), 12.0, "closing rule checks")
        if self.judgments is not None:
            await bounded(self.judgments.close(), CLOSE_TIMEOUT_S, "closing the judgment cache")
