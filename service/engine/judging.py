"""How every engine turns a ``JudgeCall`` into a ``JudgeResult`` from its two primitives.

Direct: read the labels at the verdict slot. Reasoning: generate the rationale, re-encode it,
append the verdict marker and read the labels there (the prompt part hits the prefix cache).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

from service.engine.base import GenerateCall, GenerateResult, JudgeCall, JudgeResult, TokenUsage
from service.scoring.outcome import rationale_finish
from service.scoring.tokenizer import Tokenizer, encode

Verdict = Callable[[Sequence[int]], Awaitable[tuple[float, TokenUsage]]]
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
