"""Dependencies point one way: the leaves do not pull in the layers above or beside them.

Each check imports one module in a fresh interpreter, so modules another test loaded cannot
hide an import.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded(module: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules under `prefixes` that importing `module` loads."""
    code = (
        f"import sys, {module};"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_config_does_not_import_redis() -> None:
    assert _loaded("service.config", ("redis",)) == []


@pytest.mark.parametrize(
    "module",
    [
        "service.protocol",
        "service.protocol.mcq",
        "service.protocol.audit",
        "service.protocol.reward",
    ],
)
def test_protocol_does_not_import_the_engine(module: str) -> None:
    assert _loaded(module, ("service.engine", "vllm", "redis")) == []
