"""F1 / ?: help for the screen and the focused widget, and every binding of the app with its id
(the id is what ``[keymap]`` in config.toml remaps)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown

from .. import keymap


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 98%; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """
    BINDINGS = keymap.bindings("help")

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self.text())

    def text(self) -> str:
        app = self.app
        user_map = getattr(app, "config", None).keymap if getattr(app, "config", None) else {}
        parts = []
        screen_help = getattr(self.under, "HELP", "")
        if screen_help:
            parts.append(screen_help.strip())
        focused = self.under.focused
        if focused is not None:
            name = type(focused).__name__
            widget_help = getattr(focused, "HELP", None)
            parts.append(f"## Focused: {name}" + (f"\n\n{widget_help.strip()}" if widget_help else ""))
            own = [b for bs in focused._bindings.key_to_bindings.values() for b in bs if b.show and b.description]
            if own:
                rows = ["| key | does |", "|---|---|"]
                seen = set()
                for b in own:
                    if (b.key, b.description) in seen:
                        continue
                    seen.add((b.key, b.description))
                    rows.append(f"| `{keymap.display_keys(b.key)}` | {b.description} |")
                parts.append("\n".join(rows))
        scope = getattr(self.under, "KEY_SCOPE", None) or getattr(self.under, "MODE", "")
        scopes = [s for s in (scope, "app") if s in keymap.REGISTRY]
        scopes += [s for s in keymap.REGISTRY if s not in scopes]
        parts.append("## All bindings\n\nRemap any of them in `config.toml`, e.g. `[keymap]` "
                     "`\"run.stop\" = \"s,f8\"`.")
        for s in scopes:
            rows = [f"### {s}{' (this screen)' if s == scope else ''}", "", "| key | does | id |", "|---|---|---|"]
            for spec in keymap.REGISTRY[s]:
                keys = keymap.effective_keys(spec, user_map)
                rows.append(f"| `{keymap.display_keys(keys)}` | {spec.description} | `{spec.id}` |")
            parts.append("\n".join(rows))
        parts.append("Metric definitions (TTFT, decode, prefill, flags) are in `docs/metrics.md`.")
        return "\n\n".join(parts)

    def action_close(self) -> None:
        self.dismiss(None)
