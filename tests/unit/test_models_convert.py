"""`verifier models convert`: refusals that must come before any dequantizing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app
from service.engine.models import find_gguf


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a gguf")
    result = CliRunner().invoke(app, ["models", "convert", str(fake), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "is not a GGUF file" in result.output
    assert not (tmp_path / "out").exists()


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["models", "convert", str(tmp_path / "nope.gguf"), str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_a_non_empty_output_folder_is_kept_without_force(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = CliRunner().invoke(app, ["models", "convert", str(gguf), str(out)])
    assert result.exit_code == 2
    assert "--force" in result.output
    assert (out / "keep.txt").read_text() == "mine"


# Slow for the fast tier (a 96 MB copy and a tokenizer read from it), so it runs with the
# engine tier, though it starts no engine.
@pytest.mark.engine
def test_a_gguf_without_a_chat_template_is_refused(tmp_path: Path) -> None:
    # The default model's own GGUF with its chat template removed, by gguf's own tool.
    bare = tmp_path / "bare.gguf"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gguf.scripts.gguf_new_metadata",
            "--remove-metadata",
            "tokenizer.chat_template",
            "--force",
            str(find_gguf()),
            str(bare),
        ],
        check=True,
        capture_output=True,
    )
    result = CliRunner().invoke(app, ["models", "convert", str(bare), str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "carries no chat template" in result.output
    assert not any((tmp_path / "out").glob("*.safetensors"))


def test_processes_preparing_the_default_model_together_convert_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API and its workers (or parallel test workers) starting on a fresh machine: one
    converts, the others wait and take its folder instead of deleting its half-written one."""
    from service.config import Settings
    from service.engine import models

    calls: list[Path] = []
    started = threading.Event()

    def slow_convert(gguf: Path, out: Path) -> None:
        calls.append(out)
        started.set()
        time.sleep(0.3)  # long enough for the others to reach the lock meanwhile
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert", slow_convert)
    settings = Settings(model_cache=tmp_path)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(models.prepare_default_model, settings)
        assert started.wait(10)
        rest = [pool.submit(models.prepare_default_model, settings) for _ in range(2)]
        folders = {f.result(timeout=30) for f in [first, *rest]}
    assert folders == {models.default_model_dir(settings)}
    assert len(calls) == 1
    assert (models.default_model_dir(settings) / "config.json").is_file()
