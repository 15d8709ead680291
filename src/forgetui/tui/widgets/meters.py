"""Live meters for the request in flight. ``LiveMeters.sample()`` is called by the Run screen's
timer (4-10 Hz); it reads the engine's ``StreamProgress`` and updates widgets only when a shown
value changed. Nothing here is called per token."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Digits, Sparkline, Static

from ...engine.metrics import NS
from .text import inert, tail


def _secs(ns: int | None, start: int | None) -> str:
    if ns is None or start is None:
        return "-"
    return f"{(ns - start) / NS:.3f} s"


class LiveMeters(Vertical):
    """TTFT (reasoning / content), decode rate in big digits, a sparkline, token count, text tail."""

    DEFAULT_CSS = """
    LiveMeters { height: auto; }
    LiveMeters #meter-row { height: 5; }
    LiveMeters #meter-facts { width: 34; padding: 0 1; }
    LiveMeters #rate-box { width: auto; min-width: 22; padding: 0 1; }
    LiveMeters Digits { width: auto; color: $primary; }
    LiveMeters #rate-label { color: $text-muted; }
    LiveMeters Sparkline { width: 1fr; max-width: 60; height: 4; margin: 1 1 0 1; }
    LiveMeters Sparkline > .sparkline--max-color { color: $primary; }
    LiveMeters Sparkline > .sparkline--min-color { color: $primary; }
    LiveMeters #stream-tail { height: 1fr; min-height: 3; border: round $panel-lighten-1; padding: 0 1;
                              overflow-y: hidden; }
    """

    TAIL_CHARS = 1200

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.history: deque[float] = deque([0.0] * 60, maxlen=60)
        #: Widget updates made, and samples that changed anything (the refresh guard test reads them).
        self.updates = 0
        self.frames = 0
        self._last: dict[str, Any] = {}
        self._prev: tuple[int, float] | None = None  # (token events, monotonic) at the last sample
        self._progress: Any = None
        self._tail_at = 0.0

    def compose(self) -> ComposeResult:
        with Horizontal(id="meter-row"):
            yield Static("", id="meter-facts")
            with Vertical(id="rate-box"):
                yield Digits("0.0", id="rate")
                yield Static("tok/s now", id="rate-label")
            yield Sparkline(list(self.history), id="spark")
        yield Static("", id="stream-tail")

    def _set(self, key: str, value: Any, apply: Any) -> None:
        if self._last.get(key) != value:
            self._last[key] = value
            apply(value)
            self.updates += 1

    def sample(self, started: Any | None) -> None:
        """Read the request in flight (a RequestStarted event, or None) and update what changed."""
        progress = started.progress if started is not None else None
        now = time.monotonic()
        before = self.updates
        if progress is not self._progress:
            self._progress = progress
            self._prev = None
        rate = 0.0
        events = progress.token_events if progress is not None else 0
        if progress is not None and self._prev is not None and now > self._prev[1]:
            rate = max(0.0, (events - self._prev[0]) / (now - self._prev[1]))
        self._prev = (events, now)
        if progress is not None:
            self.history.append(rate)
        facts = self._facts(started, progress, now)
        # Fixed-size boxes: update without a layout pass (a layout re-lays out the whole screen).
        self._set("facts", facts, lambda v: self.query_one("#meter-facts", Static).update(v, layout=False))
        self._set("rate", f"{rate:.1f}", lambda v: self.query_one("#rate", Digits).update(v))
        if progress is not None:
            self._set("spark", tuple(self.history), lambda v: setattr(self.query_one("#spark", Sparkline), "data", list(v)))
        size = (progress.content_chars, progress.reasoning_chars) if progress is not None else None
        # The tail is the costliest part to draw (wrap + repaint of a large box): at most 4 times a
        # second, and always once more when the request is done.
        done = progress is None or progress.state == "done"
        if done or now - self._tail_at >= 0.25:
            before_tail = self.updates
            self._set("tail", size, lambda _v: self.query_one("#stream-tail", Static).update(self._tail(progress), layout=False))
            if self.updates != before_tail:
                self._tail_at = now
        if self.updates != before:
            self.frames += 1

    @staticmethod
    def _facts(started: Any | None, progress: Any | None, now: float) -> Text:
        text = Text()
        if started is None or progress is None:
            text.append("no request in flight", style="dim")
            return text
        acc = progress.acc
        sent = progress.t_sent_ns
        text.append(f"{started.model}\n", style="bold")
        what = "case " + started.prompt if started.phase == "case" else f"{started.phase} {started.prompt} #{started.repeat + 1}"
        text.append(f"{what}  [{progress.state}]\n")
        r_ns = acc.t_first_reasoning_ns if acc is not None else None
        c_ns = acc.t_first_content_ns if acc is not None else None
        if sent is not None and r_ns is None and c_ns is None:
            waited = time.perf_counter_ns() - sent
            text.append(f"waiting {waited / NS:.1f} s for the first token\n", style="yellow")
        else:
            text.append(f"TTFT reasoning {_secs(r_ns, sent)}\n")
            text.append(f"TTFT content   {_secs(c_ns, sent)}\n")
        text.append(f"token events {progress.token_events}")
        return text

    def _tail(self, progress: Any | None) -> Text:
        text = Text(no_wrap=False)
        if progress is None or progress.acc is None:
            return text
        acc = progress.acc
        content = acc.content
        room = self.TAIL_CHARS - min(len(content), self.TAIL_CHARS // 2)
        if acc.reasoning_chars:
            text.append(inert(tail(acc.reasoning, room)), style="dim italic")
            if content:
                text.append("\n")
        text.append(inert(tail(content, self.TAIL_CHARS - min(room, acc.reasoning_chars))))
        # Keep the newest lines visible: wrap to the box and keep as many lines as fit.
        box = self.query_one("#stream-tail", Static).content_size
        if box.width > 0 and box.height > 0:
            lines = text.wrap(self.app.console, box.width)
            if len(lines) > box.height:
                text = Text("\n").join(lines[-box.height:])
        return text
