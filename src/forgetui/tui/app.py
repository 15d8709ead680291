"""The Textual app: four modes (Models, Run, Results, Cases) over one engine.

Runs started here go through :class:`~forgetui.tui.session.RunSession`, i.e. the very same
prepare/Runner/store path as ``forgetui --run``; the run lives in an app-level worker, so switching
screens never stops it. Screens read the run's :class:`LiveRun` on a timer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from textual.app import App, SystemCommand
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from ..config import Config, load_config
from ..errors import ForgetuiError
from ..paths import locations
from . import keymap
from .session import RunSession
from .themes import DEFAULT_THEME, load_themes


def over_ssh() -> bool:
    return bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"))


@dataclass
class PaletteCommand:
    title: str
    help: str
    callback: Callable[[], Any]


class RunEnded(Message):
    """The app's run worker finished (complete, interrupted or failed)."""

    def __init__(self, session: RunSession, error: str | None) -> None:
        super().__init__()
        self.session = session
        self.error = error


def _models_screen() -> Screen:
    from .screens.models import ModelsScreen
    return ModelsScreen()


def _run_screen() -> Screen:
    from .screens.run import RunScreen
    return RunScreen()


def _results_screen() -> Screen:
    from .screens.results import ResultsScreen
    return ResultsScreen()


def _cases_screen() -> Screen:
    from .screens.cases import CasesScreen
    return CasesScreen()


