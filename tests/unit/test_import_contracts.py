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
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
LAYERS = "layers: api > serving > (queue | engine | sandbox) > scoring"
PURE_SCORING = "scoring is pure: it imports nothing of the service outside scoring"
BUDGET = "the budget imports no serving family"


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


def _planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on a copy of the tree with ``line`` appended to ``module`` (a path)."""
    shutil.copytree(
        ROOT / "service", tmp_path / "service", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    planted = tmp_path / "service" / module
    planted.write_text(planted.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    return _lint(tmp_path)


def test_an_upward_import_breaks_the_contracts(tmp_path: Path) -> None:
    result = _planted(tmp_path, "scoring/fusion.py", "import service.api")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{LAYERS} BROKEN" in result.stdout
    assert f"{PURE_SCORING} BROKEN" in result.stdout
    assert "service.scoring.fusion -> service.api" in result.stdout


def test_a_serving_family_in_the_budget_breaks_its_contract(tmp_path: Path) -> None:
    result = _planted(tmp_path, "serving/budget/policy.py", "import service.serving.decisions")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{BUDGET} BROKEN" in result.stdout
    assert "service.serving.budget.policy -> service.serving.decisions" in result.stdout
    assert f"{LAYERS} KEPT" in result.stdout  # a sideways import: only this contract sees it


def test_the_budget_contract_names_every_serving_module_but_the_budget() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [contract] = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == BUDGET]
    serving = ROOT / "service" / "serving"
    modules = {p.stem for p in serving.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in serving.iterdir() if (p / "__init__.py").exists()}
    expected = sorted(f"service.serving.{m}" for m in modules - {"budget"})
    assert sorted(contract["forbidden_modules"]) == expected


def test_service_keeps_only_its_leaves_loose() -> None:
    loose = sorted(p.name for p in (ROOT / "service").glob("*.py"))
    # The composition root, the CLI and the leaves every layer may use (settings, errors, the
    # job kinds' names): everything else lives in a layer's package.
    assert loose == ["__init__.py", "app.py", "cli.py", "config.py", "errors.py", "kinds.py"]


def test_the_api_package_loads_no_serving_family() -> None:
    # What the contracts cannot see: modules loaded at run time. Every api module imported in a
    # fresh interpreter brings in the budget and nothing else of serving.
    code = (
        "import importlib, pkgutil, sys, service.api as api\n"
        "for m in pkgutil.walk_packages(api.__path__, 'service.api.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('service.serving.'))))\n"
    )
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "clients" / "python")])
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "service.serving.budget" in loaded
    assert [m for m in loaded if not m.startswith("service.serving.budget")] == []
