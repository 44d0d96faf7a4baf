"""The PopMCQ builder: every strategy's popularity constraints, seeding, skips never relaxed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.scoring.popmcq_build import (
    MID_BAND,
    NONE_OF_THE_ABOVE,
    STRATEGIES,
    BuiltItem,
    Candidate,
    PoolItem,
    build,
    build_all,
    distractor_pool,
)

# Popularity on a coarse grid so ties happen often.
pops = st.integers(0, 20).map(lambda v: v / 20)


@st.composite
def pool_items(draw: st.DrawFn) -> PoolItem:
    n = draw(st.integers(0, 14))
    values = draw(st.lists(pops, min_size=n, max_size=n))
    cands = tuple(Candidate(f"cand {i}", v) for i, v in enumerate(values))
    return PoolItem(
        id=draw(st.text("abc", min_size=1, max_size=4)),
        question="Which one?",
        gold=Candidate("gold", draw(pops)),
        candidates=cands,
    )


def _distractors(built: BuiltItem) -> list[float]:
    return [p for i, p in enumerate(built.popularity) if i != built.answer_index]


def _satisfiable(item: PoolItem, strategy: str) -> bool:
    """Each strategy's condition, stated independently of the builder."""
    pool = distractor_pool(item)
    p = item.gold.pop
    pops_ = sorted((c.pop for c in pool), reverse=True)
    if strategy in ("S1", "S6"):
        return len(pool) >= 3
    if strategy == "S2":
        return len(pool) >= 3 and pops_[2] > p
    if strategy == "S3":
        return len({v for v in pops_ if v > p}) >= 3
    if strategy == "S4":
        low, high = MID_BAND
        # the top candidate plus two mid-band candidates other than it
        mids = [v for v in pops_[1:] if low < v <= high]
        return len(pool) >= 1 and len(mids) >= 2
    return sum(v < p for v in pops_) >= 3  # S5


@given(pool_items(), st.sampled_from(STRATEGIES), st.integers(0, 3))
def test_each_strategy_obeys_its_constraints_or_is_skipped(
    item: PoolItem, strategy: str, seed: int
) -> None:
    built = build(item, strategy, seed)  # type: ignore[arg-type]
    assert (built is not None) == _satisfiable(item, strategy)
    if built is None:
        return
    assert len(built.options) == 4
    assert len(set(built.options)) == 4
    assert built.options.count("gold") == (0 if strategy == "S6" else 1)
    d = _distractors(built)
    p = item.gold.pop
    pool_pops = [c.pop for c in distractor_pool(item)]
    if strategy != "S6":
        assert built.popularity[built.answer_index] == p
    if strategy == "S2":
        assert all(v > p for v in d)
        assert sorted(d, reverse=True) == sorted(pool_pops, reverse=True)[:3]
    elif strategy == "S3":
        assert len(set(d)) == 3
        assert all(v > p for v in d)
    elif strategy == "S4":
        assert max(d) == max(pool_pops)
        rest = sorted(d)[:2] if sorted(d)[2] == max(pool_pops) else None
        assert rest is not None
        assert all(MID_BAND[0] < v <= MID_BAND[1] for v in rest)
    elif strategy == "S5":
        assert all(v < p for v in d)
    elif strategy == "S6":
        assert built.answer_index == 3
        assert built.options[3] == NONE_OF_THE_ABOVE
        assert built.popularity[3] == 0.0
        s1 = build(item, "S1", seed)
        assert s1 is not None
        assert list(built.options[:3]) == [
            o for i, o in enumerate(s1.options) if i != s1.answer_index
        ]


@given(pool_items(), st.sampled_from(STRATEGIES))
def test_seeded_and_independent_of_other_items(item: PoolItem, strategy: str) -> None:
    alone = build(item, strategy, 7)  # type: ignore[arg-type]
    other = PoolItem("other", "q", Candidate("g", 0.5), item.candidates)
    report = build_all([other, item], [strategy], 7, required=(), min_candidates=0)  # type: ignore[list-item]
    mine = [b for b in report.built if b.item_id == item.id and item.id != "other"]
    if alone is not None and item.id != "other":
        assert mine == [alone]


def test_gold_position_varies_with_the_seed() -> None:
    cands = tuple(Candidate(f"c{i}", i / 12) for i in range(12))
    item = PoolItem("x", "q", Candidate("gold", 0.0), cands)
    positions = {build(item, "S1", seed).answer_index for seed in range(40)}  # type: ignore[union-attr]
    assert positions == {0, 1, 2, 3}


def test_pool_dedupes_and_drops_the_gold() -> None:
    item = PoolItem(
        "x",
        "q",
        Candidate("Paris", 0.9),
        (Candidate(" paris ", 0.8), Candidate("Lyon", 0.5), Candidate("lyon", 0.4)),
    )
    assert [c.text for c in distractor_pool(item)] == ["Lyon"]


def test_item_filter_and_skip_counts() -> None:
    # gold most popular: S2, S3 impossible -> dropped under the paper's filter (S1, S2, S6)
    cands = tuple(Candidate(f"c{i}", i / 20) for i in range(12))
    top_gold = PoolItem("top", "q", Candidate("gold", 1.0), cands)
    mid_gold = PoolItem("mid", "q", Candidate("gold", 0.3), cands)
    few = PoolItem("few", "q", Candidate("gold", 0.1), cands[:3])
    report = build_all([top_gold, mid_gold, few], seed=1)
    assert [d[0] for d in report.dropped] == ["top", "few"]
    # mid: pops 0..0.55 with gold 0.3 -> S3 ok, S4 top 0.55 + mids (0.35..0.5) ok,
    # S5 below 0.3: 0..0.25 (6) ok; everything built
    assert {b.strategy for b in report.built} == set(STRATEGIES)
    assert sum(report.skipped.values()) == 0
    relaxed = build_all([top_gold], seed=1, required=())
    assert relaxed.skipped == {"S2": 1, "S3": 1}
    assert {b.strategy for b in relaxed.built} == {"S1", "S4", "S5", "S6"}
