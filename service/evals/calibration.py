"""Calibration of judge probabilities through the service: raw vs temperature vs Platt
(methods.md J), on outcome scores or on pairwise preferences.

Each labelled solution is judged by ``POST /v1/judge/outcome`` exactly as a user would send it
(``verifier: "model"``, no reference, the given mode and reasoning budget) and its raw ``logit``
is kept. The maps are then fitted here (service.scoring.calibration): on the whole set (the
parameters) and by stratified k-fold cross-validation (every fold scored by maps fitted on the
other folds), with ECE over equal-mass bins, Brier, NLL and AUROC per method.

Labelled data (data/SOURCES.md):

- ``gsm8k`` (the default): ``gsm8k/example_model_solutions.jsonl``, every solver's solution of
  each question in file and solver order; label = the file's ``is_correct`` (its final answer
  equals the reference's). ``--limit`` counts solutions.
- ``processbench``: ``processbench/gsm8k.json``, the steps joined by blank lines as the
  response; label = ``final_answer_correct``. The file lists its wrong solutions first, so the
  two classes are interleaved (wrong, correct, wrong, ...) before ``--limit`` cuts.

- ``gsm8k-pairs`` (target ``compare``): the same file's labelled pairs (one correct and one
  wrong solution of a question, the correct one first on even pairs: ``evals.compare``), each
  read by ``POST /v1/judge/compare`` (pairwise, both orders). The read is
  ``z = logit(P(correct over wrong))``, fitted in the alternating orientation the service
  uses (docs/methods.md J.5): label 1 with ``z`` on even pairs, label 0 with ``-z`` on odd
  ones. ``--limit`` counts pairs.

A request the service refuses with a 4xx is listed under ``failed`` and left out of the fit;
any other failure aborts the run.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

import httpx
from scipy import special
from verifier_client import AsyncClient, VerifierError
from verifier_client.models import OutcomeRequest, Usage

from service.evals.common import (
    ProgressFn,
    gather_with_progress,
    is_request_error,
    open_client,
    sum_usage,
)
from service.evals.compare import build_pairs
from service.evals.data import load_gsm8k_solutions, load_processbench
from service.scoring import calibration

logger = logging.getLogger(__name__)

Dataset = Literal["gsm8k", "processbench", "gsm8k-pairs"]
DEFAULT_FILES: Final[dict[str, Path]] = {
    "gsm8k": Path("gsm8k") / "example_model_solutions.jsonl",
    "processbench": Path("processbench") / "gsm8k.json",
    "gsm8k-pairs": Path("gsm8k") / "example_model_solutions.jsonl",
}
PAIRS: Final = "gsm8k-pairs"  # the one dataset of target compare
_OPTION_FIELDS: Final = frozenset({"mode", "reasoning_tokens", "verifier"})


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled solution: ``label`` 1 if it is correct. A pair (``other`` set) is read
    as ``responses`` in that order; ``correct`` indexes the correct one, and ``label`` is the
    orientation it is fitted in."""

    id: str
    question: str
    response: str
    label: int
    other: str | None = None
    correct: int = 0

    @property
    def responses(self) -> list[str]:
        return [self.response, self.other or ""]


@dataclass(frozen=True, slots=True)
class Read:
    """The service's answer for one example, or the 4xx that refused it."""

    example: Example
    logit: float | None = None
    score: float | None = None
    usage: Usage | None = None
    model: str | None = None
    error: str | None = None


def gsm8k_examples(path: Path, limit: int | None) -> list[Example]:
    """Every solver's solution, question by question, the first ``limit`` of them."""
    questions = None if limit is None else math.ceil(limit / 4)
    examples = [
        Example(f"{q}:{c.solver_name}", item.question, c.solution, int(c.is_correct))
        for q, item in enumerate(load_gsm8k_solutions(path, questions))
        for c in item.candidates
    ]
    return examples[:limit]


def processbench_examples(path: Path, limit: int | None) -> list[Example]:
    """ProcessBench items as whole responses, classes interleaved, the first ``limit``."""
    by_class: dict[bool, list[Example]] = {False: [], True: []}
    for item in load_processbench(path):
        response = "\n\n".join(item.steps)
        example = Example(item.id, item.problem, response, int(item.final_answer_correct))
        by_class[item.final_answer_correct].append(example)
    pairs = itertools.zip_longest(by_class[False], by_class[True])
    examples = [e for pair in pairs for e in pair if e is not None]
    return examples[:limit]


def pair_examples(path: Path, limit: int | None) -> list[Example]:
    """GSM8K's labelled pairs in ``build_pairs`` order (positions balanced), fitted in
    alternating orientation (``calibration.pair_labels``)."""
    # as `verifier eval compare` reads them: a question may give no pair (all its solutions
    # right, or all wrong), so every question is loaded and the pairs are cut
    pairs = build_pairs(load_gsm8k_solutions(path), limit)
    labels = calibration.pair_labels(len(pairs))
    return [
        Example(
            f"{p.question_index}:{p.solvers[0]}:{p.solvers[1]}",
            p.question,
            p.responses[0],
            y,
            other=p.responses[1],
            correct=p.correct,
        )
        for p, y in zip(pairs, labels, strict=True)
    ]


