"""Per-sample verification specs for the trainer hooks: which check a sample gets, from its
ground truth (a spec itself) or its data source (a spec the user maps it to), sent through
``POST /v1/rewards`` (docs/api.md).

verl routes rewards by ``data_source`` (its ``default_compute_score``); ``specs`` does the same
with the service's checks: ``{"openai/gsm8k": {"type": "math"}, "arc": {"type": "choice"}}``,
each sample's ground truth filled in as the spec's gold field (``reference``, ``answer``, or a
regex ``pattern``) where the spec leaves it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from verifier_client import models as m
from verifier_client._client import AsyncClient, Client
from verifier_client._rl import SKIPPED, Judged, reference_of
from verifier_client.errors import BadRequestError, RateLimitError

Specs = Mapping[str, Mapping[str, Any]]
# The field each spec type takes its gold value in.
GOLD_FIELD: Final = {
    "math": "reference",
    "choice": "answer",
    "string": "reference",
    "model": "reference",
    "rubric": "reference",
}
# Request options of /v1/rewards a hook passes on (the per-sample judge options are not).
REWARDS_OPTIONS: Final = frozenset({"reasoning_tokens", "cache", "deadline_s", "fallback_reward"})


def _is_spec(value: Any) -> bool:
    return isinstance(value, Mapping) and ("type" in value or "components" in value)


def _filled(spec: Mapping[str, Any], gold: str | None) -> dict[str, Any]:
    out = dict(spec)
    kind = str(out.get("type"))
    key = (
        "pattern" if kind == "string" and out.get("operation") == "regex" else GOLD_FIELD.get(kind)
    )
    if key is not None and key not in out and gold is not None:
        out[key] = gold
    return out


def spec_fields(
    ground_truth: Any, data_source: str | None, specs: Specs | None
) -> dict[str, Any] | None:
    """A sample's ``verifier`` (or ``components`` and ``formula``) for /v1/rewards: its ground
    truth when that is a spec, else its data source's spec with the ground truth as the gold
    value; None when neither applies (the hook's usual judgment then).

    Example:
        >>> spec_fields("72", "gsm8k", {"gsm8k": {"type": "math"}})
        {'verifier': {'type': 'math', 'reference': '72'}}
    """
    if _is_spec(ground_truth):
        template, gold = ground_truth, None
    elif specs and data_source is not None and data_source in specs:
        template, gold = specs[data_source], reference_of(ground_truth)
    else:
        return None
    if "components" in template:
        components = {n: _filled(c, gold) for n, c in template["components"].items()}
        out: dict[str, Any] = {"components": components}
        if template.get("formula") is not None:
            out["formula"] = template["formula"]
        return out
    return {"verifier": _filled(template, gold)}


def judged_of(result: m.RewardResult) -> Judged:
    """A rewards result as the hooks report a judgment; a timed-out or failed sample has no
    reward (None), as a late call does."""
    if result.timed_out or result.failed is not None:
        return SKIPPED
    rule = result.decided_by == "rule"
    return Judged(
        result.reward,
        decided_by_rule=rule,
        rule_equivalent=(result.reward == 1.0) if rule else None,
        model_score=result.score,
    )


def _body(items: Sequence[dict[str, Any]], mode: str, options: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {k: v for k, v in options.items() if k in REWARDS_OPTIONS}
    if mode in ("direct", "reasoning"):
        body["mode"] = mode
    return {"items": list(items), **body}


def rewards_sync(
    client: Client, items: Sequence[dict[str, Any]], mode: str, options: Mapping[str, Any]
) -> list[Judged]:
    """Each item by its own spec in one /v1/rewards call; every item ``SKIPPED`` when the
    service refuses the call (a bad spec: 422)."""
    if not items:
        return []
    try:
        resp = client.rewards(**_body(items, mode, options))
    except BadRequestError as exc:
        if isinstance(exc, RateLimitError):
            raise
        return [SKIPPED] * len(items)
    return [judged_of(r) for r in resp.results]


async def rewards_async(
    client: AsyncClient, items: Sequence[dict[str, Any]], mode: str, options: Mapping[str, Any]
) -> list[Judged]:
    """The async twin of ``rewards_sync``."""
    if not items:
        return []
    try:
        resp = await client.rewards(**_body(items, mode, options))
    except BadRequestError as exc:
        if isinstance(exc, RateLimitError):
            raise
        return [SKIPPED] * len(items)
    return [judged_of(r) for r in resp.results]


def merged(
    n: int, items: Sequence[int], by_spec: Sequence[Judged | None], plain: Sequence[Judged | None]
) -> list[Judged | None]:
    """A batch's judgments in order: the spec samples' (at ``items``) and the others'."""
    out: list[Judged | None] = [None] * n
    rest = iter(plain)
    spec = dict(zip(items, by_spec, strict=True))
    for i in range(n):
        out[i] = spec[i] if i in spec else next(rest)
    return out


def remaining(timeout_s: float | None, start: float, now: float) -> float | None:
    """What is left of a batch's ``timeout_s`` (None: no bound) at ``now``."""
    return None if timeout_s is None else max(0.0, timeout_s - (now - start))
