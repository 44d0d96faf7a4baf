"""Pure pieces of the benchmarks: percentiles, GSM8K answers, majority vote, the open-loop
schedule and its target check, Best-of-N selection and baselines of the tradeoff, the reward
bursts and their figures, the group calls' requests and figures, the direct-judgment turns'
slices."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from loadtests import bench, group_calls, judge_throughput, load, rewards, tradeoff
from loadtests.harness import ROOT
from loadtests.stats import argmax_first, final_answer, majority_pick, percentile, summary
from service.scoring.bestofn import BestOfNItem, Candidate


def test_percentile_interpolates() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(values, 50) == 30.0
    assert percentile(values, 95) == pytest.approx(48.0)  # 40 + 0.8 * 10
    assert percentile(values, 100) == 50.0
    assert percentile([], 50) is None
    assert summary([]) == {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}


@pytest.mark.parametrize(
    ("solution", "answer"),
    [
        ("She makes 9 * 2 = $<<9*2=18>>18\nA: 18", "18"),
        ("so 16 - 3 = <<16-3=13>>13 eggs\nA: $1,000", "1000"),
        ("A: 2.50", "2.5"),
        ("A: -4", "-4"),
        ("no final marker, the result is 7 then 12", "12"),
        ("A: none", None),
    ],
)
def test_final_answer(solution: str, answer: str | None) -> None:
    assert final_answer(solution) == answer


def test_majority_pick() -> None:
    assert majority_pick(["3", "4", "4"]) == 1
    assert majority_pick(["3", "4"]) == 0  # tie: the answer seen first
    assert majority_pick([None, "5"]) == 1
    assert majority_pick([None, None]) == 0


def test_argmax_first() -> None:
    assert argmax_first([0.2, 0.9, 0.9]) == 1
    assert argmax_first([0.5]) == 0


def test_uniform_schedule_is_bounded() -> None:
    cfg = load.LoadConfig(rate=4, duration_s=2.5)
    assert load.schedule(cfg) == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25]
    assert len(load.schedule(load.LoadConfig(rate=4, duration_s=10, max_requests=3))) == 3
    with pytest.raises(ValueError, match="cap"):
        load.LoadConfig(rate=1000, duration_s=1000)


def test_poisson_schedule_stays_within_the_duration() -> None:
    offsets = load.schedule(load.LoadConfig(rate=50, duration_s=4, arrival="poisson", seed=1))
    assert offsets == sorted(offsets)
    assert offsets[-1] < 4
    assert 120 < len(offsets) <= 200  # mean 200 arrivals, capped at rate x duration


def test_loopback_only_unless_allowed() -> None:
    load.check_target("http://127.0.0.1:8000", allow_remote=False)
    load.check_target("http://localhost:8000", allow_remote=False)
    with pytest.raises(ValueError, match="loopback"):
        load.check_target("http://192.0.2.1:8000", allow_remote=False)
    load.check_target("http://192.0.2.1:8000", allow_remote=True)


def _item(correct: list[bool], answers: list[str]) -> BestOfNItem:
    cands = tuple(
        Candidate(f"s{i}", f"work\nA: {a}", ok)
        for i, (ok, a) in enumerate(zip(correct, answers, strict=True))
    )
    return BestOfNItem("q", "A: 1", cands)


def test_selection_and_baselines_by_n() -> None:
    items = [_item([False, True, True, False], ["2", "1", "1", "3"])]
    q = tradeoff.Question(0, items[0], (0, 1, 2, 3))  # identity order for the arithmetic
    scores = {
        (0, j): {"score": s, "total_tokens": 100 + j, "engine_calls": 1}
        for j, s in enumerate([0.9, 0.4, 0.8, 0.1])
    }
    assert tradeoff.selection([q], scores, 1) == {
        "accuracy": 0.0,
        "tokens_per_question": 100,
        "engine_calls_per_question": 1,
    }
    four = tradeoff.selection([q], scores, 4)
    assert four["accuracy"] == 0.0  # 0.9 on the wrong first candidate
    assert four["tokens_per_question"] == 100 + 101 + 102 + 103
    assert tradeoff.baselines([q], 1) == {"random": 0.0, "majority": 0.0, "oracle": 0.0}
    assert tradeoff.baselines([q], 4) == {"random": 0.5, "majority": 1.0, "oracle": 1.0}


def test_questions_shuffle_is_seeded() -> None:
    items = [_item([True, False, False, False], ["1", "2", "3", "4"])] * 8
    first = [q.order for q in tradeoff.questions(items, seed=3)]
    assert first == [q.order for q in tradeoff.questions(items, seed=3)]
    assert len(set(first)) > 1
    assert all(sorted(order) == [0, 1, 2, 3] for order in first)


def test_tradeoff_config_is_checked() -> None:
    with pytest.raises(ValueError, match="n:"):
        tradeoff.TradeoffConfig(data=Path("x"), limit=4, n=(1, 8))
    with pytest.raises(ValueError, match="budgets"):
        tradeoff.TradeoffConfig(data=Path("x"), limit=4, budgets=(0, 8))


def test_payload_files(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text('{"question": "q", "response": "r"}')
    assert load.read_payloads(one) == [{"question": "q", "response": "r"}]
    many = tmp_path / "many.json"
    many.write_text('[{"a": 1}, {"a": 2}]')
    assert load.read_payloads(many) == [{"a": 1}, {"a": 2}]
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert load.read_payloads(lines) == [{"a": 1}, {"a": 2}]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        load.read_payloads(bad)


def test_solutions_become_one_step_per_line() -> None:
    from service.scoring.splitting import heuristic_split

    solution = "She has 16 - 3 = <<16-3=13>>13 eggs\n  She sells 13 * 2 = 26\n\nA: 26"
    text = tradeoff.as_paragraphs(solution)
    assert heuristic_split(text) == [
        "She has 16 - 3 = <<16-3=13>>13 eggs",
        "She sells 13 * 2 = 26",
        "A: 26",
    ]
    assert len(heuristic_split(solution)) == 2  # the raw text: only the blank line cuts


def _render(question: str) -> str:
    return f"<|user|>{question}<|assistant|>"


def test_reward_bursts_are_grpo_shaped_and_never_repeat() -> None:
    items = [
        BestOfNItem(f"q{i}", f"work\nA: {i}", _item([True, False, True, False], "1234").candidates)
        for i in range(3)
    ]
    warm, burst = rewards.make_bursts(items, 1, 6, 2, _render, "<|end|>")
    assert warm.items == (0,)
    assert burst.items == (1,)
    assert len(burst.query) == len(burst.prompts) == len(burst.labels) == 6
    assert set(burst.prompts) == {"<|user|>q1<|assistant|>"}
    assert list(burst.query) == [
        p + c + "<|end|>" for p, c in zip(burst.prompts, burst.completions, strict=True)
    ]
    assert set(burst.labels) == {"work\nA: 1"}  # the reference solution
    assert [s.candidate for s in burst.samples] == [0, 1, 2, 3, 0, 1]
    assert [s.attempt for s in burst.samples] == [0, 0, 0, 0, 2, 2]
    assert [s.is_correct for s in burst.samples] == [True, False, True, False, True, False]
    assert burst.completions[4] == "Attempt 2:\nwork\nA: 1"
    all_queries = [q for b in rewards.make_bursts(items, 1, 6, 3, _render) for q in b.query]
    assert len(set(all_queries)) == len(all_queries) == 18
    body = burst.body("hybrid")
    assert body["verifier"] == "hybrid"
    assert body["cache"] is False
    assert body["labels"] == list(burst.labels)
    answers = rewards.make_burst(items[:1], 0, 2, _render, labels="answer")
    assert answers.labels == ("0", "0")
    with pytest.raises(ValueError, match="4 items needed for 2 bursts"):
        rewards.make_bursts(items, 2, 4, 2, _render)


def test_equal_solutions_of_one_item_become_distinct_completions() -> None:
    item = BestOfNItem("q", "A: 1", _item([True] * 4, "1111").candidates)
    burst = rewards.make_burst([item], 0, 5, _render)
    assert burst.completions == (
        "work\nA: 1",
        "Attempt 2:\nwork\nA: 1",
        "Attempt 3:\nwork\nA: 1",
        "Attempt 4:\nwork\nA: 1",
        "Attempt 5:\nwork\nA: 1",
    )
    assert [s.candidate for s in burst.samples] == [0, 1, 2, 3, 0]


def _record(rewards_: list[float], by_rule: list[float], truth: list[bool], wall: float,
            calls: int = 0) -> dict[str, object]:  # fmt: skip
    return {
        "queries": len(rewards_),
        "wall_s": wall,
        "rewards_per_s": len(rewards_) / wall,
        "client_json_s": 0.001,
        "server_s": wall / 2,
        "queue_wait_s": None,
        "server_cpu_s": None,
        "usage": {"total_tokens": 100 * calls, "engine_calls": calls},
        "rewards": rewards_,
        "decided_by_rule": by_rule,
        "is_correct": truth,
    }


def test_reward_figures() -> None:
    truth = [True, False, True, False]
    # rule: the third query undecided (reward 0, not by rule) is a miss though its label is wrong
    rule = rewards.summarize(
        "rule",
        [_record([1.0, 0.0, 0.0, 0.0], [1, 1, 0, 1], truth, 0.01),
         _record([1.0, 1.0, 1.0, 0.0], [1, 1, 1, 1], truth, 0.02)],
    )  # fmt: skip
    assert rule["queries"] == 8
    assert rule["decided_by_rule"] == 7
    assert rule["undecided"] == 1
    assert rule["decided_by_model"] == 0
    # 3 of the first (the undecided one counts as wrong), 3 of the second
    assert rule["correct"] == 6
    assert rule["accuracy"] == 6 / 8
    assert rule["accuracy_of_decided"] == 6 / 7
    assert rule["rewards_per_s"] == pytest.approx((400 + 200) / 2)
    hybrid = rewards.summarize(
        "hybrid", [_record([1.0, 0.0, 0.7, 0.2], [1, 1, 0, 0], truth, 0.02, 2)]
    )
    assert (hybrid["decided_by_rule"], hybrid["decided_by_model"], hybrid["undecided"]) == (2, 2, 0)
    assert hybrid["decided_by_rule_share"] == 0.5
    assert hybrid["accuracy"] == 1.0
    assert hybrid["engine_calls_per_reward"] == 0.5
    assert hybrid["tokens_per_reward"] == 50
    model = rewards.summarize("model", [_record([0.6] * 4, [0] * 4, truth, 1.0, 4)])
    assert model["accuracy"] == 0.5
    cmp_ = rewards.compare({"rule": rule, "hybrid": hybrid, "model": model})
    assert cmp_["hybrid_over_model_rewards_per_s"] == pytest.approx(50.0)
    assert cmp_["hybrid_minus_model_accuracy"] == 0.5
    assert [t["pass"] for t in cmp_["targets"]] == [True, False]  # rule-only 300/s < 1,000/s


def test_reward_verifiers_take_turns_going_first() -> None:
    assert rewards.orders(4) == [
        ("rule", "hybrid", "model"),
        ("hybrid", "model", "rule"),
        ("model", "rule", "hybrid"),
        ("rule", "hybrid", "model"),
    ]


# --- group calls ---------------------------------------------------------------------------------


def test_group_calls_send_one_step_four_ways() -> None:
    items = [BestOfNItem(f"q{i}", "A: 1", _item([True] * 4, "1234").candidates) for i in range(2)]
    prompts = group_calls.make_prompts(items, 5)
    assert [len(p.completions) for p in prompts] == [5, 5]
    assert len(set(prompts[0].completions)) == 5  # the fifth: the first with "Attempt 2:"
    tagged = group_calls.tagged(prompts, 1, "score")
    assert tagged[0].question == "Problem set 1.1\nq0"
    assert tagged[0].completions == prompts[0].completions
    # every mode and round its own questions: none shares another's prefix
    questions = {
        group_calls.tagged(prompts, r, m)[0].question for r in range(2) for m in group_calls.MODES
    }
    assert len(questions) == 2 * len(group_calls.MODES)

    def sent(mode: group_calls.Mode) -> list[dict[str, object]]:
        return group_calls.bodies(mode, prompts, _render, "<|end|>")

    (reward,) = sent("get_reward")
    assert reward["query"] == [
        f"<|user|>{p.question}<|assistant|>{c}<|end|>" for p in prompts for c in p.completions
    ]
    assert reward["prompts"] == [
        f"<|user|>{p.question}<|assistant|>" for p in prompts for _ in range(5)
    ]
    scores = sent("score")
    assert [(b["question"], b["responses"], b["method"]) for b in scores] == [
        (p.question, list(p.completions), "outcome") for p in prompts
    ]
    singles = sent("single")
    assert singles == sent("single_bounded")
    assert [(b["question"], b["response"]) for b in singles] == [
        (p.question, c) for p in prompts for c in p.completions
    ]
    for body in [reward, *scores, *singles]:
        assert (body["mode"], body["verifier"], body["cache"]) == ("direct", "model", False)


def test_group_calls_records_and_figures() -> None:
    usage = {"prompt_tokens": 100, "cached_tokens": 60, "total_tokens": 104, "engine_calls": 4}
    score_answer = {
        "results": [{"index": 1, "outcome": 0.2}, {"index": 0, "outcome": 0.9}],
        "usage": usage,
    }
    rec = group_calls.record("score", [score_answer, score_answer], 2.0)
    assert rec["rewards"] == [0.9, 0.2, 0.9, 0.2]  # by index, answer by answer
    assert rec["requests"] == 2
    assert rec["rewards_per_s"] == 2.0
    assert rec["usage"] == {k: 2 * v for k, v in usage.items()}
    single = group_calls.record("single", [{"score": 0.5, "usage": usage}] * 4, 4.0)
    assert single["rewards"] == [0.5] * 4
    fast = group_calls.record("score", [score_answer, score_answer], 1.0)
    s = group_calls.summarize([rec, fast, rec])
    assert s["rewards_per_s"] == 2.0  # the median
    assert s["rewards_per_s_each"] == [2.0, 4.0, 2.0]
    assert s["tokens_per_reward"] == pytest.approx(104 / 2)
    assert s["cached_tokens_per_reward"] == pytest.approx(60 / 2)
    assert s["cached_share_of_prompt"] == pytest.approx(0.6)
    assert s["engine_calls_per_reward"] == 2.0
    summaries = {
        m: {"rewards_per_s": r}
        for m, r in zip(group_calls.MODES, (8.0, 6.0, 4.0, 2.0), strict=True)
    }
    assert group_calls.compare(summaries) == {
        "get_reward_over_single": 2.0,
        "get_reward_over_single_bounded": 4.0,
        "score_over_single": 1.5,
        "score_over_single_bounded": 3.0,
    }
    assert group_calls.orders(5) == [
        ("get_reward", "score", "single", "single_bounded"),
        ("score", "single", "single_bounded", "get_reward"),
        ("single", "single_bounded", "get_reward", "score"),
        ("single_bounded", "get_reward", "score", "single"),
        ("get_reward", "score", "single", "single_bounded"),
    ]


def test_the_smoke_replaces_defaults_and_options_given_still_win() -> None:
    ap = bench.parser("example", None, runs=3, smoke={"runs": 1, "items": 2})
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=8)
    plain = ap.parse([])
    assert (plain.smoke, plain.runs, plain.items, plain.concurrency) == (False, 3, 100, 8)
    smoke = ap.parse(["--smoke"])
    assert (smoke.smoke, smoke.runs, smoke.items, smoke.concurrency) == (True, 1, 2, 8)
    given = ap.parse(["--smoke", "--items", "7"])
    assert (given.runs, given.items) == (1, 7)
    # the smoke's values do not stick to the parser
    assert (ap.parse([]).runs, ap.parse([]).items) == (3, 100)


def _smoke_overrides(path: Path) -> list[int]:
    """Lines where a benchmark assigns ``args.X`` inside ``if args.smoke``: smoke values that
    belong in its parser, where an option given explicitly still wins."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "args.smoke":
            for sub in node.body:
                for target in getattr(sub, "targets", []):
                    elts = target.elts if isinstance(target, ast.Tuple) else [target]
                    if any(ast.unparse(e).startswith("args.") for e in elts):
                        found.append(sub.lineno)
    return found


