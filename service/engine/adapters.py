"""LoRA adapters of the served model, chosen per request (docs/api.md, "Models and adapters").

The job runner sets :data:`current_adapter` from the request's ``model`` before the job runs
(each job runs in its own task, so each has its own value); every engine request the job makes
then carries that adapter's ``LoRARequest``, and vLLM batches requests of different adapters
(and of none) together. The names a job echoes and keys calibrations by are
:func:`served_id`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.protocol.base import adapter_id

current_adapter: ContextVar[str | None] = ContextVar("current_adapter", default=None)

ADAPTER_CONFIG = "adapter_config.json"


def served_id(base: str) -> str:
    """The running job's model id: ``base``, or '<base>:<adapter>' under an adapter."""
    return adapter_id(base, current_adapter.get())


@dataclass(frozen=True, slots=True)
class Adapter:
    name: str
    path: str
    rank: int
    int_id: int  # vLLM's lora_int_id: unique per engine, from 1


def load_adapters(folders: Mapping[str, str], max_rank: int) -> dict[str, Adapter]:
    """The adapters in ``folders`` (name -> PEFT folder), checked before the engine starts; a
    ``ValueError`` names the first one the engine could not take."""
    out: dict[str, Adapter] = {}
    for i, (name, folder) in enumerate(sorted(folders.items()), start=1):
        config = Path(folder) / ADAPTER_CONFIG
        try:
            spec: dict[str, Any] = json.loads(config.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"engine.lora_adapters[{name!r}]: no readable {ADAPTER_CONFIG} in {folder} ({exc})"
            ) from exc
        if spec.get("peft_type", "LORA") != "LORA":
            raise ValueError(f"engine.lora_adapters[{name!r}]: {folder} is not a LoRA adapter")
        rank = int(spec.get("r", 0))
        if not 0 < rank <= max_rank:
            raise ValueError(
                f"engine.lora_adapters[{name!r}]: rank {rank} is over engine.max_lora_rank "
                f"({max_rank}); raise VERIFIER_ENGINE__MAX_LORA_RANK"
            )
        out[name] = Adapter(name=name, path=str(Path(folder).resolve()), rank=rank, int_id=i)
    return out


class AdapterRequests:
    """The ``LoRARequest`` of the running job's adapter (None for the served model)."""

    def __init__(self, adapters: Mapping[str, Adapter]) -> None:
        self._adapters = dict(adapters)
        self._requests: dict[str, Any] = {}

    def current(self) -> Any | None:
        name = current_adapter.get()
        if name is None:
            return None
        request = self._requests.get(name)
        if request is None:
            from vllm.lora.request import LoRARequest

            from service.errors import ModelNotFound

            adapter = self._adapters.get(name)
            if adapter is None:  # the API checks first; a job from an older API may not have
                raise ModelNotFound(
                    f"no LoRA adapter {name!r} here; served: {sorted(self._adapters)}"
                )
            request = self._requests[name] = LoRARequest(name, adapter.int_id, adapter.path)
        return request
