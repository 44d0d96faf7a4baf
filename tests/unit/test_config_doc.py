"""docs/configuration.md is generated from Settings and cannot drift from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, Field

from service.config import EngineSettings, Settings

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_config_doc", ROOT / "scripts/gen_config_doc.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_page_matches_settings() -> None:
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(), (
        f"docs/configuration.md drifted from service.config.Settings: run {gen.COMMAND}"
    )


def test_every_setting_is_on_the_page_with_a_description() -> None:
    page = _generator().render()
    rows = [line for line in page.splitlines() if line.startswith("| `VERIFIER_")]
    assert "| `VERIFIER_ENGINE__OPENAI__BASE_URL` |" in page
    assert "| `VERIFIER_QUEUE__MAX_QUEUE_DEPTH` |" in page
    empty = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("|  |")]
    assert not empty, f"settings without Field(description=...): {empty}"


def test_a_new_setting_or_group_field_changes_the_page() -> None:
    """The drift test can fail: a new top-level setting and a new field in a nested group."""
    gen = _generator()

    class Engine(EngineSettings):
        new_knob: int = Field(default=7, description="A knob added later.")

    class Extra(BaseModel):
        """A group added later."""

        depth: int = Field(default=3, description="How deep.")

    class Grown(Settings):
        engine: Engine = Field(default_factory=Engine)
        extra: Extra = Field(default_factory=Extra)
        flag: bool = Field(default=False, description="A flag added later.")

    page = gen.render(Grown)
    assert page != gen.render()
    assert "| `VERIFIER_FLAG` | bool | false | A flag added later. |" in page
    assert "| `VERIFIER_ENGINE__NEW_KNOB` | int | `7` | A knob added later. |" in page
    assert "## `extra`\n\nA group added later." in page
    assert "| `VERIFIER_EXTRA__DEPTH` | int | `3` | How deep. |" in page