def test_smoke_values_live_in_the_parser() -> None:
    scripts = sorted((ROOT / "loadtests").rglob("*.py"))
    assert len(scripts) > 20
    assert {p.name: lines for p in scripts if (lines := _smoke_overrides(p))} == {}
    planted = "def main(args):\n    if args.smoke:\n        args.items, n = 2, 3\n"
    tmp = ROOT / "out" / "planted_smoke_override.py"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(planted, encoding="utf-8")
    try:
        assert _smoke_overrides(tmp) == [3]
    finally:
        tmp.unlink()


def test_the_batch_histogram_is_read_with_prometheus_parser() -> None:
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from loadtests.queue_latency import batch_histogram

    registry = CollectorRegistry()
    hist = Histogram("verifier_batch_size", "jobs per batch", buckets=(1, 4), registry=registry)
    for size in (1, 3, 3, 9):
        hist.observe(size)
    got = batch_histogram(generate_latest(registry).decode())
    assert got == {
        "1.0": 1.0,
        "4.0": 3.0,
        "+Inf": 4.0,
        "verifier_batch_size_sum": 16.0,
        "verifier_batch_size_count": 4.0,
    }


def test_judge_throughput_slices_keep_each_question_whole_and_cover_the_work() -> None:
    work = [(f"q{q}", f"s{s}") for q in range(10) for s in range(4)]
    slices = judge_throughput._slices(work, 4)
    assert [p for part in slices for p in part] == work  # all of it, in order, once
    assert [len(part) for part in slices] == [8, 12, 8, 12]  # 10 questions in 4 turns
    for part in slices:  # a question's solutions share its prefix: never split between turns
        assert all(sum(q == p[0] for p in part) == 4 for q, _ in part)
    assert len(judge_throughput._slices(work[:8], 4)) == 2  # no more turns than questions
