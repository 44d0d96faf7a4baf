"""Generate the client's wire models from the service's OpenAPI document.

    .venv/bin/python scripts/gen_client_models.py          # rewrite the committed models
    .venv/bin/python scripts/gen_client_models.py --check  # exit 1 if they drifted

The client cannot import the server package, so its models are generated (by
datamodel-code-generator, pinned in the `test` extra) and committed; the drift test regenerates
them from the live /openapi.json and compares.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "clients" / "python" / "verifier_client" / "models.py"
HEADER = '''"""Wire models of verifier-service, generated from its /openapi.json.

Do not edit: run `scripts/gen_client_models.py` (a test fails when these drift from the server).
"""
'''
ARGS = [
    "--input-file-type", "openapi",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--target-python-version", "3.11",
    "--use-annotated",
    "--field-constraints",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-schema-description",
    "--use-field-description",
    "--enum-field-as-literal", "all",
    "--use-title-as-name",
    "--disable-timestamp",
    "--collapse-root-models",
    "--use-type-alias",
    "--strict-nullable",
    "--formatters", "ruff-format", "ruff-check",
]  # fmt: skip


def openapi_from_app() -> dict[str, Any]:
    """The document the service serves at /openapi.json (no engine needed to build it)."""
    from service.app import create_app
    from service.config import Settings

    return create_app(Settings()).openapi()


def generate(document: dict[str, Any]) -> str:
    """Python source of the models for ``document``."""
    from service.api.schema import strip_limits

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "openapi.json", Path(tmp) / "models.py"
        # The limits the server states follow its settings; the client's models do not.
        src.write_text(json.dumps(strip_limits(copy.deepcopy(document)), sort_keys=True))
        cmd = [sys.executable, "-m", "datamodel_code_generator", "--input", str(src)]
        subprocess.run([*cmd, "--output", str(out), *ARGS], check=True, cwd=ROOT)
        body = out.read_text()
    # The generator's own header names the input file (a temporary path): ours instead.
    lines = body.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    # Formatted with the project's own settings (the generator formats to 88 columns).
    fmt = [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(MODELS), "-"]
    text = HEADER + "\n" + "".join(lines)
    return subprocess.run(
        fmt, input=text, text=True, capture_output=True, check=True, cwd=ROOT
    ).stdout


def main() -> int:
    text = generate(openapi_from_app())
    if "--check" in sys.argv:
        if MODELS.read_text() != text:
            print("client models drifted: run scripts/gen_client_models.py", file=sys.stderr)
            return 1
        return 0
    MODELS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