class ForgetApp(App[int]):
    """forgetui's terminal UI."""

    TITLE = "forgetui"
    CSS_PATH = "styles/app.tcss"
    MODES = {"models": _models_screen, "run": _run_screen, "results": _results_screen, "cases": _cases_screen}
    BINDINGS = keymap.bindings("app")
    COMMAND_PALETTE_BINDING = "ctrl+p"

    def __init__(self, start_mode: str = "models", config: Config | None = None,
                 profile_path: Path | None = None, allow_unsandboxed: bool = False,
                 resume: str | None = None) -> None:
        super().__init__()
        self.locations = locations()
        self.config_problem: str | None = None
        if config is None:
            try:
                config = load_config(self.locations.config_file)
            except ForgetuiError as exc:
                self.config_problem = exc.message
                config = Config()
        self.config = config
        self.start_mode = start_mode
        self.allow_unsandboxed = allow_unsandboxed
        #: A profile to start at once (``forgetui demo``, ``forgetui PROFILE``).
        self.start_profile = profile_path
        self.start_resume = resume
        self.session: RunSession | None = None
        self.run_worker_: Worker | None = None
        self.theme_problems: list[str] = []
        ssh = over_ssh()
        self.refresh_hz = config.tui.ssh_refresh_hz if ssh else config.tui.refresh_hz
        anim = config.tui.animations
        if anim == "off" or (anim == "auto" and ssh):
            self.animation_level = "none"

    # ----------------------------------------------------------------- setup
    def on_mount(self) -> None:
        themes, problems = load_themes(self.locations.themes_dir)
        for theme in themes.values():
            self.register_theme(theme)
        wanted = self.config.tui.theme
        if wanted not in self.available_themes:
            problems.append(f"theme {wanted!r} not found (known: {', '.join(sorted(themes))}); using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else "textual-dark"
        key_problems = keymap.check_keymap(self.config.keymap)
        good = {k: v for k, v in self.config.keymap.items()
                if not any(p.startswith(f"{k}:") or repr(k) in p for p in key_problems)}
        self.set_keymap(good)
        self.theme_problems = problems
        notes = problems + [f"keymap: {p}" for p in key_problems]
        if self.config_problem:
            notes.insert(0, f"config: {self.config_problem} (running with no providers)")
        if notes:
            self.notify("\n".join(notes), title="Some settings were not applied", severity="warning", timeout=12)
        self.switch_mode(self.start_mode)
        if self.start_profile is not None:
            self.start_run(self.start_profile, resume=self.start_resume)

    def key_for(self, binding_id: str) -> str:
        """The first key of a binding after the user's keymap, for labels and hints."""
        spec = keymap.all_specs()[binding_id]
        keys = self.config.keymap.get(binding_id) if binding_id in self._keymap else spec.keys
        return keymap.display_keys((keys or spec.keys).split(",")[0])

    # ------------------------------------------------------------------ runs
    @property
    def run_active(self) -> bool:
        return self.session is not None and self.session.active

    def start_run(self, profile_path: Path, resume: str | None = None) -> RunSession | None:
        """Prepare and start a run; errors in the profile or store are shown, nothing starts."""
        if self.run_active:
            self.notify("A run is already going; stop it first (2, then s).", severity="warning")
            return None
        session = RunSession(profile_path, resume=resume, allow_unsandboxed=self.allow_unsandboxed)
        try:
            session.prepare()
        except ForgetuiError as exc:
            self.notify(exc.message, title="Cannot start the run", severity="error", timeout=15)
            return None
        self.session = session
        self.run_worker_ = self.run_worker(self._drive(session), name="run", group="run",
                                           exit_on_error=False, description=str(profile_path))
        self.switch_mode("run")
        return session

    async def _drive(self, session: RunSession) -> None:
        error = None
        try:
            await session.run()
        except Exception as exc:  # noqa: BLE001 - shown to the user, the run's records stay on disk
            error = f"{type(exc).__name__}: {exc}"
            session.live.note("error", f"the run stopped with an error: {error}")
            raise
        finally:
            self.post_message(RunEnded(session, error))

    def on_run_ended(self, message: RunEnded) -> None:
        live = message.session.live
        tick = getattr(self.screen, "tick", None)
        if tick is not None:
            tick()  # show the final counts now, not at the next timer
        from .widgets.topbar import TopBar

        for bar in self.screen.query(TopBar):
            bar.redraw()
        if message.error:
            self.notify(message.error, title="Run failed", severity="error", timeout=15)
        elif live.finished is not None:
            f = live.finished
            self.notify(f"{f.run_id}: {f.status}; {live.passed} passed, {live.failed} failed, "
                        f"{live.errors} errors", title="Run finished")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The run worker reports through RunEnded; nothing else may take the app down.
        if event.worker.name == "run" and event.state == WorkerState.ERROR:
            self.log.error(f"run worker failed: {event.worker.error}")

    def cancel_run(self) -> None:
        """Cancel the request in flight and end the run as interrupted (resumable)."""
        if self.run_worker_ is not None and self.run_active:
            self.run_worker_.cancel()

    # --------------------------------------------------------------- actions
    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_next_theme(self) -> None:
        names = [n for n in sorted(self.available_themes) if n.startswith("forgetui")] or sorted(self.available_themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    async def action_request_quit(self) -> None:
        if not self.run_active:
            self.exit(0)
            return
        from .screens.confirm import ConfirmScreen

        session = self.session
        assert session is not None
        hint = (f"Finished requests are on disk. Resume later with:\n"
                f"forgetui --run {session.profile_path} --resume {session.live.run_id}")

        def answer(yes: bool | None) -> None:
            if yes:
                self.call_later(self._quit_after_cancel)

        self.push_screen(ConfirmScreen("A run is in progress. Stop it and quit?", hint), answer)

    async def _quit_after_cancel(self) -> None:
        worker = self.run_worker_
        self.cancel_run()
        if worker is not None:
            await worker.wait() if not worker.is_finished else None
        self.exit(130, return_code=130)

    async def action_quit(self) -> None:
        await self.action_request_quit()

    # ------------------------------------------------------------- palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for mode, label in (("models", "Models"), ("run", "Run"), ("results", "Results"), ("cases", "Cases")):
            yield SystemCommand(f"Go to {label}", f"Switch to the {label} screen",
                                lambda m=mode: self.switch_mode(m))
        provider = getattr(screen, "palette_commands", None)
        if provider is not None:
            for cmd in provider():
                yield SystemCommand(cmd.title, cmd.help, cmd.callback)
        if self.run_active:
            yield SystemCommand("Run: stop after current request", "End the run at the next request; resumable",
                                self.session.control.stop_after_current)  # type: ignore[union-attr]
            yield SystemCommand("Run: cancel now", "Cancel the request in flight; resumable", self.cancel_run)
        yield SystemCommand("Theme: next", "Cycle through the forgetui themes", self.action_next_theme)
        for name in sorted(self.available_themes):
            yield SystemCommand(f"Theme: {name}", "Switch theme", lambda n=name: setattr(self, "theme", n),
                                discover=False)
        yield SystemCommand("Help", "Keys of this screen and the focused widget", self.action_help)
        yield SystemCommand("Quit", "Quit forgetui (asks while a run is active)", self.action_request_quit)
