"""Option-probability debiasing (docs/methods.md B.4-B.7): pure math, no I/O.

- PopDebias, log-linear (B.5 variant 1, the default): ``z_i = log p_i - lambda * phi(pop_i)``
  with a label-free ``lambda`` fitted on calibration items (within-item centred regression).
- PopDebias, binned (B.5 variant 2): ``z_i = log p_i - log pi_b(pop_i)``, ``log pi_b`` the mean
  within-item-centred log-probability of calibration options in popularity bin ``b``.
- PriDe (B.6): a global prior over option IDs (letters), estimated from cyclic permutations of
  calibration items, divided out of each item's observed letter probabilities.
- Contextual calibration (B.7): ``p_i / p_cf,i`` renormalised, ``p_cf`` the letter
  probabilities on content-free inputs.

Every function takes and returns plain lists of floats; probabilities are over the K options.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

EPS = 1e-10  # PriDe's "+1e-10" inside every log
CF_FLOOR = 1e-6  # contextual calibration: clip p_cf (B.7)
DEFAULT_BIN_EDGES = (0.3, 0.7)  # the paper's buckets: <= 0.3, (0.3, 0.7], > 0.7
Phi = Literal["pop", "log"]


def softmax(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(v - top) for v in logits]
    total = sum(exps)
    return [e / total for e in exps]


def log_probs(probs: Sequence[float]) -> list[float]:
    return [math.log(max(p, EPS)) for p in probs]


def argmax(values: Sequence[float]) -> int:
    """First index of the largest value (ties go to the lowest index)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def phi(pop: float, kind: Phi = "pop") -> float:
    return pop if kind == "pop" else math.log(pop + 1e-6)


def _centred(values: Sequence[float]) -> list[float]:
    mean = sum(values) / len(values)
    return [v - mean for v in values]


# --- PopDebias, log-linear -------------------------------------------------------------------


def fit_lambda(
    probs: Sequence[Sequence[float]], pops: Sequence[Sequence[float]], kind: Phi = "pop"
) -> float:
    """Label-free lambda: regression of within-item-centred log p on within-item-centred phi.

    It estimates the popularity slope only where correctness and popularity are independent
    on the calibration items; where they correlate, lambda also absorbs real signal.
    """
    num = den = 0.0
    for p, pop in zip(probs, pops, strict=True):
        y = _centred(log_probs(p))
        x = _centred([phi(v, kind) for v in pop])
        num += sum(a * b for a, b in zip(x, y, strict=True))
        den += sum(a * a for a in x)
    return num / den if den > 0 else 0.0


def loglinear(
    probs: Sequence[float], pops: Sequence[float], lam: float, kind: Phi = "pop"
) -> list[float]:
    """Debiased probabilities ``softmax(log p - lambda * phi(pop))``; lambda 0 gives p back."""
    if lam == 0:
        return list(probs)
    z = [lp - lam * phi(v, kind) for lp, v in zip(log_probs(probs), pops, strict=True)]
    return softmax(z)


# --- PopDebias, binned -----------------------------------------------------------------------


def bin_of(pop: float, edges: Sequence[float] = DEFAULT_BIN_EDGES) -> int:
    """Bin index: ``pop <= edges[0]`` is bin 0, ``(edges[0], edges[1]]`` bin 1, and so on."""
    for i, edge in enumerate(edges):
        if pop <= edge:
            return i
    return len(edges)


def fit_bins(
    probs: Sequence[Sequence[float]],
    pops: Sequence[Sequence[float]],
    edges: Sequence[float] = DEFAULT_BIN_EDGES,
) -> list[float]:
    """``log pi_b`` per bin: mean within-item-centred log p of its options (0 if empty)."""
    sums = [0.0] * (len(edges) + 1)
    counts = [0] * (len(edges) + 1)
    for p, pop in zip(probs, pops, strict=True):
        for y, v in zip(_centred(log_probs(p)), pop, strict=True):
            b = bin_of(v, edges)
            sums[b] += y
            counts[b] += 1
    return [s / n if n else 0.0 for s, n in zip(sums, counts, strict=True)]


def binned(
    probs: Sequence[float],
    pops: Sequence[float],
    log_pi: Sequence[float],
    edges: Sequence[float] = DEFAULT_BIN_EDGES,
) -> list[float]:
    z = [lp - log_pi[bin_of(v, edges)] for lp, v in zip(log_probs(probs), pops, strict=True)]
    return softmax(z)


# --- PriDe -----------------------------------------------------------------------------------


def cyclic(options: Sequence[str], shift: int) -> list[str]:
    """Options rotated so that position i shows option ``(i + shift) % K``."""
    k = len(options)
    return [options[(i + shift) % k] for i in range(k)]