def load_examples(dataset: str, path: Path, limit: int | None) -> list[Example]:
    if dataset == "gsm8k":
        return gsm8k_examples(path, limit)
    if dataset == "processbench":
        return processbench_examples(path, limit)
    if dataset == PAIRS:
        return pair_examples(path, limit)
    raise ValueError(f"dataset {dataset!r}: choose gsm8k, processbench or {PAIRS}")


def compare_options(mode: str, reasoning_tokens: int) -> dict[str, Any]:
    """How a pair is read: as the service fits a compare calibration (pairwise, both orders)."""
    reasoning = reasoning_tokens if mode == "reasoning" else None
    return {
        "mode": "pairwise",
        "debias": "swap",
        "reasoning_tokens": reasoning,
        "calibration_id": "none",  # the raw read, whatever default the tenant marked
    }


async def read_pair(client: AsyncClient, example: Example, options: dict[str, Any]) -> Read:
    """One comparison; the oriented logit of P(correct over wrong). A 4xx is a failed read."""
    try:
        res = await client.compare(
            question=example.question, responses=example.responses, return_reads=False, **options
        )
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("%s: %s", example.id, exc)
        return Read(example, error=str(exc))
    p = res.preferences[example.correct][1 - example.correct]
    if p is None:
        raise ValueError(f"{example.id}: the service answered no preference off the diagonal")
    z = calibration.pair_logits([p])[0] * (1 if example.label == 1 else -1)
    return Read(example, z, float(special.expit(z)), res.usage, res.model)


def outcome_options(mode: str, reasoning_tokens: int) -> dict[str, Any]:
    """The judging options, validated once by the wire model (raises ValueError if invalid)."""
    request = OutcomeRequest.model_validate(
        {
            "question": "options check",
            "response": "options check",
            "verifier": "model",
            "mode": mode,
            "reasoning_tokens": reasoning_tokens,
        }
    )
    return request.model_dump(include=set(_OPTION_FIELDS))


async def read_example(client: AsyncClient, example: Example, options: dict[str, Any]) -> Read:
    """One outcome judgment; a 4xx refusal becomes a failed read."""
    try:
        res = await client.outcome(question=example.question, response=example.response, **options)
    except VerifierError as exc:
        if not is_request_error(exc):
            raise
        logger.warning("%s: %s", example.id, exc)
        return Read(example, error=str(exc))
    if res.logit is None:  # verifier=model always judges; a null logit is the service's bug
        raise ValueError(f"{example.id}: the service answered no logit for a model judgment")
    return Read(example, res.logit, res.score, res.usage, res.model)


def summarize(reads: list[Read], folds: int, n_bins: int, seed: int) -> dict[str, Any]:
    """Fit and score the read logits; the per-item rows carry each method's held-out value."""
    # a read without a logit (none of the model's: it cannot be calibrated) drops its label too
    done = [r for r in reads if r.error is None and r.logit is not None]
    logits = [float(r.logit) for r in done if r.logit is not None]
    labels = [r.example.label for r in done]
    report = calibration.calibrate_binary(logits, labels, folds=folds, n_bins=n_bins, seed=seed)
    report_dict = report.to_dict()
    held_out: dict[str, Any] = report_dict["held_out"]
    items = []
    for i, r in enumerate(done):
        items.append(
            {
                "id": r.example.id,
                "label": r.example.label,
                "logit": r.logit,
                "score": r.score,
                "fold": report.fold_of[i],
                "held_out": {m: held_out[m]["probabilities"][i] for m in held_out},
            }
        )
    for method in held_out.values():
        # ECE has a floor at small n: what perfectly calibrated predictions would show
        noise = calibration.ece_noise(method["probabilities"], n_bins, seed=seed)
        method["ece_noise"] = asdict(noise)
        del method["calibrated_logits"], method["probabilities"]  # now in the rows
    return {
        "n_items": len(done),
        "base_rate": sum(labels) / len(labels),
        "folds": folds,
        "n_bins": n_bins,
        "seed": seed,
        "parameters": report_dict["parameters"],
        "fit_set": report_dict["fit_set"],
        "held_out": held_out,
        "items": items,
    }


async def run_calibration(
    url: str,
    data: Path,
    dataset: str = "gsm8k",
    limit: int | None = None,
    mode: str = "direct",
    reasoning_tokens: int = 256,
    folds: int = calibration.DEFAULT_FOLDS,
    n_bins: int = calibration.DEFAULT_BINS,
    seed: int = 0,
    concurrency: int = 8,
    *,
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Read, fit and score the labelled examples of ``data`` against ``url``."""
    pairs = dataset == PAIRS
    if pairs:
        options = compare_options(mode, reasoning_tokens)
    else:
        options = outcome_options(mode, reasoning_tokens)
    read = read_pair if pairs else read_example
    examples = load_examples(dataset, data, limit)
    if not examples:
        raise ValueError(f"{data}: no labelled examples (limit={limit})")
    start = time.perf_counter()
    async with open_client(url, concurrency, transport, timeout_s) as client:
        jobs = [read(client, e, options) for e in examples]
        reads = await gather_with_progress(jobs, progress)
    wall_s = time.perf_counter() - start
    failed = [{"id": r.example.id, "error": r.error} for r in reads if r.error is not None]
    config = {
        **options,
        "target": "compare" if pairs else "outcome",
        "dataset": dataset,
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
        "usage": sum_usage(r.usage for r in reads if r.usage is not None),
        "wall_s": wall_s,
    }
