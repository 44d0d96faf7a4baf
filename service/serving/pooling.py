"""POST /classify and /pooling: vLLM's pooling routes, behind our queue, keys and quotas.

Inputs are tokenized as vLLM's server does (a text with the tokenizer's special tokens unless
``add_special_tokens`` is false; a chat through the model's template, without them), then read
in one batch of pooling calls.
"""

from __future__ import annotations

from typing import Any

from service.engine.adapters import served_id
from service.engine.base import Engine, PoolCall, PoolResult, TokenUsage
from service.errors import InvalidRequest, NotServedByModel
from service.protocol.pooling import (
    ClassificationData,
    ClassificationResponse,
    ClassifyRequest,
    PoolingInputs,
    PoolingRequest,
    PoolingResponse,
    PoolingResponseData,
    PoolingUsage,
)


def _encode(tokenizer: Any, text: str, add_special_tokens: bool) -> list[int]:
    """Token ids as the tokenizer's ``encode`` gives them, from its Rust backend where there
    is one (vLLM's wrapper around ``encode`` is slow on the API's event loop)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return list(backend.encode(text, add_special_tokens=add_special_tokens).ids)
    return list(tokenizer.encode(text, add_special_tokens=add_special_tokens))


def _usage(results: list[PoolResult]) -> PoolingUsage:
    total = TokenUsage()
    for r in results:
        total.add(r.usage)
    return PoolingUsage(
        prompt_tokens=total.prompt_tokens,
        total_tokens=total.prompt_tokens,
        cached_tokens=total.cached_tokens,
        engine_calls=total.engine_calls,
    )


class PoolingServing:
    """Serves /classify and /pooling over the served pooling model."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self._engine = engine
        self._model = model_name

    def _prompts(self, req: PoolingInputs) -> list[list[int]]:
        tok: Any = self._engine.tokenizer
        if req.messages is not None:
            try:
                text = tok.apply_chat_template(
                    req.messages,
                    tokenize=False,
                    add_generation_prompt=req.add_generation_prompt,
                    continue_final_message=req.continue_final_message,
                    **(req.chat_template_kwargs or {}),
                )
            except Exception as exc:  # the template raises its own errors on odd chats
                raise InvalidRequest(f"messages: the chat template refused them: {exc}") from exc
            return [_encode(tok, text, bool(req.add_special_tokens))]
        add = True if req.add_special_tokens is None else req.add_special_tokens
        vocab = len(tok)
        prompts = []
        for i, item in enumerate(req.inputs()):
            if isinstance(item, str):
                prompts.append(_encode(tok, item, add))
                continue
            if not item or any(not 0 <= t < vocab for t in item):
                raise InvalidRequest(f"input[{i}]: token ids must be non-empty and in [0, {vocab})")
            prompts.append(list(item))
        return prompts

    async def _read(self, req: PoolingInputs, task: str) -> list[PoolResult]:
        info = self._engine.model_info()
        if info.kind == "generative":
            raise NotServedByModel(
                "class scores need a pooling reward model or PRM; the served model is a "
                "generative judge (use /v1/judge/outcome, or serve a *ForSequenceClassification, "
                "*ForRewardModel or *ForProcessRewardModel checkpoint)"
            )
        if task != info.pooling_task:
            raise NotServedByModel(
                f"task {task!r}: the served model's pooling task is {info.pooling_task!r}"
                + (" (use /pooling)" if info.pooling_task == "token_classify" else "")
            )
        use = True if req.use_activation is None else req.use_activation
        calls = [PoolCall(ids, task, use_activation=use) for ids in self._prompts(req)]
        return await self._engine.pool(calls)

    async def classify(self, req: ClassifyRequest) -> ClassificationResponse:
        results = await self._read(req, "classify")
        labels = self._engine.model_info().labels or ()
        data = []
        for i, res in enumerate(results):
            probs = res.rows[0]
            best = max(range(len(probs)), key=probs.__getitem__)
            data.append(
                ClassificationData(
                    index=i,
                    label=labels[best] if best < len(labels) else None,
                    probs=probs,
                    num_classes=len(probs),
                )
            )
        return ClassificationResponse(
            model=served_id(self._model), data=data, usage=_usage(results)
        )

    async def pooling(self, req: PoolingRequest) -> PoolingResponse:
        info = self._engine.model_info()
        task = req.task or info.pooling_task or "classify"
        results = await self._read(req, task)
        data = [
            PoolingResponseData(index=i, data=res.rows[0] if task == "classify" else res.rows)
            for i, res in enumerate(results)
        ]
        return PoolingResponse(model=served_id(self._model), data=data, usage=_usage(results))
