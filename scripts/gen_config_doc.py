"""Generate docs/configuration.md from `service.config.Settings`.

    .venv/bin/python scripts/gen_config_doc.py          # rewrite docs/configuration.md
    .venv/bin/python scripts/gen_config_doc.py --check  # exit 1 if it drifted

Every field of `Settings` and of its nested groups (any field whose type is a pydantic model,
at any depth) becomes one row: its environment variable, type, default and the description
given in `Field(description=...)`. A fast-tier test regenerates the page and compares, so a
new or changed setting fails the tests until the page is regenerated.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
COMMAND = ".venv/bin/python scripts/gen_config_doc.py"

INTRO = f"""# Configuration

<!-- Generated from service.config.Settings by scripts/gen_config_doc.py; do not edit.
     Regenerate with: {COMMAND} -->

Every setting is an environment variable with the prefix `VERIFIER_`; a setting inside a group
joins the group's name and its own with `__` (`VERIFIER_ENGINE__MODEL`,
`VERIFIER_ENGINE__OPENAI__BASE_URL`). Empty values count as unset. `verifier serve --host/--port`
override `VERIFIER_HOST` and `VERIFIER_PORT`. vLLM's own `VLLM_*` variables win when set
explicitly.

Settings are read once, by `service.config.get_settings()`; no other module reads the
environment. Impossible combinations stop the process at start with a message naming the fix.
"""


def _escape(text: str) -> str:
    """Make text safe inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(annotation: Any) -> str:
    """A short, stable name of a field's type (`int`, `str or unset`, `vllm \\| openai`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        name = " or ".join(_type_name(a) for a in present)
        return f"{name} or unset" if len(present) < len(args) else name
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "JSON object"
    return getattr(annotation, "__name__", str(annotation))


def _portable(value: Any) -> str:
    """A default as text, with machine-specific paths made portable (home as ~, checkout as .)."""
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if isinstance(value, Path):
        checkout = str(ROOT)
        home = str(Path.home())
        if text.startswith(checkout):
            text = "." + text[len(checkout) :]
        elif text.startswith(home):
            text = "~" + text[len(home) :]
    return f"`{text}`" if text else "empty"


def _default(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        return _portable(info.default)
    if info.default_factory is not None:
        return _portable(info.default_factory())  # type: ignore[call-arg]
    return "required"


def _group(annotation: Any) -> type[BaseModel] | None:
    """The settings group a field holds, if it is one (a pydantic model, possibly optional)."""
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _sections(model: type[BaseModel], env: str, title: str) -> Iterator[tuple[str, str, list[str]]]:
    """(title, docstring, rows) for a model and, after it, every group nested in it."""
    rows: list[str] = []
    nested: list[tuple[type[BaseModel], str, str]] = []
    for name, info in model.model_fields.items():
        # A list of groups is one JSON variable; its entries' keys get a section of their own.
        variable = f"{env}{name.upper()}" if env else name
        group = _group(info.annotation)
        listed = typing.get_origin(info.annotation) is list
        if group is not None and listed:
            nested.append((group, "", f"{title}.{name}[]" if title else f"{name}[]"))
        elif group is not None:
            nested.append((group, f"{variable}__", f"{title}.{name}" if title else name))
            continue
        description = _escape(info.description or "")
        rows.append(
            f"| `{variable}` | {_escape(_type_name(info.annotation))} | "
            f"{_escape(_default(info))} | {description} |"
        )
    doc = " ".join((model.__doc__ or "").split()).replace("``", "`")
    yield title, doc, rows
    for group, group_env, group_title in nested:
        yield from _sections(group, group_env, group_title)


def render(settings: type[BaseModel] | None = None) -> str:
    """The whole page, from `service.config.Settings` (or another settings class, for tests)."""
    if settings is None:
        from service.config import Settings

        settings = Settings
    parts = [INTRO]
    for title, doc, rows in _sections(settings, "VERIFIER_", ""):
        if not rows:
            continue
        heading = f"`{title}`" if title else "Top level"
        parts.append(f"\n## {heading}\n")
        if doc and title:
            parts.append(f"\n{doc}\n")
        parts.append("\n| variable | type | default | meaning |\n|---|---|---|---|\n")
        parts.append("\n".join(rows) + "\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        if PAGE.read_text() != page:
            print(f"{PAGE.relative_to(ROOT)} drifted from Settings: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
