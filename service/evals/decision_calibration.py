"""Calibration of decision and multiple-choice probabilities through the service: raw vs one
temperature per question type (methods.md J.6), on ARC questions asked as decisions, or vs one
temperature on ARC questions asked by ``POST /v1/mcq/answer`` (``--dataset arc-mcq``, J.7).

Each ARC item is one decision, read by ``POST /v1/decisions`` as a user would send it
(``calibration_id: "none"``, the raw read; one order of the choices, no debiasing, as the
service fits a ``decisions`` calibration):

- a **choice** question: which option answers the question (the options as choice values, in
  file order), labelled with the answer key's option;
- a **predicate** question: whether one named option is the correct answer, labelled true on
  even items (the correct option) and false on odd ones (the option after it), so both labels
  are present whatever ``--limit`` cuts.

An item whose options repeat (a choice's value must be unique) is skipped and listed. The
temperatures are then fitted here (service.scoring.calibration) per question type, on the
whole set and by k-fold cross-validation with both questions of an item in one fold;
top-label ECE over equal-mass bins, multi-class NLL and Brier, accuracy and the AUROC of the
confidence, per type and pooled.

``arc-mcq`` asks each usable item once by ``POST /v1/mcq/answer`` (``debias: "none"``,
``calibration_id: "none"``): one read of kind ``mcq`` per item, labelled with its answer key.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import numpy as np
from scipy import special
from verifier_client import AsyncClient, VerifierError
from verifier_client.models import (
    ChoiceAnswer,
    DecisionResponse,
    PredicateAnswer,
    ScoreAnswer,
    Usage,
)

from service.evals.common import (
    ProgressFn,
    gather_with_progress,
    is_request_error,
    open_client,
    sum_usage,
)
from service.evals.data import GoldItem, read_arc
from service.scoring import calibration, calibration_multiclass

logger = logging.getLogger(__name__)

DEFAULT_FILE: Final = Path("arc") / "ARC-Challenge-Dev.jsonl"
CHOICE_INSTRUCTIONS: Final = "Which option answers the question correctly?"
PREDICATE_INSTRUCTIONS: Final = "This option is the correct answer to the question: {option}"
KINDS: Final = ("choice", "predicate")


def decision_example(item: GoldItem, position: int) -> dict[str, Any]:
    """One ARC item as a labelled decision (the shape POST /v1/calibrations takes for target
    ``decisions``): a choice question and a predicate question about one option."""
    true = position % 2 == 0
    named = item.answer_index if true else (item.answer_index + 1) % len(item.options)
    return {
        "input": item.question,
        "questions": [
            {
                "type": "choice",
                "instructions": CHOICE_INSTRUCTIONS,
                "choices": [{"value": option} for option in item.options],
            },
            {
                "type": "predicate",
                "instructions": PREDICATE_INSTRUCTIONS.format(option=item.options[named]),
            },
        ],
        "answers": [item.options[item.answer_index], true],
    }


def arc_decision_examples(
    path: Path, limit: int | None
) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """The first ``limit`` usable ARC items as ``(id, labelled decision)``, and the skipped
    ones (unreadable, or options that repeat)."""
    items, skipped = read_arc(path)
    left_out = [{"line": s.row, "reason": s.reason} for s in skipped]
    examples: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if limit is not None and len(examples) >= limit:
            break
        if len(set(item.options)) != len(item.options):
            left_out.append({"id": item.id, "reason": "its options repeat"})
            continue
        examples.append((item.id, decision_example(item, len(examples))))
    return examples, left_out


@dataclass(frozen=True, slots=True)
class Read:
    """One item's label probabilities per question (choice, predicate; or its one mcq read),
    or the 4xx."""

    id: str
    answers: list[int]
    kinds: tuple[str, ...] = KINDS
    probabilities: list[list[float]] | None = None
    usage: Usage | None = None
    model: str | None = None
    error: str | None = None


def _label_probabilities(resp: DecisionResponse) -> list[list[float]] | None:
    """Per answer, its probability per label (a predicate: true, false); None on a refusal."""
    out = []
    for answer in resp.answers:
        a = getattr(answer, "root", answer)  # the generated union may wrap each answer
        if isinstance(a, PredicateAnswer):
            out.append([a.probability, 1.0 - a.probability])
        elif isinstance(a, ChoiceAnswer | ScoreAnswer):
            out.append([p.probability for p in a.probabilities])
        else:
            return None
    return out


def answer_indexes(example: dict[str, Any]) -> list[int]:
    """The correct label's index per question: the answer's choice, then 0 (true) or 1."""
    choice, predicate = example["questions"][0], example["answers"]
    values = [c["value"] for c in choice["choices"]]
    return [values.index(predicate[0]), 0 if predicate[1] else 1]


async def read_item(
    client: AsyncClient, item_id: str, example: dict[str, Any], options: dict[str, Any]
) -> Read:
    """One decision, raw; a 4xx refusal (or a question refused for length) is a failed read."""
    answers = answer_indexes(example)
    try:
        res = await client.decide(
            input=example["input"], questions=example["questions"], model="verifier", **options
        )
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("%s: %s", item_id, exc)
        return Read(item_id, answers, error=str(exc))
    probs = _label_probabilities(res)
    if probs is None:
        return Read(item_id, answers, error="a question was refused (its prompt is too long)")
    usage = Usage.model_validate(res.usage.model_dump(include=set(Usage.model_fields)))
    return Read(item_id, answers, KINDS, probs, usage, res.model)


async def read_mcq_item(
    client: AsyncClient, item_id: str, example: dict[str, Any], options: dict[str, Any]
) -> Read:
    """One ARC item by POST /v1/mcq/answer, raw; a 4xx refusal is a failed read."""
    choice = example["questions"][0]
    texts = [c["value"] for c in choice["choices"]]
    answers = answer_indexes(example)[:1]
    try:
        res = await client.mcq_answer(
            question=example["input"], options=texts, calibration_id="none"
        )
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("%s: %s", item_id, exc)
        return Read(item_id, answers, ("mcq",), error=str(exc))
    return Read(item_id, answers, ("mcq",), [res.probs], res.usage, res.model)


def _held_out_block(
    metrics: calibration.BinaryMetrics, confidences: list[float], n_bins: int, seed: int
) -> dict[str, Any]:
    noise = calibration.ece_noise(confidences, n_bins, seed=seed)
    return {"metrics": asdict(metrics), "ece_noise": asdict(noise)}


def summarize(reads: list[Read], folds: int, n_bins: int, seed: int) -> dict[str, Any]:
    """Fit a temperature per question type; raw and held-out figures per type and pooled."""
    done = [r for r in reads if r.error is None and r.probabilities is not None]
    rows, answers, kinds, groups = [], [], [], []
    for g, r in enumerate(done):
        assert r.probabilities is not None  # filtered above
        for kind, probs, answer in zip(r.kinds, r.probabilities, r.answers, strict=True):
            rows.append(calibration_multiclass.option_logits(probs))
            answers.append(answer)
            kinds.append(kind)
            groups.append(g)
    fit = calibration_multiclass.calibrate_by_kind(
        rows, answers, kinds, groups, folds=folds, n_bins=n_bins, seed=seed
    )
    by_type: dict[str, Any] = {}
    for kind, f in fit.by_kind.items():
        m = fit.kind_metrics[kind]
        by_type[kind] = {
            "questions": len(f.fitted),
            "temperature": f.temperature.t,
            "at_bound": f.temperature.at_bound,
            "fold_temperatures": f.fold_temperatures,
            "fit_set": {"raw": asdict(m["raw"]), "temperature": asdict(m["fitted"])},
            "held_out": {
                "raw": _held_out_block(m["raw"], _confidences(rows, kinds, kind), n_bins, seed),
                "temperature": _held_out_block(
                    m["held_out"], [_confidence(z) for z in f.held_out], n_bins, seed
                ),
            },
        }
    held: list[Any] = [None] * len(rows)
    for kind, f in fit.by_kind.items():
        mine = [i for i, k in enumerate(kinds) if k == kind]
        for i, z in zip(mine, f.held_out, strict=True):
            held[i] = z
    fold_of = calibration_multiclass.group_folds(groups, folds, seed)
    items = [
        {
            "id": done[groups[i]].id,
            "kind": kinds[i],
            "answer": answers[i],
            "raw": special.softmax(rows[i]).tolist(),
            "fold": int(fold_of[i]),
            # top-label confidence, raw and through the temperature fitted without its fold
            "held_out": {
                "raw": _confidence(rows[i]),
                "temperature": _confidence(held[i]),
            },
        }
        for i in range(len(rows))
    ]
    return {
        "n_items": len(done),
        "n_questions": len(rows),
        "base_rate": fit.metrics["raw"].base_rate,  # top-label: the raw read's accuracy
        "folds": folds,
        "n_bins": n_bins,
        "seed": seed,
        "temperatures": {k: v["temperature"] for k, v in by_type.items()},
        "fit_set": {
            "raw": asdict(fit.metrics["raw"]),
            "temperature": asdict(fit.metrics["fitted"]),
        },
        "held_out": {
            "raw": _held_out_block(fit.metrics["raw"], _confidences(rows, kinds), n_bins, seed),
            "temperature": _held_out_block(
                fit.metrics["held_out"],
                [item["held_out"]["temperature"] for item in items],
                n_bins,
                seed,
            ),
        },
        "types": by_type,
        "items": items,
    }


def _confidences(rows: list[Any], kinds: list[str], kind: str | None = None) -> list[float]:
    """The raw top-label confidence of each row (of ``kind`` only, when given)."""
    return [_confidence(z) for z, k in zip(rows, kinds, strict=True) if kind in (None, k)]


def _confidence(logits: Any) -> float:
    """The top-label confidence of a row of (calibrated) option logits: its largest softmax
    share (a temperature's logits ``log p / T`` are not normalised)."""
    return float(special.softmax(np.asarray(logits, dtype=np.float64)).max())


async def run_decision_calibration(
    url: str,
    data: Path,
    limit: int | None = None,
    mode: str = "direct",
    reasoning_tokens: int = 256,
    folds: int = calibration.DEFAULT_FOLDS,
    n_bins: int = calibration.DEFAULT_BINS,
    seed: int = 0,
    concurrency: int = 8,
    *,
    target: str = "decisions",
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Read, fit and score ARC items asked as decisions (or by /v1/mcq/answer, target
    ``mcq``) against ``url``."""
    examples, skipped = arc_decision_examples(data, limit)
    if not examples:
        raise ValueError(f"{data}: no usable ARC items (limit={limit})")
    options: dict[str, Any] = {"mode": mode, "calibration_id": "none"}
    if mode == "reasoning":
        options["reasoning_tokens"] = reasoning_tokens
    read = read_item
    if target == "mcq":
        if mode != "direct":
            raise ValueError("the mcq target reads option letters directly: mode 'direct' only")
        options, read = {"calibration_id": "none"}, read_mcq_item
    start = time.perf_counter()
    async with open_client(url, concurrency, transport, timeout_s) as client:
        jobs = [read(client, item_id, ex, options) for item_id, ex in examples]
        reads = await gather_with_progress(jobs, progress)
    wall_s = time.perf_counter() - start
    failed = [{"id": r.id, "error": r.error} for r in reads if r.error is not None]
    config = {
        **options,
        "target": target,
        "dataset": "arc" if target == "decisions" else "arc-mcq",
        "data": str(data),
        "limit": limit,
        "concurrency": concurrency,
        "url": url,
        "model": next((r.model for r in reads if r.model is not None), None),
    }
    return {
        "config": config,
        **summarize(reads, folds, n_bins, seed),
        "n_failed": len(failed),
        "failed": failed,
        "skipped": skipped,
        "usage": sum_usage(r.usage for r in reads if r.usage is not None),
        "wall_s": wall_s,
    }
