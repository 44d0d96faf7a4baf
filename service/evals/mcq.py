"""MCQ accuracy with and without debiasing, against a running service (``verifier eval mcq``).

For each method (``raw``, ``pride``, ``contextual``, ``popdebias``):

- the items are shuffled with a fixed seed; for PriDe the first ``calib_ratio`` of them (at
  least one per option count K) form the calibration split, fitted per K through
  ``POST /v1/mcq/calibrations`` and **held out of the scored items of every method**, so all
  methods are compared on the same items;
- contextual calibration is fitted per K (content-free inputs, no items);
- popdebias uses the ``model`` popularity proxy and a lambda fitted on the same calibration
  split (the data carries no popularity) by ``lambda_fit`` (docs/methods.md B.5: question-free
  reads by default; ``grid`` sends the calibration items' labels); the fit is reported;
- the scored items go through ``POST /v1/mcq/answer/batch`` in chunks.

Reported per method: accuracy, per-letter selection rates, RStd (standard deviation of
per-class recall x 100, PriDe's measure of letter bias), forward passes and tokens per scored
item with the calibration cost spread over them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import httpx
from verifier_client import AsyncClient

from service.evals.common import ProgressFn, gather_with_progress, open_client
from service.evals.data import GoldItem, read_items
from service.scoring import debias
from service.scoring.prompts import LETTERS

DEFAULT_FILE: Final = Path("arc") / "ARC-Challenge-Dev.jsonl"
METHODS: Final = ("raw", "pride", "contextual", "popdebias")
CHUNK: Final = 16  # items per batch request


def split_calibration(
    items: Sequence[GoldItem], ratio: float, seed: int
) -> tuple[list[GoldItem], list[GoldItem]]:
    """(calibration, scored): the first ``ratio`` of a seeded shuffle, at least one per K."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    calib: list[GoldItem] = []
    for k in sorted({it.k for it in shuffled}):
        of_k = [it for it in shuffled if it.k == k]
        calib += of_k[: max(1, round(ratio * len(of_k)))] if len(of_k) > 1 else []
    chosen = {id(it) for it in calib}
    return calib, [it for it in shuffled if id(it) not in chosen]


def summarize(items: Sequence[GoldItem], preds: Sequence[int]) -> dict[str, Any]:
    gold = [it.answer_index for it in items]
    k_max = max(it.k for it in items)
    n = len(items)
    return {
        "n": n,
        "accuracy": sum(p == g for p, g in zip(preds, gold, strict=True)) / n,
        "chance": sum(1 / it.k for it in items) / n,
        "selection_rates": {LETTERS[c]: sum(p == c for p in preds) / n for c in range(k_max)},
        "gold_rates": {LETTERS[c]: sum(g == c for g in gold) / n for c in range(k_max)},
        "rstd": debias.rstd(gold, preds, k_max),
    }


