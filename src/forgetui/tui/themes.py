"""Theme files (TOML) -> Textual themes. Built-ins live in the top-level ``themes/`` folder, user
themes in ``<config dir>/themes``; a user theme with a built-in's name replaces it.

A broken file never stops the app: :func:`load_themes` returns the themes that loaded plus one
problem line per broken file, and the app shows all problems in a single notification.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from textual.color import Color, ColorParseError
from textual.theme import Theme

from ..config import StrictModel
from ..errors import ConfigError
from ..tomlfile import load_toml, validate

DEFAULT_THEME = "forgetui-dark"


def builtin_themes_dir() -> Path:
    """The shipped themes: inside the wheel (forgetui/_data/themes) or the source tree's themes/."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_data" / "themes", package.parents[1] / "themes"):
        if candidate.is_dir():
            return candidate
    return package / "_data" / "themes"


class ThemeFile(StrictModel):
    """One theme file. Only ``name`` and ``primary`` are required."""

    name: str = Field(min_length=1, max_length=64)
    dark: bool = True
    primary: str
    secondary: str | None = None
    accent: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    success: str | None = None
    warning: str | None = None
    error: str | None = None
    luminosity_spread: float = Field(default=0.15, ge=0, le=1)
    text_alpha: float = Field(default=0.95, ge=0, le=1)

    @field_validator("primary", "secondary", "accent", "foreground", "background", "surface",
                     "panel", "boost", "success", "warning", "error")
    @classmethod
    def _is_colour(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Color.parse(value)
            except ColorParseError:
                raise ValueError(f"{value!r} is not a colour (use #rrggbb, rgb(r,g,b) or a colour name)") from None
        return value

    def to_theme(self) -> Theme:
        return Theme(**self.model_dump())


def load_theme_file(path: Path) -> Theme:
    """One theme; ConfigError naming the file, line and field when it is broken."""
    data, source = load_toml(path)
    return validate(ThemeFile, data, path, source).to_theme()


def load_themes(user_dir: Path | None) -> tuple[dict[str, Theme], list[str]]:
    """Built-in themes, then the user's (which may replace built-ins): (themes by name, problems)."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    folders = [builtin_themes_dir()] + ([user_dir] if user_dir is not None else [])
    for folder in folders:
        try:
            files = sorted(folder.glob("*.toml"))
        except OSError as exc:
            problems.append(f"{folder}: {exc}")
            continue
        for path in files:
            try:
                theme = load_theme_file(path)
            except ConfigError as exc:
                problems.append(exc.message)
                continue
            except OSError as exc:
                problems.append(f"{path}: {exc}")
                continue
            themes[theme.name] = theme
    return themes, problems
