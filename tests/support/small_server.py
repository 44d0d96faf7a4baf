"""The session's second server: what the LoRA tests and schema fuzzing need that the session
server must not have (the fixture is ``small_server`` in tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Small, so that schema fuzzing's positive examples (which /openapi.json bounds by the running
# limits) stay seconds of engine time on any CPU.
SMALL_LIMITS = {
    "MAX_TEXT_CHARS": 400,
    "MAX_SAMPLES": 2,
    "MAX_REASONING_TOKENS": 16,
    "MAX_STEPS": 8,
    "MAX_DOCUMENTS": 10,  # a calibration fit needs 10 examples
    "REQUEST_TIMEOUT_S": 120,
}
LORA_NAME = "rand"


@dataclass(frozen=True)
class SmallServer:
    """A `verifier serve` in float32 (the LoRA tests compare with a float32 PyTorch forward),
    with one LoRA adapter of random weights and the request limits ``SMALL_LIMITS``."""

    url: str
    adapter: Path
