"""The PopMCQ builder (docs/methods.md B.1-B.2): four-option items whose distractors follow S1-S6.

Pure and seeded. Every (item, strategy) pair draws from its own generator, seeded by the seed,
the item id and the strategy, so a pair's item does not change when other items or strategies
are added. A strategy that cannot be satisfied is skipped and counted, never relaxed.

Rules the paper leaves open, as decided here (docs/methods.md marks them reconstructed):

- ties in popularity are broken by the pair's generator (never by input order);
- S3 ("gradient") takes, among the distinct popularity values above ``pop(gold)``, the highest,
  the lowest and the middle one, one candidate each: a gradient across the range;
- S4 ("direct competition") takes the pool's most popular candidate and two others in the mid
  band ``(0.3, 0.7]``, whatever ``pop(gold)`` is;
- S6 keeps S1's three distractors, in S1's order, at A-C and puts "None of the above" at D;
- a candidate equal to the gold answer (case and spacing aside) is not a distractor, and
  repeated candidates count once.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

Strategy = Literal["S1", "S2", "S3", "S4", "S5", "S6"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("S1", "S2", "S3", "S4", "S5", "S6")
STRATEGY_NAMES: Final[dict[Strategy, str]] = {
    "S1": "baseline",
    "S2": "popular trap",
    "S3": "gradient",
    "S4": "direct competition",
    "S5": "reverse control",
    "S6": "none of the above",
}
NONE_OF_THE_ABOVE: Final = "None of the above"
MID_BAND: Final = (0.3, 0.7)  # (low, high]: the paper's mid popularity bucket
N_DISTRACTORS: Final = 3
# B.1: items are kept only with enough candidates and with these strategies buildable.
PAPER_REQUIRED: Final[tuple[Strategy, ...]] = ("S1", "S2", "S6")
PAPER_MIN_CANDIDATES: Final = 4


@dataclass(frozen=True, slots=True)
class Candidate:
    text: str
    pop: float


@dataclass(frozen=True, slots=True)
class PoolItem:
    """A question, its gold answer and a pool of wrong candidates, each with a popularity."""

    id: str
    question: str
    gold: Candidate
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True)
class BuiltItem:
    item_id: str
    strategy: Strategy
    question: str
    options: tuple[str, ...]
    popularity: tuple[float, ...]
    answer_index: int


@dataclass
class BuildReport:
    built: list[BuiltItem] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # unsatisfiable pairs per strategy
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (item id, reason)


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def distractor_pool(item: PoolItem) -> list[Candidate]:
    """The candidates that can serve as distractors: not the gold, each text once."""
    seen = {_key(item.gold.text)}
    out = []
    for cand in item.candidates:
        if _key(cand.text) not in seen:
            seen.add(_key(cand.text))
            out.append(cand)
    return out


def _rng(seed: int, item_id: str, strategy: str) -> random.Random:
    return random.Random(f"{seed}|{item_id}|{strategy}")


def _by_pop_desc(cands: Sequence[Candidate], rng: random.Random) -> list[Candidate]:
    """Most popular first; ties in a random (seeded) order."""
    shuffled = list(cands)
    rng.shuffle(shuffled)
    return sorted(shuffled, key=lambda c: -c.pop)


def _s1(pool: Sequence[Candidate], rng: random.Random) -> list[Candidate] | None:
    return rng.sample(list(pool), N_DISTRACTORS) if len(pool) >= N_DISTRACTORS else None


def _s2(pool: Sequence[Candidate], p_gold: float, rng: random.Random) -> list[Candidate] | None:
    top = _by_pop_desc(pool, rng)[:N_DISTRACTORS]
    if len(top) < N_DISTRACTORS or any(c.pop <= p_gold for c in top):
        return None
    return top


def _s3(pool: Sequence[Candidate], p_gold: float, rng: random.Random) -> list[Candidate] | None:
    values = sorted({c.pop for c in pool if c.pop > p_gold}, reverse=True)
    if len(values) < N_DISTRACTORS:
        return None
    picked = (values[0], values[len(values) // 2], values[-1])
    return [rng.choice([c for c in pool if c.pop == v]) for v in picked]


def _s4(pool: Sequence[Candidate], rng: random.Random) -> list[Candidate] | None:
    if not pool:
        return None
    top = _by_pop_desc(pool, rng)[0]
    low, high = MID_BAND
    mids = [c for c in pool if c is not top and low < c.pop <= high]
    if len(mids) < 2:
        return None
    return [top, *rng.sample(mids, 2)]


def _s5(pool: Sequence[Candidate], p_gold: float, rng: random.Random) -> list[Candidate] | None:
    below = [c for c in pool if c.pop < p_gold]
    return rng.sample(below, N_DISTRACTORS) if len(below) >= N_DISTRACTORS else None


def _place(
    item: PoolItem, strategy: Strategy, distractors: list[Candidate], rng: random.Random
) -> BuiltItem:
    """The gold answer at a random position among the (shuffled) distractors."""
    order = list(distractors)
    rng.shuffle(order)
    at = rng.randrange(len(order) + 1)
    order.insert(at, item.gold)
    return BuiltItem(
        item_id=item.id,
        strategy=strategy,
        question=item.question,
        options=tuple(c.text for c in order),
        popularity=tuple(c.pop for c in order),
        answer_index=at,
    )


def build(item: PoolItem, strategy: Strategy, seed: int = 0) -> BuiltItem | None:
    """The item under ``strategy``, or None when the pool cannot satisfy it."""
    pool = distractor_pool(item)
    p_gold = item.gold.pop
    if strategy == "S6":
        s1 = build(item, "S1", seed)
        if s1 is None:
            return None
        kept = [i for i in range(len(s1.options)) if i != s1.answer_index]
        return BuiltItem(
            item_id=item.id,
            strategy="S6",
            question=item.question,
            options=(*(s1.options[i] for i in kept), NONE_OF_THE_ABOVE),
            popularity=(*(s1.popularity[i] for i in kept), 0.0),
            answer_index=N_DISTRACTORS,
        )
    rng = _rng(seed, item.id, strategy)
    chosen = {
        "S1": lambda: _s1(pool, rng),
        "S2": lambda: _s2(pool, p_gold, rng),
        "S3": lambda: _s3(pool, p_gold, rng),
        "S4": lambda: _s4(pool, rng),
        "S5": lambda: _s5(pool, p_gold, rng),
    }[strategy]()
    return None if chosen is None else _place(item, strategy, chosen, rng)


def build_all(
    items: Iterable[PoolItem],
    strategies: Sequence[Strategy] = STRATEGIES,
    seed: int = 0,
    *,
    required: Sequence[Strategy] = PAPER_REQUIRED,
    min_candidates: int = PAPER_MIN_CANDIDATES,
) -> BuildReport:
    """Every buildable (item, strategy) pair.

    Items without ``min_candidates`` distractors or without every ``required`` strategy are
    dropped whole (B.1's item filter); for kept items, unsatisfiable pairs are counted.
    """
    report = BuildReport()
    for item in items:
        n = len(distractor_pool(item))
        if n < min_candidates:
            report.dropped.append((item.id, f"{n} distinct wrong candidates < {min_candidates}"))
            continue
        missing = [s for s in required if build(item, s, seed) is None]
        if missing:
            report.dropped.append((item.id, f"cannot build {', '.join(missing)}"))
            continue
        for strategy in strategies:
            built = build(item, strategy, seed)
            if built is None:
                report.skipped[strategy] += 1
            else:
                report.built.append(built)
    return report