def pride_item_prior(observed: Sequence[Sequence[float]]) -> list[float]:
    """Letter prior of one item from its K cyclic runs (``observed[s][d]``: P(ID d), run s).

    ``softmax_d(mean_s log(P_obs(d) + 1e-10))``, each run normalised over the IDs first.
    """
    k = len(observed[0])
    runs = [[v / sum(run) for v in run] for run in observed]
    means = [sum(math.log(run[d] + EPS) for run in runs) / len(runs) for d in range(k)]
    return softmax(means)


def pride_content_probs(observed: Sequence[Sequence[float]]) -> list[float]:
    """A calibration item's own answer: each content option's mean probability over the runs.

    In run ``s`` the option shown at position ``d`` is content ``(d + s) % K``.
    """
    k = len(observed[0])
    totals = [0.0] * k
    for s, run in enumerate(observed):
        norm = sum(run)
        for d, v in enumerate(run):
            totals[(d + s) % k] += v / norm
    return [t / len(observed) for t in totals]


def pride_global_prior(item_priors: Sequence[Sequence[float]]) -> list[float]:
    k = len(item_priors[0])
    return [sum(p[d] for p in item_priors) / len(item_priors) for d in range(k)]


def pride(probs: Sequence[float], prior: Sequence[float]) -> list[float]:
    """``log(P_obs(d) + 1e-10) - log(prior_d + 1e-10)``, renormalised."""
    z = [math.log(p + EPS) - math.log(q + EPS) for p, q in zip(probs, prior, strict=True)]
    return softmax(z)


# --- contextual calibration --------------------------------------------------------------------


def mean_probs(runs: Sequence[Sequence[float]]) -> list[float]:
    """Average of several normalised distributions, renormalised (content-free inputs)."""
    k = len(runs[0])
    mean = [sum(r[i] for r in runs) / len(runs) for i in range(k)]
    total = sum(mean)
    return [m / total for m in mean]


def contextual(probs: Sequence[float], p_cf: Sequence[float]) -> list[float]:
    """``p / p_cf`` renormalised (``W = diag(p_cf)^-1``, ``b = 0``); p_cf clipped at 1e-6."""
    q = [p / max(c, CF_FLOOR) for p, c in zip(probs, p_cf, strict=True)]
    total = sum(q)
    return [v / total for v in q]


# --- popularity proxy and MCQ metrics ----------------------------------------------------------


def min_max(values: Sequence[float]) -> list[float]:
    """Per-question min-max normalisation to [0, 1]; all equal gives 0.5 each (no signal)."""
    lo, hi = min(values), max(values)
    if hi - lo <= 0:
        return [0.5] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def rstd(gold: Sequence[int], pred: Sequence[int], k: int) -> float:
    """Standard deviation of per-class recall x 100 (PriDe's RStd), over classes present."""
    recalls = []
    for c in range(k):
        idx = [i for i, g in enumerate(gold) if g == c]
        if idx:
            recalls.append(100 * sum(pred[i] == c for i in idx) / len(idx))
    if len(recalls) < 2:
        return 0.0
    mean = sum(recalls) / len(recalls)
    return math.sqrt(sum((r - mean) ** 2 for r in recalls) / len(recalls))


# Which calibration methods each debiasing method accepts.
COMPATIBLE: dict[str, tuple[str, ...]] = {
    "popdebias": ("popdebias", "popdebias_binned"),
    "pride": ("pride",),
    "contextual": ("contextual",),
}


def calibration_mismatch(
    calibration_id: str,
    fitted: tuple[str, int | None, str],
    method: str,
    ks: Sequence[int],
    model: str,
) -> str | None:
    """Why a calibration fitted as ``fitted`` (method, option count or None for any, model)
    cannot serve ``method`` on items of ``ks`` options with ``model``; None when it can.

    Example: ``calibration_mismatch("cal_1", ("pride", 4, "m"), "pride", [5], "m")`` names
    the 4 options it was fitted for.
    """
    fitted_method, fitted_k, fitted_model = fitted
    accepted = COMPATIBLE.get(method, ())
    if fitted_method not in accepted:
        wanted = " or ".join(accepted) or "none (debias='none' uses no calibration)"
        return (
            f"calibration {calibration_id} was fitted for method {fitted_method!r}; "
            f"debias={method!r} needs {wanted}"
        )
    wrong_k = sorted({k for k in ks if fitted_k is not None and k != fitted_k})
    if wrong_k:
        return (
            f"calibration {calibration_id} was fitted for {fitted_k} options; this request has "
            f"{wrong_k} (fit one per option count)"
        )
    if fitted_model != model:
        return (
            f"calibration {calibration_id} was fitted on model {fitted_model!r}; this service "
            f"runs {model!r}"
        )
    return None
