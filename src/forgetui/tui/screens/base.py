"""What every forgetui screen shares: the top bar, the footer, palette commands."""

from __future__ import annotations

from typing import Iterable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from ..widgets.topbar import TopBar


class BaseScreen(Screen):
    """Subclasses set ``MODE`` and implement ``compose_body``; ``HELP`` is Markdown for F1."""

    MODE = ""
    HELP = ""

    def compose(self) -> ComposeResult:
        yield TopBar(self.MODE)
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        return iter(())

    def palette_commands(self) -> Iterable:
        """Screen-specific command palette entries (``PaletteCommand``)."""
        return ()

    def on_screen_resume(self) -> None:
        for bar in self.query(TopBar):
            bar.redraw()
