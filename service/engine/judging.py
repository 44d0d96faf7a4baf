"""How every engine turns a ``JudgeCall`` into a ``JudgeResult`` from its two primitives.

Direct: read the labels at the verdict slot. Reasoning: generate the rationale, re-encode it,
append the verdict marker and read the labels there (the prompt part hits the prefix cache).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from service.engine.base import (
    GenerateCall,
    GenerateResult,
    JudgeCall,
    JudgeResult,
    SlotLogits,
    TokenUsage,
)
from service.scoring.outcome import rationale_finish
from service.scoring.tokenizer import Tokenizer, encode

Verdict = Callable[[Sequence[int]], Awaitable[tuple[float, TokenUsage]]]
# Prompt logprobs kept per position (the engine's max_logprobs); a forced token comes on top.
PROMPT_TOPK = 20
Generate = Callable[[GenerateCall], Awaitable[GenerateResult]]
VERDICT_READ_ARG = "verdict_read"  # the SamplingParams.extra_args key engine.verdict_read reads


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def rationale_call(call: JudgeCall) -> GenerateCall:
    return GenerateCall(
        prompt_ids=call.prompt_ids,
        max_tokens=call.reasoning_tokens,
        temperature=call.temperature,
        seed=call.seed,
        stop=call.stop,
    )


def verdict_read_ids(call: JudgeCall, tokenizer: Tokenizer, rationale: str) -> list[int]:
    """What a second request prefills to read the verdict after ``rationale``."""
    return [*call.prompt_ids, *encode(tokenizer, rationale), *call.after_rationale_ids]


async def judge_one(
    call: JudgeCall, tokenizer: Tokenizer, verdict: Verdict, generate: Generate
) -> JudgeResult:
    """One judgment: ``verdict(ids)`` reads logp("1") - logp("0") at the end of ``ids``."""
    if call.reasoning_tokens <= 0:
        logit, usage = await verdict([*call.prompt_ids, *call.verdict_ids])
        return JudgeResult(logit=logit, usage=usage)
    gen = await generate(rationale_call(call))
    rationale = gen.text.rstrip()
    # Re-encoding the text (not reusing generated ids) drops EOS and partial stop strings;
    # the prompt part still hits the prefix cache.
    logit, usage = await verdict(verdict_read_ids(call, tokenizer, rationale))
    return JudgeResult(
        logit=logit,
        rationale=rationale,
        rationale_tokens=gen.usage.generated_tokens,
        rationale_finish=rationale_finish(gen.finish_reason, gen.stop_reason),
        usage=gen.usage.add(usage),
    )


def pair_logit(
    entry: Mapping[int, float] | None, pos_ids: Sequence[int], neg_ids: Sequence[int]
) -> float | None:
    """logp("1") - logp("0") from one position's top-k table; None if any variant is missing
    (a missing variant would bias the logsumexp)."""
    if not entry:
        return None
    pos = [entry[i] for i in pos_ids if i in entry]
    neg = [entry[i] for i in neg_ids if i in entry]
    if len(pos) < len(pos_ids) or len(neg) < len(neg_ids):
        return None
    return logsumexp(pos) - logsumexp(neg)


async def fill_slots(
    logits: list[float | None],
    slots: Sequence[int],
    prompt_ids: Sequence[int],
    verdict: Verdict,
    usage: TokenUsage,
) -> SlotLogits:
    """Slots whose labels were outside the top-k are re-scored exactly with ``verdict``."""
    missing = [i for i, v in enumerate(logits) if v is None]
    exact = await asyncio.gather(*(verdict(prompt_ids[: slots[i]]) for i in missing))
    for i, (value, extra) in zip(missing, exact, strict=True):
        logits[i] = value
        usage.add(extra)
    return SlotLogits(
        logits=[float(v) for v in logits if v is not None],
        exact_fallbacks=len(missing),
        usage=usage,
    )


# --- one request per reasoning judgment (engine.verdict_read) --------------------------------


@dataclass(frozen=True, slots=True)
class OneCall:
    """How a reasoning judgment reads its verdict inside its rationale's request.

    ``trigger`` is the shortest prefix of ``after`` (the ids of "\\nVerdict: ") whose text holds
    ``marker``: when the model writes exactly it, only the rest of ``after`` is forced.
    """

    marker: str
    after: tuple[int, ...]
    trigger: tuple[int, ...]
    end: int  # EOS: forced last, so vLLM ends the request right after the read

    def extra_args(self, budget: int, greedy: bool) -> dict[str, object]:
        spec = {
            "trigger": list(self.trigger),
            "after": list(self.after),
            "budget": budget,
            "end": self.end,
            "greedy": greedy,
        }
        return {VERDICT_READ_ARG: spec}

    def session_args(self) -> dict[str, object]:
        """A session's rationale chunk: end it (EOS) right after the model writes the trigger,
        force nothing else; vLLM's ``max_tokens`` is its budget and EOS ends it on its own."""
        spec = {
            "trigger": list(self.trigger),
            "after": list(self.trigger),  # nothing of the line left to force: only ``end``
            "budget": 1 << 30,
            "end": self.end,
            "greedy": False,  # no EOS check: the chunk stops at EOS by itself
        }
        return {VERDICT_READ_ARG: spec}

    def read_ids(self, pos_ids: Sequence[int], neg_ids: Sequence[int]) -> list[int]:
        """Ids whose logprobs every position returns: the labels, EOS and the newline the
        forced line starts with (together they tell who ended the rationale)."""
        return list(dict.fromkeys([*pos_ids, *neg_ids, self.end, self.after[0]]))


