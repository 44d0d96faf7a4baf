"""A reasoning judgment in one vLLM request (``engine.one_call_reasoning``), in either mode of
``engine.one_call_mode``: a streaming-input session whose second chunk is the verdict line, or
one request whose line a logits processor forces (``engine.verdict_read``). ``engine.judging``
reads each back into what two requests would say; whatever it cannot vouch for is read again
with a second request, so scores never depend on the path."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from service.engine.base import JudgeCall, JudgeResult, TokenUsage
from service.engine.judging import (
    OneCall,
    OneCallRead,
    Verdict,
    read_one_call,
    read_session,
    verdict_read_ids,
)
from service.errors import EngineFailure, EngineUnavailable
from service.ops import spend
from service.scoring.tokenizer import Tokenizer

if TYPE_CHECKING:
    from vllm import RequestOutput, SamplingParams

Labels = tuple[Sequence[int], Sequence[int]]  # the ids of "1" and of "0"
Abort = Callable[[str], Awaitable[None]]


async def judge_in_session(
    llm: Any,
    lora: Any,
    tokenizer: Tokenizer,
    call: JudgeCall,
    spec: OneCall,
    labels: Labels,
    verdict: Verdict,
    abort: Abort,
) -> JudgeResult:
    """Rationale and verdict in one vLLM streaming-input session: the verdict line is its
    second chunk, queued with the first, so the engine prefills it in the step after the
    rationale stops, with the rationale's KV kept (engine.judging.read_session)."""
    from vllm.engine.protocol import StreamingInput
    from vllm.inputs.engine import tokens_input

    rationale = _streamed(
        labels,
        max_tokens=call.reasoning_tokens + 1,  # the last sampled token is never kept
        temperature=call.temperature,
        seed=call.seed,
        extra_args=spec.session_args(),
    )
    line = _streamed(labels, max_tokens=1, temperature=0.0)

    async def chunks() -> AsyncIterator[Any]:
        # Copies: vLLM extends a session's prompt list in place.
        yield StreamingInput(tokens_input(list(call.prompt_ids)), rationale)
        yield StreamingInput(tokens_input(list(spec.after)), line)

    request_id = uuid.uuid4().hex
    ids: list[int] = []
    entries: list[dict[int, float]] = []
    cached = 0
    try:
        async for out in vllm_outputs(
            llm, llm.generate(chunks(), rationale, request_id, lora_request=lora)
        ):
            cached = max(cached, int(out.num_cached_tokens or 0))
            for o in out.outputs:
                ids.extend(o.token_ids)
                entries.extend(_entries(o.logprobs))
    except asyncio.CancelledError:
        # The job was cancelled (its caller left): free the engine now; a session streams,
        # so what it generated so far is known.
        spend.record(len(call.prompt_ids), len(ids))
        await abort(request_id)
        raise
    sent = len(call.prompt_ids) + len(spec.after)
    spend.record(sent, len(ids))
    if len(ids) < 2 or len(entries) != len(ids):
        raise EngineFailure("engine returned an incomplete session")
    read = read_session(
        spec,
        tokenizer,
        ids=ids[:-1],  # the last is the verdict chunk's one token
        read=entries[-1],
        budget=call.reasoning_tokens,
        labels=labels,
    )
    usage = TokenUsage(
        prompt_tokens=sent, generated_tokens=len(ids), cached_tokens=cached, engine_calls=1
    )
    return await _judged(call, tokenizer, read, usage, verdict)


def forced_params(call: JudgeCall, spec: OneCall, labels: Labels) -> SamplingParams:
    """One request whose verdict line the processor forces after the rationale."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        max_tokens=call.reasoning_tokens + len(spec.after) + 1,
        temperature=call.temperature,
        seed=call.seed,
        logprob_token_ids=spec.read_ids(*labels),
        extra_args=spec.extra_args(call.reasoning_tokens, call.temperature == 0),
        output_kind=RequestOutputKind.FINAL_ONLY,
        flat_logprobs=True,
    )


async def judge_forced(
    out: RequestOutput,
    usage: TokenUsage,
    tokenizer: Tokenizer,
    call: JudgeCall,
    spec: OneCall,
    labels: Labels,
    verdict: Verdict,
) -> JudgeResult:
    """The judgment from the output (and ``usage``) of a ``forced_params`` request
    (engine.judging.read_one_call)."""
    first = out.outputs[0]
    table = first.logprobs or []

    def logprobs_at(i: int) -> dict[int, float]:
        entry = table[i]
        return {k: lp.logprob for k, lp in entry.items()} if entry else {}

    read = read_one_call(
        spec,
        tokenizer,
        ids=first.token_ids,
        text=first.text,
        logprobs=logprobs_at,
        budget=call.reasoning_tokens,
        greedy=call.temperature == 0,
        finish_reason=first.finish_reason,
        labels=labels,
    )
    return await _judged(call, tokenizer, read, usage, verdict)


async def _judged(
    call: JudgeCall, tokenizer: Tokenizer, read: OneCallRead, usage: TokenUsage, verdict: Verdict
) -> JudgeResult:
    # Counted as the two-request path counts: the rationale (its marker or EOS) and the read's
    # one token are generated; the verdict line was fed in, like a prompt.
    generated = read.rationale_tokens + (read.logit is not None)
    usage.prompt_tokens += usage.generated_tokens - generated
    usage.generated_tokens = generated
    logit = read.logit
    if logit is None:  # the sequence differs from the two-request one: read it as they do
        logit, extra = await verdict(verdict_read_ids(call, tokenizer, read.rationale))
        usage.add(extra)
    return JudgeResult(
        logit=logit,
        rationale=read.rationale,
        rationale_tokens=read.rationale_tokens,
        rationale_finish=read.finish,
        usage=usage,
    )


def _streamed(labels: Labels, **sampling: Any) -> SamplingParams:
    """A session chunk's sampling: streamed (a session refuses FINAL_ONLY), no text (the
    rationale is decoded once at the end), the labels' logprobs at every sampled token (vLLM
    sets a session's logprobs up from its first chunk)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        **sampling,
        logprob_token_ids=[*labels[0], *labels[1]],
        output_kind=RequestOutputKind.DELTA,
        detokenize=False,
        flat_logprobs=True,
    )


async def vllm_outputs(llm: Any, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """Every output of one vLLM request stream (generate or encode); vLLM's own error tree
    becomes ours: the engine-core process gone is ``EngineUnavailable``."""
    try:
        async for out in stream:
            yield out
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # vLLM raises its own tree; callers see one error type
        if getattr(llm, "errored", False):  # the engine-core process is gone
            raise EngineUnavailable(f"the engine died: {exc}; retry") from exc
        raise EngineFailure(f"engine call failed: {exc}") from exc


def _entries(logprobs: Any) -> list[dict[int, float]]:
    """One {token id: logprob} per sampled token, from vLLM's flat logprobs (``_streamed``
    asks for them flat)."""
    if logprobs is None:
        return []
    starts, ends = logprobs.start_indices, logprobs.end_indices
    tokens, values = logprobs.token_ids, logprobs.logprobs
    return [
        dict(zip(tokens[a:b], values[a:b], strict=True)) for a, b in zip(starts, ends, strict=True)
    ]
