"""Results: the stored runs, newest first; one run's summary per model; two runs or models side by side.

The list reads each run's small ``summary.json`` (``RunStore.list_summaries``), so it stays quick
with hundreds of runs; a run's full ``run.json`` (every raw request) is parsed only when the run is
highlighted. Both happen in thread workers that post messages; handlers own the state and drop
answers that arrive for a run no longer highlighted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable

from textual.app import ComposeResult
from textual.containers import Container, ScrollableContainer, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from ...errors import ForgetuiError
from ...report.compare import pick_models
from ...store import RunStore
from .. import keymap
from ..app import PaletteCommand
from .base import BaseScreen
from .runview import detail_text, run_row
from ..widgets.table import Table

#: A resumed screen re-lists at most this often (switching modes back and forth stays cheap).
RESUME_RELIST_S = 1.0
#: A highlighted run is loaded once the cursor rests this long (holding an arrow key parses nothing).
HIGHLIGHT_SETTLE_S = 0.12
#: Full run documents kept in memory (each can be megabytes).
DOC_CACHE = 4

COLUMNS = (("mark", ""), ("created", "created"), ("name", "name"), ("status", "status"),
           ("models", "models"), ("cases", "cases p/f/e"), ("requests", "requests ok"))


class RunsListed(Message):
    """The thread worker read every run's summary (or failed to)."""

    def __init__(self, summaries: list[dict[str, Any]], error: str | None) -> None:
        super().__init__()
        self.summaries = summaries
        self.error = error


class DocsLoaded(Message):
    """Full run documents for ``purpose`` ("detail", "compare", "failures")."""

    def __init__(self, purpose: str, run_ids: list[str], docs: dict[str, dict], error: str | None) -> None:
        super().__init__()
        self.purpose = purpose
        self.run_ids = run_ids
        self.docs = docs
        self.error = error


