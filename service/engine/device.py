"""Which device the engine runs on, and which dtype suits it.

bf16 is fast only where the CPU computes it natively (AVX512-BF16 or AMX on x86); elsewhere
vLLM's CPU kernels emulate it and a judgment ran 5.2x slower than in float32 (measured on an
AVX2-only EPYC), so ``dtype=auto`` picks float32 there.
"""

from __future__ import annotations

import logging
import platform
from pathlib import Path

logger = logging.getLogger(__name__)

# x86 flags of native bf16 matrix math; aarch64 reports "bf16" among its Features.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def detect_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first CPU in a /proc/cpuinfo text (x86 'flags', arm 'Features')."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def resolve_dtype(requested: str, device: str, cpuinfo: str | None = None) -> str:
    """The dtype to build the engine with; ``auto`` is resolved on CPU, left to vLLM on GPU."""
    if requested != "auto" or device != "cpu":
        return requested
    flags = cpu_flags(read_cpuinfo() if cpuinfo is None else cpuinfo)
    native = sorted(flags & NATIVE_BF16_FLAGS)
    if native:
        logger.info("dtype auto -> bfloat16 (native bf16 on this CPU: %s)", ", ".join(native))
        return "bfloat16"
    logger.info(
        "dtype auto -> float32 (%s CPU without native bf16; bf16 would be emulated and slow)",
        platform.machine() or "this",
    )
    return "float32"
