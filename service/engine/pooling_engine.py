"""Trained reward models and PRMs on vLLM's pooling runner (same code on CPU and GPU builds).

A pooling model returns class logits, never tokens: every call that needs generation or
next-token log-probabilities is refused with ``NotServedByModel`` (422), which names the kind.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any, NoReturn

from service.config import Settings
from service.engine.base import (
    GenerateCall,
    GenerateResult,
    JudgeCall,
    JudgeResult,
    ModelInfo,
    OptionCall,
    OptionResult,
    PoolCall,
    PoolResult,
    SlotLogits,
    SpanCall,
    SpanResult,
    TokenUsage,
)
from service.engine.device import detect_device, resolve_dtype
from service.engine.reaper import start_reaper
from service.engine.vllm_engine import (
    CPU_BLOCK_SIZE,
    check_vllm_health,
    configure_vllm_env,
    engine_dtype,
    run_vllm_call,
    shutdown_vllm,
)
from service.errors import NotServedByModel
from service.ops import spend
from service.scoring.pooled import EngineKind, PoolingTask, step_tag_of, task_of
from service.scoring.tokenizer import Tokenizer, encode

logger = logging.getLogger(__name__)


def pooling_spec(
    settings: Settings, kind: EngineKind, architectures: Sequence[str]
) -> tuple[PoolingTask, str | None]:
    """The pooling task and, for a PRM, its step tag (settings first, then the architecture's)."""
    task = task_of(kind, architectures)
    tag = step_tag_of(architectures, settings.engine.step_tag) if kind == "process_reward" else None
    if kind == "process_reward" and tag is None:
        raise ValueError(
            f"no step tag known for {list(architectures)}: set VERIFIER_ENGINE__STEP_TAG to the "
            "token the PRM reads after each step"
        )
    return task, tag


def pooler_kwargs(
    settings: Settings, kind: EngineKind, task: PoolingTask, tag_id: int | None
) -> dict[str, Any]:
    """vLLM's ``PoolerConfig`` for the served kind: the task, and for a PRM the step tag's id
    and the head columns kept (``engine.returned_token_ids``), the defaults of every request."""
    kept = settings.engine.returned_token_ids
    if kept is not None and kind != "process_reward":
        raise ValueError(
            "VERIFIER_ENGINE__RETURNED_TOKEN_IDS applies to process reward models (STEP "
            f"pooling) only; the served kind is {kind}"
        )
    return {"task": task, "step_tag_id": tag_id, "returned_token_ids": kept}


def _tag_id(model: str, tag: str | None) -> int | None:
    """The step tag's id, set as the pooler's default (vLLM otherwise defaults a
    Qwen2ForProcessRewardModel to Qwen's own id, which another vocabulary may not hold)."""
    if tag is None:
        return None
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(model)
    ids = encode(tokenizer, tag)
    if len(ids) != 1:
        raise ValueError(f"step tag {tag!r} is {len(ids)} tokens for {model}'s tokenizer, not 1")
    return ids[0]


class PoolingEngine:
    """``Engine`` over vLLM's pooling runner: ``pool`` reads class logits; nothing generates."""

    def __init__(self, llm: Any, tokenizer: Tokenizer, info: ModelInfo) -> None:
        self._llm = llm
        self._tokenizer = tokenizer
        self._info = info

    @classmethod
    def start(
        cls, settings: Settings, model: str, kind: EngineKind, architectures: Sequence[str]
    ) -> PoolingEngine:
        """Build the pooling engine (blocking). The PRM's step tag is set as the pooler's
        ``step_tag_id`` so a token_classify read returns the rows at the tags only."""
        device = detect_device()
        configure_vllm_env(settings, device)
        start_reaper()
        from vllm import AsyncEngineArgs, AsyncLLMEngine
        from vllm.config import PoolerConfig

        cfg = settings.engine
        if cfg.lora_adapters:
            raise ValueError(
                f"engine.lora_adapters: this model is a {kind} model; adapters are served for "
                "generative judges only"
            )
        task, tag = pooling_spec(settings, kind, architectures)
        dtype = resolve_dtype(cfg.dtype, device)
        args = AsyncEngineArgs(
            model=model,
            tokenizer=model,
            # vLLM's metrics carry it as model_name: the name our own metrics carry too.
            served_model_name=settings.model_name,
            runner="pooling",
            dtype=dtype,  # type: ignore[arg-type]
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            enable_prefix_caching=cfg.enable_prefix_caching,
            block_size=cfg.block_size or (CPU_BLOCK_SIZE if device == "cpu" else None),
            max_num_seqs=cfg.max_num_seqs,
            seed=cfg.seed,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            tensor_parallel_size=cfg.tensor_parallel_size,
            pooler_config=PoolerConfig(**pooler_kwargs(settings, kind, task, _tag_id(model, tag))),
        )
        llm = AsyncLLMEngine.from_engine_args(args)
        tokenizer = llm.get_tokenizer()
        hf_config = llm.model_config.hf_config
        labels = int(getattr(hf_config, "num_labels", 1) or 1)
        id2label = getattr(hf_config, "id2label", None) or {}
        info = ModelInfo(
            name=settings.model_name,
            path=model,
            max_model_len=cfg.max_model_len,
            device=device,
            dtype=engine_dtype(llm, dtype),
            kind=kind,
            pooling_task=task,
            step_tag=tag,
            num_labels=labels,
            labels=tuple(str(id2label.get(i, f"LABEL_{i}")) for i in range(labels)),
        )
        logger.info("pooling engine (%s, %s) on %s with dtype %s", kind, task, device, info.dtype)
        return cls(llm, tokenizer, info)

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def model_info(self) -> ModelInfo:
        return self._info

    def _refuse(self, what: str) -> NoReturn:
        raise NotServedByModel(
            f"{what} needs a generative judge; the served model is a pooling "
            f"{self._info.kind.replace('_', ' ')} model ({self._info.path}), which returns class "
            "logits only; this request needs a generative model (VERIFIER_ENGINE__MODEL)"
        )

    async def _pool_one(self, call: PoolCall) -> PoolResult:
        from vllm import PoolingParams
        from vllm.inputs import tokens_input

        from service.errors import ContextTooLong

        if len(call.prompt_ids) > self._info.max_model_len:
            raise ContextTooLong(
                f"input of {len(call.prompt_ids)} tokens exceeds the model's context of "
                f"{self._info.max_model_len}; shorten the texts"
            )
        if call.task != self._info.pooling_task:
            raise NotServedByModel(
                f"task {call.task!r} is not served: the model's pooling task is "
                f"{self._info.pooling_task!r}"
            )
        params = PoolingParams(
            task=call.task,  # type: ignore[arg-type]
            use_activation=call.use_activation,
        )
        # A rendered input: no thread hop through vLLM's renderer (``VLLMEngine._run``).
        stream = self._llm.encode(tokens_input(list(call.prompt_ids)), params, uuid.uuid4().hex)
        try:
            out = await run_vllm_call(self._llm, stream)
        except asyncio.CancelledError:
            spend.record(len(call.prompt_ids))  # the prefill is the whole request
            raise
        spend.record(len(out.prompt_token_ids or []))
        data = out.outputs.data
        rows = data.tolist() if hasattr(data, "tolist") else list(data)
        if rows and not isinstance(rows[0], list):
            rows = [rows]  # classify: one row for the sequence
        usage = TokenUsage(
            prompt_tokens=len(out.prompt_token_ids or []),
            cached_tokens=int(out.num_cached_tokens or 0),
            engine_calls=1,
        )
        return PoolResult(rows=[[float(x) for x in r] for r in rows], usage=usage)

    async def pool(self, calls: Sequence[PoolCall]) -> list[PoolResult]:
        return list(await asyncio.gather(*(self._pool_one(c) for c in calls)))

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]:
        self._refuse("a judgment at a verdict slot")

    async def generate(self, calls: Sequence[GenerateCall]) -> list[GenerateResult]:
        self._refuse("generating text (reasoning mode, model splitting, rationales)")

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> SlotLogits:
        self._refuse("single-pass process scoring")

    async def option_logprobs(self, calls: Sequence[OptionCall]) -> list[OptionResult]:
        self._refuse("reading option letters (multiple choice)")

    async def span_logprobs(self, calls: Sequence[SpanCall]) -> list[SpanResult]:
        self._refuse("reading span log-probabilities")

    async def abort(self, request_id: str) -> None:
        await self._llm.abort(request_id)  # vLLM also aborts an encode stream closed early

    async def check_health(self) -> None:
        await check_vllm_health(self._llm)

    async def shutdown(self) -> None:
        await shutdown_vllm(self._llm)
