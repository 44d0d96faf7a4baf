"""Rows of the data files (GSM8K solutions, ProcessBench): strict models, readable errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class DataRow(BaseModel):
    """A row read from a data file: types are checked, not coerced ("yes" is no bool)."""

    model_config = ConfigDict(strict=True, frozen=True)


def row_error(exc: ValidationError) -> str:
    """One line per bad row: ``field 'a.b': <what is wrong>; ...``.

    Example:
        >>> try:
        ...     DataRow.model_validate([])
        ... except ValidationError as exc:
        ...     row_error(exc)
        'Input should be a valid dictionary or instance of DataRow'
    """
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"field {loc!r}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)
