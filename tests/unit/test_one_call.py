"""A reasoning judgment in one engine request: the logits processor that forces the verdict
line (or, in a session, ends the rationale at the line the model wrote), and how each mode's
output is read back into what the two-request path would have said."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from service.engine.base import JudgeCall
from service.engine.judging import (
    OneCall,
    OneCallRead,
    one_call_spec,
    read_one_call,
    read_session,
)
from service.scoring import prompts
from service.scoring.tokenizer import encode

POS, NEG = 33, 32  # "1" and "0" in the default model's vocabulary
BUDGET = 96


@pytest.fixture(scope="module")
def spec(tokenizer: Any) -> OneCall:
    after = encode(tokenizer, prompts.AFTER_RATIONALE)
    call = JudgeCall(
        prompt_ids=[1, 2, 3],
        verdict_ids=encode(tokenizer, prompts.VERDICT_PREFIX),
        after_rationale_ids=after,
        reasoning_tokens=BUDGET,
        stop=(prompts.VERDICT_MARKER,),
    )
    found = one_call_spec(tokenizer, call, tokenizer.eos_token_id)
    assert found is not None
    return found


def test_the_trigger_is_the_verdict_line_up_to_the_marker(tokenizer: Any, spec: OneCall) -> None:
    assert tokenizer.decode(list(spec.trigger)) == "\n" + prompts.VERDICT_MARKER
    assert spec.after[: len(spec.trigger)] == spec.trigger
    assert tokenizer.decode(list(spec.after)) == prompts.AFTER_RATIONALE
    assert spec.end == tokenizer.eos_token_id


def test_no_spec_without_the_one_marker(tokenizer: Any, spec: OneCall) -> None:
    call = JudgeCall([1], [2], after_rationale_ids=spec.after, reasoning_tokens=8, stop=('"',))
    assert one_call_spec(tokenizer, call, spec.end) is None
    marker = JudgeCall([1], [2], spec.after, 8, stop=(prompts.VERDICT_MARKER,))
    assert one_call_spec(tokenizer, marker, None) is None  # no EOS to end the request with


def read(
    tokenizer: Any,
    spec: OneCall,
    ids: list[int],
    tables: dict[int, dict[int, float]],
    *,
    greedy: bool = True,
    finish: str = "stop",
    budget: int = BUDGET,
) -> OneCallRead:
    text = tokenizer.decode(ids, skip_special_tokens=True)
    last = len(ids) - 1
    table = {**tables, last: tables.get(-1, {})}
    return read_one_call(
        spec,
        tokenizer,
        ids=ids,
        text=text,
        logprobs=lambda i: table.get(i, {}),
        budget=budget,
        greedy=greedy,
        finish_reason=finish,
        labels=([POS], [NEG]),
    )


READ = {POS: -0.5, NEG: -2.0}


def test_the_model_wanted_eos_there(tokenizer: Any, spec: OneCall) -> None:
    body = encode(tokenizer, "The sum is right.")
    ids = [*body, *spec.after, spec.end]
    wanted_eos = {spec.end: -0.1, spec.after[0]: -3.0}
    got = read(tokenizer, spec, ids, {len(body): wanted_eos, -1: READ})
    assert got == OneCallRead("The sum is right.", len(body) + 1, "eos", 1.5)


def test_the_model_wrote_the_marker(tokenizer: Any, spec: OneCall) -> None:
    body = encode(tokenizer, "The sum is right.")
    ids = [*body, *spec.after, spec.end]
    wrote_newline = {spec.end: -3.0, spec.after[0]: -0.1}
    got = read(tokenizer, spec, ids, {len(body): wrote_newline, -1: READ})
    assert got == OneCallRead("The sum is right.", len(body) + len(spec.trigger), "verdict", 1.5)


def test_sampling_never_reads_eos_from_the_logprobs(tokenizer: Any, spec: OneCall) -> None:
    """When sampling, the processor never takes EOS's place: a forced line after a sampled
    newline is the model's marker even if EOS was likelier."""
    body = encode(tokenizer, "The sum is right.")
    ids = [*body, *spec.after, spec.end]
    wanted_eos = {spec.end: -0.1, spec.after[0]: -3.0}
    got = read(tokenizer, spec, ids, {len(body): wanted_eos, -1: READ}, greedy=False)
    assert got.finish == "verdict"


def test_the_budget_ran_out(tokenizer: Any, spec: OneCall) -> None:
    body = encode(tokenizer, "one two three four five six")
    ids = [*body, *spec.after, spec.end]
    got = read(tokenizer, spec, ids, {-1: READ}, budget=len(body))
    assert got == OneCallRead("one two three four five six", len(body), "length", 1.5)


def test_an_earlier_marker_spelled_otherwise_is_read_again(tokenizer: Any, spec: OneCall) -> None:
    """The model wrote "Verdict:" with other ids (no newline) and went on: the rationale stops
    there, as a stop string would have, and the verdict needs its own request."""
    body = encode(tokenizer, "Verdict: 1 since it adds up")
    ids = [*body, *spec.after, spec.end]
    got = read(tokenizer, spec, ids, {len(body): {spec.end: -0.1, spec.after[0]: -3.0}, -1: READ})
    marker_ids = encode(tokenizer, prompts.VERDICT_MARKER)
    assert got == OneCallRead("", len(marker_ids), "verdict", None)


