"""A deterministic in-memory ``Engine`` for unit tests of the serving layer.

It honours the contract of :mod:`service.engine.base` with the real tokenizer (prompts are
rendered and counted as in production) and scripted numbers instead of a model:

- every label read (direct verdict, the verdict after a rationale, a single-pass slot) returns
  ``verdicts(text)``, ``text`` being the decoded prompt up to that slot;
- generation returns ``write(prompt_text)``, cut at the first stop string (``finish_reason``
  "stop", ``stop_reason`` the string) or at ``max_tokens`` tokens ("length"), else "stop" with
  no stop string (EOS);
- judgments go through :func:`service.engine.judging.judge_one` and single-pass slots through
  :func:`~service.engine.judging.fill_slots`, the code both real engines use, so rationale
  handling, re-encoding and the exact re-scoring of slots missing from the top-k are the
  production ones (``missing_slots`` says which slot indexes the "top-k" lacks);
- usage is counted like vLLM counts it: prompt tokens of every call, generated tokens, one
  engine call per request, no prefix cache (``cached_tokens`` 0).

Every request is recorded in ``requests`` as ``(kind, prompt_ids)``; ``fail`` makes every
method raise it.

`CountingEngine` is smaller: it scores a call from its prompt ids alone, for the judgment
cache's tests (unit, and integration against Redis).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from service.engine import base
from service.engine.base import JudgeCall, JudgeResult, ModelInfo, TokenUsage
from service.engine.judging import fill_slots, judge_one
from service.errors import NotServedByModel
from service.scoring.tokenizer import Tokenizer, encode

TextScore = Callable[[str], float]


def by_last_marker(table: Mapping[str, float], default: float = 0.0) -> TextScore:
    """The value of the ``table`` key that occurs last in the text (``default`` if none).

    A process prompt for step k holds steps 1..k, and its single-pass slot k follows step k,
    so keying steps by their text gives each step its own logit.
    """

    def score(text: str) -> float:
        # Ties (a key that starts where another does) go to the longer key.
        found = [(text.rfind(k), len(k), v) for k, v in table.items() if k in text]
        return max(found)[2] if found else default

    return score


def descending_letters(text: str, k: int) -> list[float]:
    """Default option reads: letter i gets logprob -(i + 1) (A is always the favourite)."""
    return [-float(i + 1) for i in range(k)]


@dataclass
class FakeEngine:
    """An ``Engine`` whose numbers come from the functions given (see the module docstring)."""

    tokenizer: Tokenizer
    verdicts: TextScore = lambda text: 0.0
    write: Callable[[str], str] = lambda prompt: ""
    options: Callable[[str, int], list[float]] = descending_letters
    spans: TextScore = lambda text: -1.0
    missing_slots: AbstractSet[int] = frozenset()
    fail: Exception | None = None
    name: str = "fake-model"
    # "reward": a sequence RM on the pooling runner; its one logit comes from ``verdicts``.
    kind: str = "generative"
    requests: list[tuple[str, list[int]]] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))  # type: ignore[attr-defined]

    def model_info(self) -> base.ModelInfo:
        pooling = self.kind != "generative"
        return base.ModelInfo(
            name=self.name,
            path="/fake",
            max_model_len=8192,
            device="cpu",
            kind=self.kind,
            pooling_task="classify" if pooling else None,
            num_labels=1 if pooling else None,
            labels=("LABEL_0",) if pooling else None,
        )

    def _record(self, kind: str, ids: Sequence[int]) -> None:
        if self.fail is not None:
            raise self.fail
        if self.kind != "generative" and kind != "pool":  # as the pooling engine refuses
            raise NotServedByModel(f"{kind} needs a generative judge; the fake is a pooling model")
        self.requests.append((kind, list(ids)))

    async def _verdict(self, ids: Sequence[int]) -> tuple[float, base.TokenUsage]:
        self._record("verdict", ids)
        usage = base.TokenUsage(prompt_tokens=len(ids), generated_tokens=1, engine_calls=1)
        return self.verdicts(self.decode(ids)), usage

    async def _generate_one(self, call: base.GenerateCall) -> base.GenerateResult:
        self._record("generate", call.prompt_ids)
        text = self.write(self.decode(call.prompt_ids))
        finish, stop_reason = "stop", None
        cuts = [(text.find(s), s) for s in call.stop if s in text]
        if cuts:
            at, stop_reason = min(cuts)
            text = text[:at]
        ids = encode(self.tokenizer, text)
        if len(ids) > call.max_tokens:
            ids, finish, stop_reason = ids[: call.max_tokens], "length", None
            text = self.decode(ids)
        usage = base.TokenUsage(
            prompt_tokens=len(call.prompt_ids), generated_tokens=len(ids), engine_calls=1
        )
        return base.GenerateResult(
            text=text, finish_reason=finish, stop_reason=stop_reason, usage=usage
        )

    async def judge(self, calls: Sequence[base.JudgeCall]) -> list[base.JudgeResult]:
        return [
            await judge_one(c, self.tokenizer, self._verdict, self._generate_one) for c in calls
        ]

    async def generate(self, calls: Sequence[base.GenerateCall]) -> list[base.GenerateResult]:
        return [await self._generate_one(c) for c in calls]

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> base.SlotLogits:
        self._record("slots", prompt_ids)
        usage = base.TokenUsage(prompt_tokens=len(prompt_ids), generated_tokens=1, engine_calls=1)
        logits: list[float | None] = [
            None if i in self.missing_slots else self.verdicts(self.decode(prompt_ids[:slot]))
            for i, slot in enumerate(slots)
        ]
        return await fill_slots(logits, slots, prompt_ids, self._verdict, usage)

    async def option_logprobs(self, calls: Sequence[base.OptionCall]) -> list[base.OptionResult]:
        out = []
        for call in calls:
            self._record("options", call.prompt_ids)
            logprobs = self.options(self.decode(call.prompt_ids), len(call.option_ids))
            usage = base.TokenUsage(
                prompt_tokens=len(call.prompt_ids), generated_tokens=1, engine_calls=1
            )
            out.append(base.OptionResult(logprobs=logprobs, usage=usage))
        return out

    async def span_logprobs(self, calls: Sequence[base.SpanCall]) -> list[base.SpanResult]:
        out = []
        for call in calls:
            self._record("span", call.prompt_ids)
            mean = self.spans(self.decode(call.prompt_ids[call.start :]))
            tokens = len(call.prompt_ids) - call.start
            usage = base.TokenUsage(
                prompt_tokens=len(call.prompt_ids), generated_tokens=1, engine_calls=1
            )
            out.append(base.SpanResult(mean_logprob=mean, tokens=tokens, usage=usage))
        return out

    async def pool(self, calls: Sequence[base.PoolCall]) -> list[base.PoolResult]:
        if self.kind == "generative":
            raise NotServedByModel("the fake engine is generative")
        out = []
        for call in calls:
            self._record("pool", call.prompt_ids)
            text = self.tokenizer.decode(list(call.prompt_ids))  # type: ignore[attr-defined]
            usage = base.TokenUsage(prompt_tokens=len(call.prompt_ids), engine_calls=1)
            out.append(base.PoolResult(rows=[[self.verdicts(text)]], usage=usage))
        return out

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def check_health(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def shutdown(self) -> None:
        """Nothing to release."""

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.requests]


def sigmoid(x: float) -> float:
    """Written out here, not imported: the tests compare the service's scores with it."""
    return 1.0 / (1.0 + math.exp(-x))


# --- a counting engine: numbers from the prompt ids alone (the judgment cache's tests) ---

INFO = ModelInfo(name="m", path="/m", max_model_len=4096, device="cpu", dtype="float32")


class CountingEngine:
    """Scores a call as sum(prompt_ids)/7 (+ a draw when sampled); counts what it scored."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.scored: list[JudgeCall] = []
        self.delay = delay
        self.fail = fail
        self.draws = 0

    def model_info(self) -> ModelInfo:
        return INFO

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("engine down")
        self.scored.extend(calls)
        out = []
        for c in calls:
            self.draws += 1
            noise = self.draws * 1e-3 if c.temperature > 0 else 0.0
            usage = TokenUsage(prompt_tokens=len(c.prompt_ids), generated_tokens=1, engine_calls=1)
            out.append(JudgeResult(logit=sum(c.prompt_ids) / 7 + noise, usage=usage))
        return out


def call(*ids: int, **kw: Any) -> JudgeCall:
    return JudgeCall(prompt_ids=list(ids), verdict_ids=[9], **kw)
