"""The one-line bar at the top of every screen: the modes with their keys and the run's state."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

MODES = (("models", "Models"), ("run", "Run"), ("results", "Results"), ("cases", "Cases"))


class TopBar(Static):
    """Redrawn on a 1 Hz timer and when a screen shows; reads app state, holds none."""

    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(1.0, self.redraw)

    def redraw(self) -> None:
        app = self.app
        text = Text(" forgetui ", style="bold")
        keys = {m: app.key_for("app." + m) for m, _ in MODES}  # type: ignore[attr-defined]
        for mode, label in MODES:
            style = "reverse bold" if mode == self.mode else ""
            text.append(" ")
            text.append(f" {keys[mode]} {label} ", style=style)
        session = getattr(app, "session", None)
        if session is not None and session.live.run_id:
            live = session.live
            if live.finished is not None:
                state = live.finished.status
            elif session.control.paused:
                state = "paused"
            elif session.control.stop_requested:
                state = "stopping"
            else:
                state = "running"
            text.append(f"   run {state} {live.done}/{live.total}", style="bold" if state == "running" else "")
        self.update(text)