def test_a_rationale_the_strip_changes_is_read_again(tokenizer: Any, spec: OneCall) -> None:
    """The two-request path re-encodes the stripped text: a trailing newline the model wrote
    is not in that sequence, so the forced read is not the same read."""
    body = encode(tokenizer, "All fine.\n")
    ids = [*body, *spec.after, spec.end]
    got = read(tokenizer, spec, ids, {len(body): {spec.end: -0.1, spec.after[0]: -3.0}, -1: READ})
    assert got.rationale == "All fine."
    assert got.logit is None
    assert got.finish == "eos"


def test_a_request_that_ended_on_its_own(tokenizer: Any, spec: OneCall) -> None:
    body = encode(tokenizer, "Looks correct")
    got = read(tokenizer, spec, [*body, spec.end], {})
    assert got == OneCallRead("Looks correct", len(body) + 1, "eos", None)
    ids = [*encode(tokenizer, "x Verdict: 1"), spec.end]
    assert read(tokenizer, spec, ids, {}).finish == "verdict"


# --- a session: the rationale's chunk sampled ``ids``, then the line was read ------------------


def session(tokenizer: Any, spec: OneCall, ids: list[int], budget: int = BUDGET) -> OneCallRead:
    table = {POS: -0.5, NEG: -2.0}
    return read_session(spec, tokenizer, ids=ids, read=table, budget=budget, labels=([POS], [NEG]))


def test_a_session_that_stopped_at_eos_reads_its_line(tokenizer: Any, spec: OneCall) -> None:
    body = encode(tokenizer, "The sum is right.")
    got = session(tokenizer, spec, [*body, spec.end])
    assert got == OneCallRead("The sum is right.", len(body) + 1, "eos", 1.5)
    first = session(tokenizer, spec, [spec.end])  # EOS first: the line right after the prompt
    assert first == OneCallRead("", 1, "eos", 1.5)
    # Another stop token of the model's (its generation config may name several) ends it too.
    other = session(tokenizer, spec, [*body, 7])
    assert other == OneCallRead("The sum is right.", len(body) + 1, "eos", 1.5)


def test_a_session_past_its_budget_keeps_the_budget(tokenizer: Any, spec: OneCall) -> None:
    """The chunk samples one token past the budget (never fed, never kept), EOS included."""
    body = encode(tokenizer, "one two three four five six")
    for last in (7, spec.end):
        got = session(tokenizer, spec, [*body, last], budget=len(body))
        assert got == OneCallRead("one two three four five six", len(body), "length", 1.5)


def test_a_session_where_the_model_wrote_the_marker_is_read_again(
    tokenizer: Any, spec: OneCall
) -> None:
    body = encode(tokenizer, "The sum is right.")
    got = session(tokenizer, spec, [*body, *spec.trigger, spec.end])
    assert got == OneCallRead("The sum is right.", len(body) + len(spec.trigger), "verdict", None)
    spelled = encode(tokenizer, "x Verdict: 1")
    assert session(tokenizer, spec, [*spelled, spec.end]).finish == "verdict"


def test_a_session_whose_rationale_the_strip_changes_is_read_again(
    tokenizer: Any, spec: OneCall
) -> None:
    body = encode(tokenizer, "The sum is right.  ")
    got = session(tokenizer, spec, [*body, spec.end])
    assert got.rationale == "The sum is right."
    assert got.logit is None


def test_a_session_without_the_labels_in_its_read_is_read_again(
    tokenizer: Any, spec: OneCall
) -> None:
    body = encode(tokenizer, "Looks correct")
    got = read_session(
        spec, tokenizer, ids=[*body, spec.end], read={POS: -0.5}, budget=8, labels=([POS], [NEG])
    )
    assert (got.finish, got.logit) == ("eos", None)


# --- the processor, on hand-made batches ----------------------------------------------------


def _processor() -> Any:
    from service.engine.verdict_read import VerdictReadProcessor

    return VerdictReadProcessor(None, torch.device("cpu"), False)  # type: ignore[arg-type]


def _params(spec: OneCall, budget: int, greedy: bool = True) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=budget + 8, extra_args=spec.extra_args(budget, greedy))


def _add(proc: Any, *requests: tuple[int, Any, list[int]]) -> None:
    from vllm.v1.sample.logits_processor import BatchUpdate

    added = [(i, params, [1, 2, 3], out) for i, params, out in requests]
    proc.update_state(BatchUpdate(batch_size=len(added), removed=[], added=added, moved=[]))


def _step(proc: Any, rows: int, argmax: int = 7) -> torch.Tensor:
    logits = torch.zeros(rows, 64)
    logits[:, argmax] = 5.0
    return proc.apply(logits.clone())


