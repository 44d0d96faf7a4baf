"""The HTTP contract: one module per endpoint family.

- ``base``: the base model, the error shape, usage and budget options, model and readiness cards
- ``judge``: outcome, split, process, score, rerank
- ``mcq``, ``audit``, ``reward``: multiple choice, its audits, ``/get_reward``
- ``jobs``: the job registry (each kind with its request and response model)

The names of ``base`` and ``judge`` are re-exported here.
"""

from __future__ import annotations

from service.protocol.base import (
    BudgetInfo,
    BudgetOptions,
    BudgetPolicy,
    ErrorDetail,
    ErrorResponse,
    JudgeMode,
    Metered,
    ModelCard,
    ModelList,
    ModelReadiness,
    Readiness,
    ServiceModel,
    Usage,
)
from service.protocol.judge import (
    Aggregation,
    JudgeOptions,
    OutcomeRequest,
    OutcomeResponse,
    ProcessMode,
    ProcessOptions,
    ProcessRequest,
    ProcessResponse,
    RerankDocument,
    RerankMeta,
    RerankRequest,
    RerankResponse,
    RerankResult,
    SampleJudgment,
    ScoreMethod,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
    ScoreResult,
    SplitInfo,
    SplitMethod,
    SplitRequest,
    SplitResponse,
)

__all__ = [
    "Aggregation",
    "BudgetInfo",
    "Metered",
    "BudgetOptions",
    "BudgetPolicy",
    "ErrorDetail",
    "ErrorResponse",
    "JudgeMode",
    "JudgeOptions",
    "ModelCard",
    "ModelReadiness",
    "ModelList",
    "OutcomeRequest",
    "OutcomeResponse",
    "ProcessMode",
    "ProcessOptions",
    "ProcessRequest",
    "ProcessResponse",
    "Readiness",
    "RerankDocument",
    "RerankMeta",
    "RerankRequest",
    "RerankResponse",
    "RerankResult",
    "SampleJudgment",
    "ScoreMethod",
    "ScoreOptions",
    "ScoreRequest",
    "ScoreResponse",
    "ScoreResult",
    "ServiceModel",
    "SplitInfo",
    "SplitMethod",
    "SplitRequest",
    "SplitResponse",
    "Usage",
]
