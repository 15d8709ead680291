"""Pass rate against decode rate for every model of the stored runs (its newest run with both), the
Pareto front marked: the TUI's view of "which model for which job". Static: drawn once when opened
(from summary.json), never per token."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from ...report.chart import Point, pareto_front, text_chart
from ...report.stats import interval_text, rate_text
from .. import keymap


def chart_points(summaries: list[dict[str, Any]]) -> tuple[list[Point], dict[str, str]]:
    """One point per model: its newest run (summaries are newest first) that has both cases and a
    decode rate. Also a note per model: its counts, interval and run id."""
    points: dict[str, Point] = {}
    notes: dict[str, str] = {}
    for summary in summaries:
        for model in summary.get("models") or []:
            label = model.get("model")
            cases = model.get("cases_summary") or {}
            speed = model.get("speed") or {}
            passed, failed = cases.get("passed") or 0, cases.get("failed") or 0
            if not label or label in points or passed + failed == 0 or not speed.get("decode_tps"):
                continue
            points[label] = Point(label, float(speed["decode_tps"]), passed / (passed + failed))
            notes[label] = (f"{rate_text(passed, passed + failed)} {interval_text(passed, passed + failed)}, "
                            f"run {summary.get('run_id')}")
    return list(points.values()), notes


class ChartScreen(Screen):
    """Pushed over Results with the run summaries it already has."""

    KEY_SCOPE = "compare"
    BINDINGS = keymap.bindings("compare")
    HELP = """
# Pass rate against speed

Each model once, from its newest stored run that has both ability cases and a speed benchmark:
pass rate = passed / (passed + failed) (errors and skipped cases are not the model's fault and are
left out), with the 95% Wilson interval, against the median decode rate. A `*` marks the Pareto
front: the models no other model beats on both axes. A model off the front is slower *and* no
better than one on it. Runs with different case sets are not comparable: look at the run ids.
"""
    DEFAULT_CSS = """
    ChartScreen #chart-body { padding: 0 1; }
    """

    def __init__(self, summaries: list[dict[str, Any]]) -> None:
        super().__init__()
        self.points, self.notes = chart_points(summaries)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="chart-body"):
            yield Static(self.text(), id="chart", markup=False)
        yield Footer()

    def text(self) -> str:
        if not self.points:
            return ("No stored run has a model with both ability cases and a speed benchmark yet.\n"
                    "Run a profile with [speed] and [cases] (Models screen, run kind \"speed + quick cases\").")
        width = max(30, min(100, (self.app.size.width if self.is_attached else 100) - 12))
        lines = ["Pass rate against decode rate (newest run per model)", "", text_chart(self.points, width=width)]
        lines += ["", "Counts and 95% intervals:"]
        front = {p.label for p in pareto_front(self.points)}
        for p in sorted(self.points, key=lambda p: (-p.score, -p.speed)):
            lines.append(f"  {p.label}: {self.notes[p.label]}{'  (Pareto front)' if p.label in front else ''}")
        return "\n".join(lines)

    def action_back(self) -> None:
        self.app.pop_screen()
