"""The dependency rules of pyproject.toml's [tool.importlinter] hold, and can fail.

`lint-imports` (import-linter) checks the layers (api > serving > queue | engine > scoring) and
the forbidden imports on the source, indirect imports and imports inside functions included.
CI runs it too (.ci/run); here it also runs on a copy of the tree with an upward import planted,
so that a contract that cannot fail would show.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
LAYERS = "layers: api > serving > (queue | engine) > scoring"
PURE_SCORING = "scoring is pure: it imports nothing of the service outside scoring"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with `root`'s pyproject.toml, importing `service` from `root`."""
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(root), str(ROOT / "clients" / "python")]),
    }
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "service", tmp_path / "service", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    planted = tmp_path / "service" / "scoring" / "fusion.py"
    planted.write_text(
        planted.read_text(encoding="utf-8") + "\nimport service.api\n", encoding="utf-8"
    )
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{LAYERS} BROKEN" in result.stdout
    assert f"{PURE_SCORING} BROKEN" in result.stdout
    assert "service.scoring.fusion -> service.api" in result.stdout


def test_service_keeps_at_most_five_loose_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "service").glob("*.py"))
    # app, cli, config, errors and __init__: everything else lives in a layer's package.
    assert len(loose) <= 5, loose