def one_call_spec(tokenizer: Tokenizer, call: JudgeCall, end: int | None) -> OneCall | None:
    """The spec for ``call``, or None when only two requests can judge it (another stop
    string than the one marker, no EOS, or a marker the verdict line does not spell)."""
    if end is None or len(call.stop) != 1 or not call.after_rationale_ids:
        return None
    marker, after = call.stop[0], tuple(call.after_rationale_ids)
    for j in range(1, len(after) + 1):
        if marker in tokenizer.decode(list(after[:j])):
            return OneCall(marker=marker, after=after, trigger=after[:j], end=end)
    return None


@dataclass(slots=True)
class OneCallRead:
    rationale: str
    rationale_tokens: int  # as the two-request path counts them (marker or EOS included)
    finish: str  # "verdict" | "eos" | "length", as rationale_finish
    logit: float | None  # None: the sequence differs from the two-request one; read it again


def _marker_end(tokenizer: Tokenizer, ids: Sequence[int], marker: str) -> int:
    """The fewest leading tokens whose text holds ``marker`` (where a stop string stops)."""
    lo, hi = 1, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if marker in tokenizer.decode(list(ids[:mid]), skip_special_tokens=True):
            hi = mid
        else:
            lo = mid + 1
    return lo


def read_one_call(
    spec: OneCall,
    tokenizer: Tokenizer,
    *,
    ids: Sequence[int],
    text: str,
    logprobs: Callable[[int], Mapping[int, float]],
    budget: int,
    greedy: bool,
    finish_reason: str | None,
    labels: tuple[Sequence[int], Sequence[int]],
) -> OneCallRead:
    """What the two-request path would have said, from one request's output.

    The rationale is the text before the first marker (where a stop string would have cut),
    stripped. The read at the last position is used only when the request ended with the forced
    line and its ids are exactly ``encode(rationale) + after``: the sequence the second request
    would prefill. Who ended the rationale: the budget if ``budget`` tokens precede the line;
    else, in greedy decoding, EOS if the model preferred EOS to the line's first token there
    (the processor took EOS's place); else the model wrote the marker.
    """
    cut = text.find(spec.marker)
    rationale = (text[:cut] if cut >= 0 else text).rstrip()
    a = len(spec.after)
    forced = len(ids) > a and ids[-1] == spec.end and tuple(ids[-1 - a : -1]) == spec.after
    marker_at = _marker_end(tokenizer, ids, spec.marker) if cut >= 0 else None
    if not forced:  # ended on its own: EOS when sampling, or EOS as the first token
        if marker_at is not None:
            return OneCallRead(rationale, marker_at, "verdict", None)
        finish = "length" if finish_reason == "length" else "eos"
        return OneCallRead(rationale, len(ids), finish, None)
    body = len(ids) - 1 - a
    earlier = marker_at is not None and marker_at < body + len(spec.trigger)
    if earlier:
        finish, tokens = "verdict", marker_at or 0  # an earlier marker, spelled otherwise
    elif body >= budget:
        finish, tokens = "length", budget
    elif greedy and _wanted_end(logprobs(body), spec):
        finish, tokens = "eos", body + 1
    else:
        finish, tokens = "verdict", body + len(spec.trigger)
    logit = None
    if not earlier and list(ids[:body]) == encode(tokenizer, rationale):
        logit = pair_logit(logprobs(len(ids) - 1), *labels)
    return OneCallRead(rationale, tokens, finish, logit)


def _wanted_end(entry: Mapping[int, float], spec: OneCall) -> bool:
    end, first = entry.get(spec.end), entry.get(spec.after[0])
    return end is not None and first is not None and end > first


def read_session(
    spec: OneCall,
    tokenizer: Tokenizer,
    *,
    ids: Sequence[int],
    read: Mapping[int, float],
    budget: int,
    labels: tuple[Sequence[int], Sequence[int]],
) -> OneCallRead:
    """What the two-request path would have said, from a session of two chunks: the rationale
    (``max_tokens`` = ``budget`` + 1) sampled ``ids``, then "\\nVerdict: " was read (``read``).

    vLLM keeps all of ``ids`` but the last in the session's context (the last was sampled, never
    fed: EOS, the token past the budget, or the EOS forced after the trigger), so the verdict
    was read on prompt + ``ids[:-1]`` + after. That read is used only when ``ids[:-1]`` is
    exactly ``encode(rationale)`` and holds no marker: the sequence a second request prefills.
    """
    kept = list(ids[:-1])
    text = tokenizer.decode(kept, skip_special_tokens=True)
    cut = text.find(spec.marker)
    if cut >= 0:  # the model wrote the marker: a stop string would have cut there
        return OneCallRead(
            text[:cut].rstrip(), _marker_end(tokenizer, kept, spec.marker), "verdict", None
        )
    rationale = text.rstrip()
    # Short of the budget, the chunk stopped at a stop token of the model's (EOS, or another
    # its generation config names): the context's end is ruled out before the request.
    finish, tokens = ("length", budget) if len(kept) >= budget else ("eos", len(ids))
    logit = pair_logit(read, *labels) if kept == encode(tokenizer, rationale) else None
    return OneCallRead(rationale, tokens, finish, logit)