async def _fit(client: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    return (await client.create_calibration(**body)).model_dump(mode="json")


async def _answer(
    client: AsyncClient, items: Sequence[GoldItem], extra: dict[str, Any]
) -> dict[str, Any]:
    body = {"items": [{"question": it.question, "options": it.options} for it in items], **extra}
    if extra.get("debias") == "popdebias":
        for entry in body["items"]:
            entry["popularity"] = "model"
    return (await client.mcq_answer_batch(**body)).model_dump(mode="json")


async def _calibrations(
    client: AsyncClient,
    method: str,
    calib: Sequence[GoldItem],
    ks: set[int],
    lambda_fit: str = "question_free",
) -> tuple[dict[int, str], int, int, dict[str, Any] | None]:
    """Calibration id per K, their cost (forward passes, tokens) and popdebias' fit."""
    ids: dict[int, str] = {}
    passes = tokens = 0

    def items_of(k: int | None) -> list[dict[str, Any]]:
        chosen = [it for it in calib if k is None or it.k == k]
        pop = {"popularity": "model"} if method == "popdebias" else {}
        return [{"question": it.question, "options": it.options, **pop} for it in chosen]

    if method == "popdebias":  # one lambda for every K
        body: dict[str, Any] = {
            "method": "popdebias",
            "items": items_of(None),
            "lambda_fit": lambda_fit,
        }
        if lambda_fit == "grid":  # the only fit that reads labels: the calibration split's
            body["answers"] = [it.answer_index for it in calib]
        fitted = await _fit(client, body)
        ids = dict.fromkeys(ks, fitted["id"])
        cost = fitted["cost"]
        return ids, cost["forward_passes"], cost["tokens"], fitted["params"]
    for k in sorted(ks):
        if method == "pride":
            if not items_of(k):
                continue  # no calibration item of this K: those items stay raw (reported)
            fitted = await _fit(client, {"method": "pride", "items": items_of(k)})
        else:
            fitted = await _fit(client, {"method": "contextual", "k": k})
        ids[k] = fitted["id"]
        passes += fitted["cost"]["forward_passes"]
        tokens += fitted["cost"]["tokens"]
    return ids, passes, tokens, None


async def run_method(
    client: AsyncClient,
    method: str,
    calib: Sequence[GoldItem],
    scored: Sequence[GoldItem],
    progress: ProgressFn | None = None,
    lambda_fit: str = "question_free",
) -> dict[str, Any]:
    ks = {it.k for it in scored}
    ids: dict[int, str] = {}
    passes = tokens = 0
    fit = None
    if method != "raw":
        ids, passes, tokens, fit = await _calibrations(client, method, calib, ks, lambda_fit)
    jobs = []
    chunks: list[list[GoldItem]] = []
    for k in sorted(ks):
        of_k = [it for it in scored if it.k == k]
        extra: dict[str, Any] = {}
        if method != "raw" and k in ids:
            extra = {"debias": method, "calibration_id": ids[k]}
        for i in range(0, len(of_k), CHUNK):
            chunks.append(of_k[i : i + CHUNK])
            jobs.append(_answer(client, chunks[-1], extra))
    answers = await gather_with_progress(jobs, progress)
    items = [it for chunk in chunks for it in chunk]
    preds = [r["answer_index"] for a in answers for r in a["results"]]
    passes += sum(a["usage"]["engine_calls"] for a in answers)
    tokens += sum(a["usage"]["total_tokens"] for a in answers)
    report = summarize(items, preds)
    report["forward_passes_per_item"] = passes / len(items)
    report["tokens_per_item"] = tokens / len(items)
    report["uncalibrated_k"] = sorted(ks - set(ids)) if method != "raw" else []
    if fit is not None:
        report["fit"] = fit
    return report


async def run_mcq(
    url: str,
    data: Path,
    methods: Sequence[str] = ("raw", "pride", "contextual"),
    limit: int | None = None,
    calib_ratio: float = 0.05,
    seed: int = 0,
    concurrency: int = 8,
    *,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    lambda_fit: str = "question_free",
    timeout_s: float | None = None,
) -> dict[str, Any]:
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    items, skipped = read_items(data)
    if limit is not None:
        items = items[:limit]
    if len(items) < 2:
        raise ValueError(f"{data}: {len(items)} readable items; need at least 2")
    calib, scored = split_calibration(items, calib_ratio, seed)
    start = time.perf_counter()
    results: dict[str, Any] = {}
    async with open_client(url, concurrency, transport, timeout_s) as client:
        for method in methods:
            results[method] = await run_method(client, method, calib, scored, progress, lambda_fit)
    return {
        "methods": results,
        "n_items": len(items),
        "n_calibration": len(calib),
        "n_scored": len(scored),
        "skipped": [{"row": s.row, "reason": s.reason} for s in skipped],
        "wall_s": time.perf_counter() - start,
        "config": {
            "data": str(data),
            "limit": limit,
            "calib_ratio": calib_ratio,
            "seed": seed,
            "lambda_fit": lambda_fit,
            "url": url,
        },
    }
