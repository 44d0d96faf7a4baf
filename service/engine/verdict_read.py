"""A vLLM logits processor that lets a reasoning judgment read its verdict in its own request.

Runs inside vLLM's engine-core process (registered by FQCN in ``VLLMEngine.start``), so it
imports only torch and vLLM's interface. A request opts in with
``SamplingParams.extra_args[VERDICT_READ_ARG]``: a :class:`ReadSpec` as a plain dict.

While the rationale is being written nothing is touched. Then, from the first of:
- the model wrote ``trigger`` (the canonical ids of "\\nVerdict:", a prefix of ``after``),
- ``budget`` tokens were written,
- greedy decoding, at least one token written, and the model's next token would be ``end``
  (EOS): today's rationale would have ended there,
the rest of ``after`` ("\\nVerdict: ") is forced token by token, then ``end``. vLLM computes
logprobs from the raw logits before any processor (``Sampler.forward``, "raw_logprobs"), so the
logprobs of the labels at the forced ``end`` position are the verdict read on exactly
prompt + rationale + after, the sequence a second request would prefill. The caller checks
that sequence on its side (``engine.judging.read_one_call``) and falls back to the second
request whenever it differs.

A session's rationale chunk (``engine.one_call_mode`` session, ``OneCall.session_args``) passes
``after`` = ``trigger``, no budget and no greedy check: only the EOS after the model's own
trigger is forced, since a session refuses stop strings; vLLM's ``max_tokens`` and the model's
own EOS end the chunk otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from service.engine.judging import VERDICT_READ_ARG

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig


@dataclass
class _Read:
    out: list[int]  # vLLM's live list of this request's output ids
    trigger: tuple[int, ...]
    after: tuple[int, ...]
    budget: int
    end: int
    greedy: bool
    forced: tuple[int, ...] | None = None  # what is forced from position ``base`` on
    base: int = 0


def _new_read(params: SamplingParams, _prompt: list[int] | None, out: list[int]) -> _Read | None:
    spec: Any = (params.extra_args or {}).get(VERDICT_READ_ARG)
    if not spec:
        return None
    return _Read(
        out=out,
        trigger=tuple(spec["trigger"]),
        after=tuple(spec["after"]),
        budget=int(spec["budget"]),
        end=int(spec["end"]),
        greedy=bool(spec["greedy"]),
    )


class VerdictReadProcessor(LogitsProcessor):
    """Forces "\\nVerdict: " then EOS after a rationale; see the module docstring."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self._reads: dict[int, _Read] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it forces tokens

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self._reads, batch_update, _new_read)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._reads:
            return logits
        # Greedy rows still writing, with no trigger or budget at this step: forcing starts
        # where EOS is their next token, checked for all of them at once below.
        check: list[tuple[int, _Read, int]] = []
        for index, read in self._reads.items():
            n = len(read.out)
            if read.forced is None and not _start(read, n):
                if read.greedy and n >= 1:  # at n == 0 the row may be a chunk of a prefill
                    check.append((index, read, n))
                continue
            _force(read, n, logits[index])
        if check:
            for index, read, n in _wants_end(logits, check):
                read.forced, read.base = (*read.after, read.end), n
                _force(read, n, logits[index])
        return logits


def _start(read: _Read, n: int) -> bool:
    """Whether forcing starts at output position ``n`` on the trigger or the budget; records
    what is forced. (The EOS check needs the logits: ``apply`` does it for all rows at once.)"""
    t = len(read.trigger)
    if n >= t and tuple(read.out[n - t :]) == read.trigger:
        read.forced = (*read.after[t:], read.end)
    elif n >= read.budget:
        read.forced = (*read.after, read.end)
    else:
        return False
    read.base = n
    return True


def _force(read: _Read, n: int, row: torch.Tensor) -> None:
    """Leave only the forced token of position ``n`` possible (nothing once all are out)."""
    assert read.forced is not None
    k = n - read.base
    if 0 <= k < len(read.forced):
        row.fill_(float("-inf"))
        row[read.forced[k]] = 0.0


def _wants_end(
    logits: torch.Tensor, check: list[tuple[int, _Read, int]]
) -> list[tuple[int, _Read, int]]:
    """The rows of ``check`` whose greedy next token is their ``end``. A row max (amax, about a
    tenth of an argmax's cost on CPU, over all rows at once) finds the rows where ``end`` ties
    the max; only those pay an argmax, which settles a tie the way greedy sampling does."""
    rows = torch.tensor([index for index, _, _ in check], device=logits.device)
    ends = torch.tensor([read.end for _, read, _ in check], device=logits.device)
    every = len(check) == logits.shape[0]  # then no copy of the logits
    top = logits.amax(dim=1)[rows] if every else logits[rows].amax(dim=1)
    hits = (logits[rows, ends] >= top).nonzero().flatten().tolist()
    return [check[i] for i in hits if int(logits[check[i][0]].argmax()) == check[i][1].end]
