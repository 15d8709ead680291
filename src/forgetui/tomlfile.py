"""Load a TOML file into a pydantic model with errors that name file, line and field.

``tomllib`` reports syntax errors with a line, but pydantic only knows the *path* of a bad field
(``("speed", "warmup")``). To point a person at the right line we scan the source once and map
every table header and key to the line it is written on.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _split_key(raw: str) -> list[str]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", raw)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


def key_lines(source: str) -> dict[tuple[Any, ...], int]:
    """Map each key path (array-of-tables entries indexed) to its 1-based line number."""
    lines: dict[tuple[Any, ...], int] = {}
    table: tuple[Any, ...] = ()
    array_counts: dict[tuple[Any, ...], int] = {}
    in_multiline: str | None = None
    for number, line in enumerate(source.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER.match(line)
        if header and not _KEY.match(line):
            path = tuple(_split_key(header.group(2)))
            if header.group(1) == "[[":
                index = array_counts.get(path, -1) + 1
                array_counts[path] = index
                table = path + (index,)
            else:
                table = _resolve(path, array_counts)
            lines.setdefault(table, number)
            lines.setdefault(table[:-1] if header.group(1) == "[[" else table, number)
            continue
        key = _KEY.match(line)
        if key:
            full = table + tuple(_split_key(key.group(1)))
            lines.setdefault(full, number)
            rest = line[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


def _resolve(path: tuple[str, ...], array_counts: dict[tuple[Any, ...], int]) -> tuple[Any, ...]:
    """``[providers.extra]`` after ``[[providers]]`` belongs to the latest providers entry."""
    out: tuple[Any, ...] = ()
    for part in path:
        out = out + (part,)
        key = tuple(p for p in out if not isinstance(p, int))
        if key in array_counts and len(key) < len(path):
            out = out + (array_counts[key],)
    return out


def line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    """The line of the deepest known prefix of ``loc``."""
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def load_toml(path: Path) -> tuple[dict[str, Any], str]:
    """Read and parse a TOML file; syntax errors become ConfigError with file and line."""
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return tomllib.loads(source), source
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None


def _describe(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate(model: type[M], data: dict[str, Any], path: Path, source: str) -> M:
    """Validate ``data`` against ``model``; every problem is reported as ``file:line: field: why``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = key_lines(source)
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = line_of(lines, loc)
            where = f"{path}:{line}" if line else str(path)
            if err["type"] == "extra_forbidden":
                allowed = _allowed_keys(model, loc[:-1])
                hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
                problems.append(f"{where}: unknown key '{_describe(loc)}'{hint}")
            else:
                problems.append(f"{where}: {_describe(loc)}: {err['msg']}")
        raise ConfigError("\n".join(problems)) from None


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the sub-model at ``loc``, to suggest the right spelling."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
        if current is None:
            return []
    return sorted(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None
