"""Pick a profile file to run: the ones forgetui wrote (data dir), the current folder, or a path."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..session import profiles_dir


def candidate_profiles(limit: int = 200) -> list[Path]:
    """Profile files in the current folder (and ./profiles) first, then those forgetui wrote, newest first."""
    found: list[Path] = []
    for folder in (Path.cwd(), Path.cwd() / "profiles"):
        if folder.is_dir():
            found += sorted(p for p in folder.glob("*.toml") if p.name not in ("pyproject.toml", "config.toml"))
    written = sorted(profiles_dir().glob("*.toml"), key=lambda p: p.stat().st_mtime, reverse=True)
    return (found + written)[:limit]


class ProfilePicker(ModalScreen[Path | None]):
    DEFAULT_CSS = """
    ProfilePicker { align: center middle; }
    ProfilePicker > Vertical { width: 100; max-width: 98%; height: 80%; border: thick $primary;
                               background: $surface; padding: 0 1; }
    ProfilePicker OptionList { height: 1fr; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="profile_picker.cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Run a profile: pick one, or type a path and press enter", classes="title")
            yield Input(placeholder="path/to/profile.toml", id="path")
            yield OptionList(*[Option(str(p), id=str(p)) for p in candidate_profiles()], id="profiles")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(Path(str(event.option.id)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = Path(event.value).expanduser()
        if not path.is_file():
            self.notify(f"{path}: no such file", severity="error")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)
