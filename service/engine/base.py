"""The engine protocol: the only door to the model.

Small on purpose (like vLLM's EngineClient or TEI's Backend). Scoring code builds token ids and
reads numbers back; only an ``Engine`` runs the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from service.scoring.pooled import EngineKind
from service.scoring.tokenizer import Tokenizer

__all__ = [
    "Engine",
    "GenerateCall",
    "GenerateResult",
    "JudgeCall",
    "JudgeResult",
    "ModelInfo",
    "OptionCall",
    "OptionResult",
    "PoolCall",
    "PoolResult",
    "SlotLogits",
    "SpanCall",
    "SpanResult",
    "TokenUsage",
    "Tokenizer",
]


@dataclass(slots=True)
class TokenUsage:
    """Tokens one or more engine calls consumed."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_tokens: int = 0
    engine_calls: int = 0
    cached_judgments: int = 0  # answered from the judgment cache: no tokens spent

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    def add(self, other: TokenUsage) -> TokenUsage:
        self.prompt_tokens += other.prompt_tokens
        self.generated_tokens += other.generated_tokens
        self.cached_tokens += other.cached_tokens
        self.engine_calls += other.engine_calls
        self.cached_judgments += other.cached_judgments
        return self


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One judgment: optional rationale, then the label logprobs at the verdict slot.

    ``prompt_ids`` ends where the assistant turn starts. Direct mode (``reasoning_tokens == 0``)
    scores ``prompt_ids + verdict_ids``. Reasoning mode first generates up to
    ``reasoning_tokens`` tokens from ``prompt_ids`` (stopping at ``stop``), then scores
    ``prompt_ids + rationale + after_rationale_ids``.
    """

    prompt_ids: Sequence[int]
    verdict_ids: Sequence[int]
    after_rationale_ids: Sequence[int] = ()
    reasoning_tokens: int = 0
    temperature: float = 0.0
    seed: int | None = None
    stop: Sequence[str] = ()
    cache: bool = True  # may be answered from the judgment cache (greedy or seeded only)


@dataclass(slots=True)
class JudgeResult:
    """``logit`` is logp("1") - logp("0") at the verdict slot."""

    logit: float
    rationale: str | None = None
    rationale_tokens: int = 0
    rationale_finish: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True, slots=True)
class GenerateCall:
    prompt_ids: Sequence[int]
    max_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    stop: Sequence[str] = ()


@dataclass(slots=True)
class GenerateResult:
    text: str
    finish_reason: str | None  # "stop" (stop string or EOS) or "length"
    stop_reason: str | None = None  # the stop string that ended it, if any
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True, slots=True)
class OptionCall:
    """Next-token log-probabilities of K options at the end of ``prompt_ids``.

    ``option_ids[i]`` lists the single-token spellings of option i (e.g. "A" and " A"); the
    option's log-probability is the logsumexp over them, each read exactly (never from top-k).
    """

    prompt_ids: Sequence[int]
    option_ids: Sequence[Sequence[int]]


@dataclass(slots=True)
class OptionResult:
    logprobs: list[float]
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True, slots=True)
class SpanCall:
    """The mean log-probability of ``prompt_ids[start:]`` given what precedes it."""

    prompt_ids: Sequence[int]
    start: int


@dataclass(slots=True)
class SpanResult:
    mean_logprob: float
    tokens: int
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(slots=True)
class SlotLogits:
    """Label logits at verdict slots inside one prompt (single-pass process scoring)."""

    logits: list[float]
    exact_fallbacks: int = 0  # slots where a label was outside the top-k: re-scored exactly
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True, slots=True)
class PoolCall:
    """One pooling read (reward models and PRMs): ``classify`` returns one row of class
    logits for the sequence, ``token_classify`` one row per token (a PRM's engine keeps the
    rows at its step tag only). ``use_activation=False`` returns raw logits."""

    prompt_ids: Sequence[int]
    task: str
    use_activation: bool | None = False  # None: the model's default (on)


@dataclass(slots=True)
class PoolResult:
    rows: list[list[float]]
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    path: str
    max_model_len: int
    device: str
    dtype: str = "auto"
    # generative: a judge read at a verdict slot; reward / process_reward: a pooling model.
    kind: EngineKind = "generative"
    pooling_task: str | None = None  # classify or token_classify (pooling kinds only)
    step_tag: str | None = None  # process_reward: the token that ends each step
    num_labels: int | None = None  # pooling kinds: the classes the head returns
    labels: tuple[str, ...] | None = None  # pooling kinds: the config's id2label, by index


class Engine(Protocol):
    """What every backend implements. Each method may batch internally; calls are concurrent."""

    @property
    def tokenizer(self) -> Tokenizer: ...

    def model_info(self) -> ModelInfo: ...

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]: ...

    async def generate(self, calls: Sequence[GenerateCall]) -> list[GenerateResult]: ...

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> SlotLogits:
        """logp("1") - logp("0") predicted at each position in ``slots`` in one prefill."""
        ...

    async def option_logprobs(self, calls: Sequence[OptionCall]) -> list[OptionResult]: ...

    async def span_logprobs(self, calls: Sequence[SpanCall]) -> list[SpanResult]: ...

    async def pool(self, calls: Sequence[PoolCall]) -> list[PoolResult]:
        """Pooling reads; only a pooling engine answers, a generative one refuses (422)."""
        ...

    async def check_health(self) -> None: ...

    async def abort(self, request_id: str) -> None:
        """Stop one in-flight engine request; cancelling a call aborts its requests."""
        ...

    async def shutdown(self) -> None: ...
