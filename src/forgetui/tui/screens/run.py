"""The Run screen: the request in flight (live meters), the run's progress, counts, ETA and event log.

Everything is pulled from the app's ``RunSession`` by one timer at ``app.refresh_hz`` (4 Hz over
SSH, 8 Hz locally by default); the engine never calls into this screen.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Log, ProgressBar, Static

from .. import keymap
from ..app import PaletteCommand
from ..widgets.meters import LiveMeters
from .base import BaseScreen


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class RunScreen(BaseScreen):
    MODE = "run"
    BINDINGS = keymap.bindings("run")
    HELP = """
# Run

The request in flight: time to first token for reasoning and for visible content (from the moment
the request's last byte was sent), the **current** decode rate (stream events per second over the
last refresh interval, which is tokens per second on servers that send one token per event), its
sparkline, and the tail of the streamed text (reasoning dimmed). The numbers stored for the run
come from the finished request and the server's own counts, not from this live view.

- **p** pause after the request in flight (press again to go on)
- **s** stop after the request in flight: the run is saved as interrupted and can be resumed
- **x** cancel now: the request in flight is cancelled (its connection closed), the run is resumable
- **f** failures of this run so far, **o** all stored runs

This screen refreshes a few times a second whatever the token rate (4 Hz over SSH).
"""

    DEFAULT_CSS = """
    RunScreen #run-head { height: 2; padding: 0 1; }
    RunScreen #run-progress { height: 1; padding: 0 1; }
    RunScreen #run-counts { height: 2; padding: 0 1; }
    RunScreen #run-log { height: 2fr; min-height: 4; border: round $panel-lighten-1; }
    RunScreen LiveMeters { height: 3fr; max-height: 19; }
    RunScreen #bar { width: 1fr; }
    RunScreen #bar > Bar { width: 1fr; }
    RunScreen #run-idle { padding: 1 2; }
    """

    def compose_body(self) -> ComposeResult:
        with Vertical(id="run-body"):
            yield Static("", id="run-head")
            yield LiveMeters(id="meters")
            with Horizontal(id="run-progress"):
                yield ProgressBar(total=1, show_eta=False, id="bar")
            yield Static("", id="run-counts")
            yield Log(max_lines=2000, id="run-log", auto_scroll=True)

    def on_mount(self) -> None:
        self._log_seq = 0
        self._session = None
        self._last_head: Text | None = None
        self._last_counts: Text | None = None
        self._last_bar: tuple[int, int] | None = None
        self.ticks = 0
        hz = getattr(self.app, "refresh_hz", 8.0)
        self.timer = self.set_interval(1.0 / hz, self.tick)
        self.tick()

    def on_screen_suspend(self) -> None:
        self.timer.pause()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.timer.resume()
        self.tick()

    # ------------------------------------------------------------- the tick
    def tick(self) -> None:
        """One refresh: read the session, update only what changed."""
        self.ticks += 1
        session = getattr(self.app, "session", None)
        if session is not self._session:
            self._session = session
            self._log_seq = 0
            self.query_one("#run-log", Log).clear()
        meters = self.query_one(LiveMeters)
        if session is None:
            self._update_static("#run-head", "_last_head", Text.from_markup(
                f"No run yet. Press [b]{self.app.key_for('app.models')}[/b] to pick models and "
                f"[b]r[/b] to run them, or start one from the command palette."))
            meters.sample(None)
            return
        live = session.live
        meters.sample(live.current or live.last)
        self._update_static("#run-head", "_last_head", self._head(session))
        self._update_static("#run-counts", "_last_counts", self._counts(session))
        bar = (live.done, max(1, live.total))
        if bar != self._last_bar:
            self._last_bar = bar
            self.query_one("#bar", ProgressBar).update(total=bar[1], progress=bar[0])
        new = [line for line in live.log if line.seq > self._log_seq]
        if new:
            self._log_seq = new[-1].seq
            marks = {"pass": "✓ ", "fail": "✗ ", "error": "! ", "warning": "~ "}
            self.query_one("#run-log", Log).write_lines(
                [f"{marks.get(line.level, '  ')}{line.text}" for line in new])

    def _update_static(self, selector: str, attr: str, text: Text) -> None:
        if getattr(self, attr) != text:
            setattr(self, attr, text)
            self.query_one(selector, Static).update(text, layout=False)  # fixed-height boxes

    def _state(self, session) -> str:
        live = session.live
        if live.finished is not None:
            return live.finished.status
        if session.control.stop_requested:
            return "stopping after this request"
        if session.control.paused:
            return "paused (p to go on)"
        return "running" if live.run_id else "starting"

    def _head(self, session) -> Text:
        live = session.live
        text = Text()
        text.append(f"Run {live.run_id or '…'}", style="bold")
        text.append(f"  {self._state(session)}", style="bold yellow" if session.control.paused else "bold")
        text.append(f"\n{session.profile_path}", style="dim")
        return text

    def _counts(self, session) -> Text:
        live = session.live
        elapsed = (live.finished and None) or (time.monotonic() - live.started)
        text = Text()
        text.append(f"{live.done}/{live.total} requests   ")
        text.append(f"✓ {live.passed} passed  ", style="green")
        text.append(f"✗ {live.failed} failed  ", style="red")
        text.append(f"! {live.errors} errors   ", style="yellow")
        text.append(f"speed {live.speed_ok} ok" + (f", {live.speed_bad} failed" if live.speed_bad else ""))
        if live.finished is None:
            text.append(f"   elapsed {_clock(elapsed)}  ETA {_clock(live.eta_s())}")
        text.append(f"\ntokens in {live.tokens_in:,} / out {live.tokens_out:,}", style="dim")
        if live.cost_usd is not None:
            text.append(f", cost ${live.cost_usd:.4f}", style="dim")
        if live.recovered:
            text.append(f", {live.recovered} recovered (thinking off)", style="dim")
        text.append(f"   models: {', '.join(live.targets)}", style="dim")
        return text

    # ---------------------------------------------------------- actions
    def _session_or_warn(self):
        session = getattr(self.app, "session", None)
        if session is None or not session.active:
            self.notify("No run in progress.", severity="warning")
            return None
        return session

    def action_toggle_pause(self) -> None:
        session = self._session_or_warn()
        if session is None:
            return
        if session.control.paused:
            session.control.resume()
            session.live.note("info", "resumed")
        else:
            session.control.pause()
            session.live.note("warning", "paused: the request in flight finishes, then the run waits (p to go on)")
        self.tick()

    def action_stop_after_current(self) -> None:
        session = self._session_or_warn()
        if session is None:
            return
        session.control.stop_after_current()
        session.live.note("warning", "stopping after the request in flight; the run will be resumable")
        self.tick()

    def action_cancel_now(self) -> None:
        if self._session_or_warn() is None:
            return
        self.app.cancel_run()  # type: ignore[attr-defined]

    def action_open_failures(self) -> None:
        session = getattr(self.app, "session", None)
        if session is None or session.live.run_id is None:
            self.notify("No run yet.", severity="warning")
            return
        from .failures import FailuresScreen

        live = session.live
        # While the run goes, the document is built from the records already on disk (in memory).
        doc = live.finished.document if live.finished is not None else session.runner.document()
        self.app.push_screen(FailuresScreen(doc))

    def action_open_results(self) -> None:
        self.app.switch_mode("results")

    def palette_commands(self):
        return [
            PaletteCommand("Run: pause / go on", "Hold the run after the request in flight", self.action_toggle_pause),
            PaletteCommand("Run: failures so far", "Open the failure inspector on this run", self.action_open_failures),
        ]