class ResultsScreen(BaseScreen):
    MODE = "results"
    BINDINGS = keymap.bindings("results")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    DEFAULT_CSS = """
    ResultsScreen #results-body { layout: vertical; height: 1fr; }
    ResultsScreen.-wide #results-body { layout: horizontal; }
    ResultsScreen #runs-pane { height: 45%; }
    ResultsScreen.-wide #runs-pane { height: 1fr; width: 45%; }
    ResultsScreen #runs-status { height: 1; color: $text-muted; }
    ResultsScreen #runs { height: 1fr; }
    ResultsScreen #detail-pane { height: 1fr; }
    ResultsScreen.-wide #detail-pane { width: 1fr; }
    ResultsScreen #detail { width: auto; }
    """
    HELP = """\
# Results

Every stored run, newest first (from the run store; `forgetui locate runs` shows where).
Move through the list with the arrow keys: the pane beside (or below) it shows the highlighted
run: its header (status, profile, forgetui version, case-set revision, sandbox), then per model
the cases by category (pass / fail / error / skipped and pass %, skipped cases not counted), the
quick set's scores, every case that did not pass with its reason, and the speed table
(TTFT median and p95, median decode tok/s, prefill, flags; see `docs/metrics.md`).

- **space** marks a run (A, then B; marking a third drops the oldest mark).
- **c** compares the two marked runs (the first model both share, else each run's first model),
  or, with one run marked or highlighted that has two or more models, its first two models.
- **f** opens the failure inspector for the highlighted run.
- **g** charts pass rate against decode rate for every model (its newest run), Pareto front marked.
- **enter** moves the focus to the run's summary, to scroll it; **F5** or **u** re-reads the list.
"""

    def __init__(self) -> None:
        super().__init__()
        self.summaries: list[dict[str, Any]] = []
        #: Marked run ids, oldest mark first (A, B).
        self.marked: list[str] = []
        #: The run the detail pane shows, or is loading.
        self.wanted: str | None = None
        self.shown: str | None = None
        self.list_error: str | None = None
        self.docs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._listed_at = float("-inf")
        self._listing = False
        self._settle: Timer | None = None
        self._resume: Timer | None = None

    def compose_body(self) -> ComposeResult:
        with Container(id="results-body"):
            with Vertical(id="runs-pane", classes="pane"):
                yield Static("Reading the run store...", id="runs-status", markup=False)
                yield Table(id="runs", cursor_type="row", zebra_stripes=True)
            with ScrollableContainer(id="detail-pane", classes="pane"):
                yield Static("", id="detail", markup=False)

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    @property
    def store(self) -> RunStore:
        return RunStore(self.app.locations.runs_dir)  # type: ignore[attr-defined]

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.table.add_column(label, key=key)
        self.refresh_runs()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self._resume is not None:
            self._resume.stop()
        self._resume = self.set_timer(0.2, self._relist_if_stale)

    def _relist_if_stale(self) -> None:
        if self.is_current and time.monotonic() - self._listed_at >= RESUME_RELIST_S:
            self.refresh_runs()

    # ----------------------------------------------------------------- listing
    def refresh_runs(self) -> None:
        """Re-read every run's summary in a thread; the table keeps the cursor on the same run."""
        if self._listing:
            return
        self._listing = True
        store = self.store

        def work() -> None:
            try:
                summaries, error = store.list_summaries(), None
            except ForgetuiError as exc:
                summaries, error = [], exc.message
            self.post_message(RunsListed(summaries, error))

        self.run_worker(work, thread=True, group="list", exit_on_error=False)

    def on_runs_listed(self, message: RunsListed) -> None:
        self._listing = False
        self._listed_at = time.monotonic()
        self.summaries = message.summaries
        self.list_error = message.error
        ids = [s["run_id"] for s in self.summaries]
        self.marked = [r for r in self.marked if r in ids]
        # A cached document of a run that changed since (a run that was still going) is stale.
        updated = {s["run_id"]: s.get("updated_at") for s in self.summaries}
        for run_id in [r for r, doc in self.docs.items() if updated.get(r, object()) != doc.get("updated_at")]:
            del self.docs[run_id]
            if run_id == self.wanted:
                self.wanted = None
        keep = self.current_run_id()
        table = self.table
        table.clear()
        for summary in self.summaries:
            table.add_row(self._mark(summary["run_id"]), *run_row(summary), key=summary["run_id"])
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)
        self._update_status()
        if not self.summaries:
            self.wanted = self.shown = None
            self._set_detail("No runs are stored yet. Start one from Models (1) or with "
                             "`forgetui --run PROFILE`; finished and interrupted runs appear here.")
        else:
            self._highlight(self.current_run_id(), settle=False)

    def _update_status(self) -> None:
        status = self.query_one("#runs-status", Static)
        if self.list_error:
            status.update(f"Cannot list runs: {self.list_error}")
        elif not self.summaries:
            status.update(f"No runs yet (in {self.store.runs_dir}).")
        else:
            marks = "   marked: " + ", ".join(f"{'AB'[i]} {r}" for i, r in enumerate(self.marked)) if self.marked else ""
            status.update(f"{len(self.summaries)} runs, newest first{marks}")

    def _mark(self, run_id: str) -> str:
        return "AB"[self.marked.index(run_id)] if run_id in self.marked else ""

    def current_run_id(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return row_key.value

    def summary_of(self, run_id: str | None) -> dict[str, Any] | None:
        return next((s for s in self.summaries if s["run_id"] == run_id), None)

    # ------------------------------------------------------------------ detail
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._highlight(event.row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_run()

    def _highlight(self, run_id: str | None, settle: bool = True) -> None:
        if run_id is None or run_id == self.wanted:
            return
        self.wanted = run_id
        if self._settle is not None:
            self._settle.stop()
        if run_id in self.docs:
            self._show(run_id, self.docs[run_id])
            return
        self._set_detail(f"Loading {run_id} ...")
        if settle:
            self._settle = self.set_timer(HIGHLIGHT_SETTLE_S, lambda: self._load_detail(run_id))
        else:
            self._load_detail(run_id)

    def _load_detail(self, run_id: str) -> None:
        if run_id == self.wanted:
            self.load_docs("detail", [run_id], exclusive=True)

    def load_docs(self, purpose: str, run_ids: list[str], exclusive: bool = False) -> None:
        """Load full run documents in a thread; ``DocsLoaded`` brings them back."""
        store = self.store

        def work() -> None:
            worker = get_current_worker()
            docs: dict[str, dict] = {}
            error = None
            for run_id in run_ids:
                if worker.is_cancelled:
                    return
                try:
                    docs[run_id] = store.load_run(run_id)
                except ForgetuiError as exc:
                    error = exc.message
                    break
            if not worker.is_cancelled:
                self.post_message(DocsLoaded(purpose, run_ids, docs, error))

        self.run_worker(work, thread=True, group=purpose, exclusive=exclusive, exit_on_error=False)

    def on_docs_loaded(self, message: DocsLoaded) -> None:
        for run_id, doc in message.docs.items():
            self.docs[run_id] = doc
            self.docs.move_to_end(run_id)
        while len(self.docs) > DOC_CACHE:
            self.docs.popitem(last=False)
        if message.purpose == "detail":
            run_id = message.run_ids[0]
            if run_id != self.wanted:
                return  # the cursor moved on while this one was parsed
            if message.error:
                self.shown = None
                self._set_detail(f"Cannot read run {run_id}: {message.error}")
            else:
                self._show(run_id, message.docs[run_id])
            return
        if message.error:
            self.notify(message.error, title="Cannot read the run", severity="error")
            return
        docs = [message.docs[r] for r in message.run_ids]
        if message.purpose == "compare":
            self._open_compare(docs)
        elif message.purpose == "failures":
            self._open_failures(docs[0])

    def _show(self, run_id: str, doc: dict[str, Any]) -> None:
        self.shown = run_id
        self._set_detail(detail_text({"run_id": run_id, **doc}))

    def _set_detail(self, text: str) -> None:
        self.query_one("#detail", Static).update(text)

    def detail_text(self) -> str:
        """What the detail pane shows now (for tests and copy)."""
        return str(self.query_one("#detail", Static).content)

    def _with_docs(self, purpose: str, run_ids: list[str], then: Callable[[list[dict]], None]) -> None:
        if all(r in self.docs for r in run_ids):
            then([self.docs[r] for r in run_ids])
        else:
            self.notify("Reading the run ...", timeout=2)
            self.load_docs(purpose, run_ids)

    # ----------------------------------------------------------------- actions
    def action_refresh(self) -> None:
        self.refresh_runs()

    def action_open_run(self) -> None:
        self.query_one("#detail-pane").focus()

    def action_mark_run(self) -> None:
        run_id = self.current_run_id()
        if run_id is None:
            return
        before = list(self.marked)
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked.append(run_id)
            if len(self.marked) > 2:
                dropped = self.marked.pop(0)
                self.notify(f"Two runs at most: unmarked {dropped}.", timeout=3)
        for changed in set(before) | set(self.marked):
            if changed in (s["run_id"] for s in self.summaries):
                self.table.update_cell(changed, "mark", self._mark(changed))
        self._update_status()

    def action_compare(self) -> None:
        if len(self.marked) == 2:
            self._with_docs("compare", list(self.marked), self._open_compare)
            return
        run_id = self.marked[0] if self.marked else self.current_run_id()
        summary = self.summary_of(run_id)
        if summary is None or len(summary.get("targets") or []) < 2:
            self.notify("Mark two runs with space, or pick a run with two or more models, then press c.",
                        title="Nothing to compare", severity="warning")
            return
        assert run_id is not None
        self._with_docs("compare", [run_id], self._open_compare)

    def _open_compare(self, docs: list[dict[str, Any]]) -> None:
        from .compare import CompareScreen

        if len(docs) == 2:
            doc_a, doc_b = docs
            model_a, model_b = pick_models(doc_a, doc_b)
        else:
            doc_a = doc_b = docs[0]
            labels = [m.get("model") for m in doc_a.get("models") or []]
            model_a, model_b = (labels + [None, None])[:2]
        if model_a is None or model_b is None:
            self.notify("One of the runs has no model results.", title="Nothing to compare", severity="warning")
            return
        self.app.push_screen(CompareScreen(doc_a, model_a, doc_b, model_b))

    def action_open_failures(self) -> None:
        run_id = self.current_run_id()
        if run_id is None:
            self.notify("No run to inspect.", severity="warning")
            return
        self._with_docs("failures", [run_id], lambda docs: self._open_failures(docs[0]))

    def _open_failures(self, doc: dict[str, Any]) -> None:
        try:
            from .failures import FailuresScreen
        except ImportError as exc:
            self.notify(f"The failure inspector is not available ({exc}).", title="Failures",
                        severity="warning")
            return
        self.app.push_screen(FailuresScreen(doc))

    def action_chart(self) -> None:
        from .chart import ChartScreen

        self.app.push_screen(ChartScreen(self.summaries))

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand("Results: pass rate against speed", "Every model's newest run, Pareto front marked",
                           self.action_chart),
            PaletteCommand("Results: compare marked runs", "Two marked runs, or the first two models of one run",
                           self.action_compare),
            PaletteCommand("Results: refresh", "Re-read the list of stored runs", self.action_refresh),
            PaletteCommand("Results: open failures of selected run", "The failure inspector for the highlighted run",
                           self.action_open_failures),
        ]
