"""ProcessBench through the service: first-error prediction via POST /v1/judge/process.

Each item's `steps` are sent as given (no re-splitting) with ``question = problem``; the
prediction is the response's `first_error_step` (docs/methods.md A.9: the first step scored
below the threshold, -1 if none). A request the service refuses with a 4xx counts as a wrong
prediction (`pred` None) and is listed with its error; any other failure aborts the run.

Result shape::

    {"config": {...}, "metric": {acc_err, acc_corr, f1, n_err, n_corr},
     "usage": {prompt_tokens, generated_tokens, cached_tokens, total_tokens, engine_calls},
     "wall_s": float, "n_failed": int,
     "items": [{"id", "label", "pred", "step_scores", "error"}]}

Accuracies and F1 are in percent; an undefined one (an empty class) is null.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
from verifier_client import AsyncClient, VerifierError
from verifier_client.models import ProcessRequest, Usage

from service.evals.common import (
    ProgressFn,
    gather_with_progress,
    is_request_error,
    open_client,
    sum_usage,
)
from service.evals.data import load_processbench
from service.scoring.finite import finite_or_none
from service.scoring.metrics_eval import ProcessBenchItem, processbench_metric

logger = logging.getLogger(__name__)

DEFAULT_FILE: Final = Path("processbench") / "gsm8k.json"
ENDPOINT: Final = "/v1/judge/process"
_OPTION_FIELDS: Final = frozenset({"mode", "threshold", "reasoning_tokens", "early_stop"})


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome: the prediction, or the error that made it count as wrong."""

    item: ProcessBenchItem
    pred: int | None
    step_scores: list[float] | None = None
    usage: Usage | None = None
    model: str | None = None
    error: str | None = None


def process_options(
    mode: str, threshold: float, reasoning_tokens: int, early_stop: bool
) -> dict[str, Any]:
    """The judging options, validated once by the wire model (raises ValueError if invalid)."""
    request = ProcessRequest.model_validate(
        {
            "question": "options check",
            "steps": ["options check"],
            "mode": mode,
            "threshold": threshold,
            "reasoning_tokens": reasoning_tokens,
            "early_stop": early_stop,
        }
    )
    return request.model_dump(include=set(_OPTION_FIELDS))


async def judge_item(
    client: AsyncClient, item: ProcessBenchItem, options: dict[str, Any]
) -> ItemResult:
    """Judge one item's given steps; a 4xx refusal becomes a wrong (None) prediction."""
    body = {**options, "question": item.problem, "steps": list(item.steps)}
    try:
        res = await client.process(**body)
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("%s: %s", item.id, exc)
        return ItemResult(item=item, pred=None, error=str(exc))
    return ItemResult(
        item=item,
        pred=res.first_error_step,
        step_scores=res.step_scores,
        usage=res.usage,
        model=res.model,
    )


def summarize(results: Sequence[ItemResult]) -> dict[str, Any]:
    """Metric, summed usage and per-item rows of finished items (pure)."""
    metric = processbench_metric(
        [r.pred for r in results],
        [r.item.label for r in results],
        [len(r.item.steps) for r in results],
    )
    return {
        "metric": {
            "acc_err": finite_or_none(metric["acc_err"]),
            "acc_corr": finite_or_none(metric["acc_corr"]),
            "f1": finite_or_none(metric["f1"]),
            "n_err": metric["n_err"],
            "n_corr": metric["n_corr"],
        },
        "usage": sum_usage(r.usage for r in results if r.usage is not None),
        "n_failed": sum(r.error is not None for r in results),
        "items": [item_row(r) for r in results],
    }


def item_row(result: ItemResult) -> dict[str, Any]:
    """The JSON row of one item."""
    return {
        "id": result.item.id,
        "label": result.item.label,
        "pred": result.pred,
        "step_scores": result.step_scores,
        "error": result.error,
    }


async def run_processbench(
    url: str,
    data: Path,
    limit: int | None = None,
    mode: str = "direct",
    threshold: float = 0.5,
    reasoning_tokens: int = 256,
    early_stop: bool = False,
    concurrency: int = 8,
    *,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Run ProcessBench items from `data` (up to `limit`) against the service at `url`."""
    options = process_options(mode, threshold, reasoning_tokens, early_stop)
    items = load_processbench(data, limit)
    if not items:
        raise ValueError(f"{data}: no items to evaluate (limit={limit})")
    start = time.perf_counter()
    async with open_client(url, concurrency, transport) as client:
        jobs = [judge_item(client, item, options) for item in items]
        results = await gather_with_progress(jobs, progress)
    wall_s = time.perf_counter() - start
    config = {
        **options,
        "data": str(data),
        "limit": limit,
        "concurrency": concurrency,
        "url": url,
        "model": next((r.model for r in results if r.model is not None), None),
        "n_items": len(items),
    }
    return {"config": config, **summarize(results), "wall_s": wall_s}