def _forced(row: torch.Tensor) -> int | None:
    finite = torch.isfinite(row).nonzero().flatten().tolist()
    return finite[0] if len(finite) == 1 else None


def _small(spec: OneCall) -> OneCall:
    """The spec with ids inside a 64-token toy vocabulary."""
    return OneCall(spec.marker, (10, 11, 12, 13, 14), (10, 11, 12, 13), end=2)


def test_processor_takes_eos_place_then_forces_the_line(spec: OneCall) -> None:
    toy = _small(spec)
    proc = _processor()
    out: list[int] = [5, 6]
    other: list[int] = [5]
    from vllm import SamplingParams

    _add(proc, (0, _params(toy, 10), out), (1, SamplingParams(max_tokens=4), other))
    assert _forced(_step(proc, 2)[0]) is None  # the model's own choice stands
    forced = []
    for _ in range(len(toy.after) + 1):
        logits = _step(proc, 2, argmax=toy.end)  # the model wants EOS (and goes on wanting it)
        assert _forced(logits[1]) is None  # the other request is never touched
        forced.append(_forced(logits[0]))
        out.append(forced[-1] or -1)
    assert forced == [*toy.after, toy.end]


def test_processor_finishes_a_line_the_model_started(spec: OneCall) -> None:
    toy = _small(spec)
    proc = _processor()
    out = [5, *toy.trigger]
    _add(proc, (0, _params(toy, 10), out))
    first = _forced(_step(proc, 1)[0])
    out.append(first or -1)
    second = _forced(_step(proc, 1)[0])
    assert [first, second] == [*toy.after[len(toy.trigger) :], toy.end]


def test_processor_forces_the_line_at_the_budget(spec: OneCall) -> None:
    toy = _small(spec)
    proc = _processor()
    out = [5, 6, 7]
    _add(proc, (0, _params(toy, 3, greedy=False), out))
    assert _forced(_step(proc, 1)[0]) == toy.after[0]


def test_processor_ignores_eos_when_sampling_and_at_the_first_token(spec: OneCall) -> None:
    toy = _small(spec)
    proc = _processor()
    sampled: list[int] = [5]
    first: list[int] = []
    _add(proc, (0, _params(toy, 10, greedy=False), sampled), (1, _params(toy, 10), first))
    logits = _step(proc, 2, argmax=toy.end)
    assert _forced(logits[0]) is None
    assert _forced(logits[1]) is None


def _rows(*argmaxes: int) -> torch.Tensor:
    logits = torch.zeros(len(argmaxes), 64)
    for i, top in enumerate(argmaxes):
        logits[i, top] = 5.0
    return logits


def test_processor_reads_each_rows_own_argmax_in_one_batch(spec: OneCall) -> None:
    """The EOS check is one row max over the rows; each row is forced by its own, whatever
    order the requests were added in and whether or not every row is tracked."""
    toy = _small(spec)
    every = _processor()  # all three rows tracked, added out of row order
    _add(every, (2, _params(toy, 10), [5]), (0, _params(toy, 10), [5]), (1, _params(toy, 10), [5]))
    logits = every.apply(_rows(toy.end, 7, toy.end))
    assert [_forced(logits[i]) for i in range(3)] == [toy.after[0], None, toy.after[0]]
    some = _processor()  # row 1 is another request: it wants EOS and is left alone
    _add(some, (2, _params(toy, 10), [5]), (0, _params(toy, 10), [5]))
    logits = some.apply(_rows(7, toy.end, toy.end))
    assert [_forced(logits[i]) for i in range(3)] == [None, None, toy.after[0]]
    assert logits[1, toy.end] == 5.0


def test_processor_settles_a_tie_with_eos_as_greedy_sampling_does(spec: OneCall) -> None:
    """Greedy sampling takes the first of tied maxima: EOS tied with an earlier id is not the
    model's next token, tied with a later one it is."""
    toy = _small(spec)
    proc = _processor()
    _add(proc, (0, _params(toy, 10), [5]), (1, _params(toy, 10), [5]))
    logits = torch.zeros(2, 64)
    logits[:, toy.end] = 5.0
    logits[0, toy.end - 1] = 5.0
    logits[1, toy.end + 5] = 5.0
    logits = proc.apply(logits)
    assert [_forced(logits[0]), _forced(logits[1])] == [None, toy.after[0]]


def test_processor_ends_a_session_chunk_at_the_trigger_and_nowhere_else(spec: OneCall) -> None:
    """A session's rationale chunk: EOS right after the model's own trigger; the budget and the
    model's wish for EOS are vLLM's business there, so nothing is forced for them."""
    from vllm import SamplingParams

    toy = _small(spec)
    proc = _processor()
    wrote = [5, *toy.trigger]
    wants_eos = [5, 6]
    long = [5] * 40
    params = SamplingParams(max_tokens=12, extra_args=toy.session_args())
    _add(proc, (0, params, wrote), (1, params, wants_eos), (2, params, long))
    logits = _step(proc, 3, argmax=toy.end)
    assert [_forced(logits[i]) for i in range(3)] == [toy.end, None, None]
