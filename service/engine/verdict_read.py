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
        for index, read in self._reads.items():
            n = len(read.out)
            if read.forced is None and not self._start(read, n, logits[index]):
                continue
            assert read.forced is not None
            k = n - read.base
            if 0 <= k < len(read.forced):
                row = logits[index]
                row.fill_(float("-inf"))
                row[read.forced[k]] = 0.0
        return logits

    @staticmethod
    def _start(read: _Read, n: int, row: torch.Tensor) -> bool:
        """Whether forcing starts at output position ``n``; records what is forced."""
        t = len(read.trigger)
        if n >= t and tuple(read.out[n - t :]) == read.trigger:
            read.forced = (*read.after[t:], read.end)
        elif n >= read.budget or (read.greedy and n >= 1 and int(row.argmax()) == read.end):
            # n >= 1: at n == 0 the row may be a chunk of a prefill still in progress.
            read.forced = (*read.after, read.end)
        else:
            return False
        read.base = n
        return True
