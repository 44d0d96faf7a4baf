"""How every engine turns a ``JudgeCall`` into a ``JudgeResult`` from its two primitives.

Direct: read the labels at the verdict slot. Reasoning: generate the rationale, re-encode it,
append the verdict marker and read the labels there (the prompt part hits the prefix cache).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence

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
    ids = [*call.prompt_ids, *encode(tokenizer, rationale), *call.after_rationale_ids]
    logit, usage = await verdict(ids)
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
