"""The request limits in /openapi.json, as the running settings make them.

Each bounded field's schema gets ``maxLength`` (a text), ``maxItems`` (a list's length) or
``maximum`` (a number) and an ``x-limit`` naming the setting, e.g.
``{"type": "string", "maxLength": 32000, "x-limit": "VERIFIER_LIMITS__MAX_TEXT_CHARS"}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

from pydantic import BaseModel

from service.api.limits import NUMBERS, RULES, limit_value
from service.config import LimitSettings
from service.protocol.jobs import JOBS
from service.protocol.limits import Limit, limits_of

JSON = dict[str, Any]
KEYWORDS = ("maxLength", "maxItems", "maximum")


def _models(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in get_args(annotation):
        yield from _models(arg)


def request_models() -> list[type[BaseModel]]:
    """Every request model and the models nested in it, each once."""
    seen: dict[type[BaseModel], None] = {}
    todo = [spec.request for spec in JOBS.values()]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen[model] = None
        for field in model.model_fields.values():
            todo.extend(_models(field.annotation))
    return list(seen)


def _branches(schema: JSON, json_type: str) -> Iterator[JSON]:
    """``schema`` or its ``anyOf`` branches of ``json_type``."""
    if schema.get("type") == json_type:
        yield schema
    for branch in schema.get("anyOf", []):
        yield from _branches(branch, json_type)


def _state(prop: JSON, limit: Limit, value: int, setting: str) -> None:
    if limit.count:
        targets, keyword = list(_branches(prop, "array")), "maxItems"
    elif limit.each:
        items = [a.get("items", {}) for a in _branches(prop, "array")]
        targets, keyword = [s for i in items for s in _branches(i, "string")], "maxLength"
    elif limit.kind in ("text", "reference"):
        targets, keyword = list(_branches(prop, "string")), "maxLength"
    else:
        targets, keyword = list(_branches(prop, "integer")), "maximum"
    for target in targets:
        target[keyword] = value
        target["x-limit"] = setting
    # A number left out is capped at its limit (service.api.limits.cap_defaults).
    default = prop.get("default")
    if limit.kind in NUMBERS and isinstance(default, int) and default > value:
        prop["default"] = value


def state_limits(document: JSON, settings: LimitSettings) -> JSON:
    """``document`` with every declared limit stated on its field's schema (in place)."""
    schemas: JSON = document.get("components", {}).get("schemas", {})
    for model in request_models():
        schema = schemas.get(model.__name__) or schemas.get(f"{model.__name__}-Input")
        if schema is None:
            continue
        for name, field in model.model_fields.items():
            prop = schema.get("properties", {}).get(field.alias or name)
            if prop is None:
                continue
            for limit in limits_of(model, name):
                env = RULES[limit.kind].env
                _state(prop, limit, limit_value(settings, limit.kind), env)
    return document


def strip_limits(node: Any) -> Any:
    """``node`` without what :func:`state_limits` added (in place): a generated client's
    models do not change with the server's settings."""
    if isinstance(node, dict):
        if node.pop("x-limit", None) is not None:
            for keyword in KEYWORDS:
                node.pop(keyword, None)
        for value in node.values():
            strip_limits(value)
    elif isinstance(node, list):
        for value in node:
            strip_limits(value)
    return node
