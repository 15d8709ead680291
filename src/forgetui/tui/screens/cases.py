"""The case browser: every case of the library in a table, filtered by text, category, difficulty
and tag; the highlighted case's prompt, grader and reference answer beside it (below it when the
terminal is narrow).

The library is loaded once, in a thread, when the screen first mounts. Filtering is a pure
function (:func:`filter_cases`) over a lower-cased search text prepared per case at load time;
the table is rebuilt in one batch only when the set of shown cases changes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Iterable, NamedTuple, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from ...cases.commands import show_text
from ...cases.loader import CaseLibrary, library_dirs, load_library
from ...cases.schema import CATEGORIES, Case
from .. import keymap
from ..app import PaletteCommand
from .base import BaseScreen
from ..widgets.table import Table

DIFFICULTIES = (None, "hard", "standard")
#: Longer prompt messages are shown as start + end (long-context cases run to ~100k characters,
#: which would take a quarter second to lay out on every cursor move).
MAX_MESSAGE_CHARS = 12_000


def difficulty_of(case: Case) -> str:
    return "hard" if case.hard else "standard"


def search_text(case: Case) -> str:
    """What free words of the filter look in: id, title, tags and every prompt message."""
    parts = [case.id, case.title, " ".join(case.tags)]
    parts += [m.get("content") or "" for m in case.chat_messages()]
    return "\n".join(parts).lower()


class FilterQuery(NamedTuple):
    words: list[str]
    categories: list[str]
    tags: list[str]
    sets: list[str]
    difficulty: str | None


def parse_filter(text: str) -> FilterQuery:
    """Split filter text into free words and tokens: ``cat:X`` (or ``category:X``), ``tag:X``,
    ``set:X`` (a named set such as ``quick``), ``hard``, ``easy``/``standard``."""
    query = FilterQuery([], [], [], [], None)
    difficulty: str | None = None
    for token in text.lower().split():
        name, _, value = token.partition(":")
        if value and name in ("cat", "category"):
            query.categories.append(value)
        elif value and name == "tag":
            query.tags.append(value)
        elif value and name == "set":
            query.sets.append(value)
        elif token == "hard":
            difficulty = "hard"
        elif token in ("easy", "standard"):
            difficulty = "standard"
        elif token not in ("cat:", "category:", "tag:", "set:"):  # half-typed tokens match all
            query.words.append(token)
    return query._replace(difficulty=difficulty)


def filter_cases(cases: Sequence[Case], text: str = "", category: str | None = None,
                 difficulty: str | None = None, haystacks: dict[str, str] | None = None) -> list[Case]:
    """The cases that match every condition (AND), in library order.

    ``text`` holds free words (substring of id, title, tags or prompt, case-insensitive) and the
    tokens of :func:`parse_filter`; ``category`` and ``difficulty`` ("hard"/"standard") come
    from the screen's cycling keys. ``haystacks`` (id -> :func:`search_text`) saves recomputing.
    """
    query = parse_filter(text)
    wanted_difficulties = {d for d in (difficulty, query.difficulty) if d}
    out = []
    for case in cases:
        if category is not None and case.category != category:
            continue
        if any(case.category != c for c in query.categories):
            continue
        if any(difficulty_of(case) != d for d in wanted_difficulties):
            continue
        if query.tags:
            own = {t.lower() for t in case.tags}
            if not all(t in own for t in query.tags):
                continue
        if query.sets and not all(s in case.in_sets() for s in query.sets):
            continue
        if query.words:
            hay = haystacks.get(case.id) if haystacks is not None else None
            if hay is None:
                hay = search_text(case)
            if not all(w in hay for w in query.words):
                continue
        out.append(case)
    return out


def detail_text(case: Case) -> str:
    """The detail pane: the title, then exactly what ``forgetui cases show`` prints, then the
    reference tool calls of a tool case (``cases show`` leaves them out)."""
    parts = [case.title] if case.title else []
    parts.append(show_text(case, MAX_MESSAGE_CHARS))
    if case.verify.reference_calls is not None:
        parts.append("\n--- reference tool calls ---\n"
                     + json.dumps(case.verify.reference_calls, indent=2, ensure_ascii=False))
    return "\n".join(parts)


class CasesScreen(BaseScreen):
    MODE = "cases"
    BINDINGS = keymap.bindings("cases")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    HELP = """
# Cases

Every case of the library (the built-in one plus the `case_dirs` of your config). The table
lists id, category, difficulty, grader kind and tags; the pane beside it (below it in a narrow
terminal) shows the highlighted case: its prompt (every chat message), the grader with its
parameters and the reference answer, as `forgetui cases show ID` prints them.

## Filters

All filters hold at once (AND); the line above the table says which are active and how many
cases are shown.

- `/` puts the cursor in the filter box. Free words match the id, title, tags and prompt text
  (case-insensitive). Tokens:
  - `cat:coding` - one category (`category:coding` works too)
  - `tag:python` - cases with that tag (repeat for several tags)
  - `set:quick` - cases of a named set (as a profile's `[cases] select` names them)
  - `hard`, `easy` (or `standard`) - difficulty
  - for example: `cat:math hard prime`
- `enter` in the filter box goes back to the table.
- `c` cycles the category: all, then each category, then all again.
- `d` cycles the difficulty: all, hard, standard.
- `esc` clears every filter.

The command palette (`ctrl+p`) also offers *Cases: filter by category ...* and
*Cases: clear filters*.
"""
    DEFAULT_CSS = """
    CasesScreen #cases-body { height: 1fr; layout: vertical; }
    CasesScreen.-wide #cases-body { layout: horizontal; }
    CasesScreen #cases-left { height: 1fr; }
    CasesScreen.-wide #cases-left { width: 55%; height: 1fr; }
    CasesScreen #cases-filter { border: none; height: 1; padding: 0 1; background: $boost; }
    CasesScreen #cases-filter:focus { background: $primary 20%; }
    CasesScreen #cases-status { height: 1; padding: 0 1; color: $text-muted; }
    CasesScreen #cases-table { height: 1fr; }
    CasesScreen #cases-detail-pane { height: 1fr; }
    CasesScreen.-wide #cases-detail-pane { width: 1fr; height: 1fr; }
    CasesScreen #cases-detail { width: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.library: CaseLibrary | None = None
        self.category: str | None = None
        self.difficulty: str | None = None
        #: The cases in the table, in table order.
        self.shown: list[Case] = []
        #: The id of the case in the detail pane.
        self.detail_id: str | None = None
        self._haystacks: dict[str, str] = {}
        #: Table cells per case id, built once: Text (no markup parsing, cheap to measure).
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._categories: list[str] = []

    # ----------------------------------------------------------------- layout
    def compose_body(self) -> ComposeResult:
        with Vertical(id="cases-body"):
            with Vertical(id="cases-left"):
                yield Input(placeholder="filter: words, cat:coding, tag:python, set:quick, hard, easy",
                            id="cases-filter")
                yield Static("loading the case library...", id="cases-status", markup=False)
                yield Table(id="cases-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="cases-detail-pane", classes="pane"):
                yield Static("", id="cases-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#cases-table", DataTable)
        table.add_column("id", key="id")
        table.add_column("category", key="category")
        table.add_column("difficulty", key="difficulty")
        table.add_column("grader", key="grader")
        table.add_column("tags", key="tags")
        self.query_one("#cases-detail-pane").border_title = "case"
        table.focus()
        self.run_worker(self._load(), name="cases-load", group="cases-load", exclusive=True)

    async def _load(self) -> None:
        config = getattr(self.app, "config", None)
        try:
            library = await asyncio.to_thread(load_library, library_dirs(config))
        except Exception as exc:  # noqa: BLE001 - shown, the screen stays usable
            self.query_one("#cases-status", Static).update(f"cannot load the case library: {exc}")
            self.notify(f"{type(exc).__name__}: {exc}", title="Case library", severity="error")
            return
        self.set_library(library)

    def set_library(self, library: CaseLibrary) -> None:
        """Show a loaded library (the loader calls this; tests may too)."""
        self.library = library
        self._haystacks = {c.id: search_text(c) for c in library.cases}
        self._cells = {c.id: (Text(c.id), Text(c.category), Text(difficulty_of(c)), Text(c.grader_kind),
                              Text(", ".join(c.tags))) for c in library.cases}
        present = {c.category for c in library.cases}
        self._categories = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
        if library.problems:
            self.notify("\n".join(library.problems[:5]) + ("\n..." if len(library.problems) > 5 else ""),
                        title=f"{len(library.problems)} problem(s) in case files", severity="warning",
                        timeout=10)
        self.apply_filter(force=True)

    # ---------------------------------------------------------------- filter
    @property
    def filter_text(self) -> str:
        return self.query_one("#cases-filter", Input).value

    def apply_filter(self, force: bool = False) -> None:
        """Recompute the shown cases; rebuild the table only when they changed."""
        if self.library is None:
            return
        found = filter_cases(self.library.cases, self.filter_text, self.category, self.difficulty,
                             self._haystacks)
        changed = force or [c.id for c in found] != [c.id for c in self.shown]
        if changed:
            self._rebuild(found)
        self._update_status()
        if changed:
            self._show_highlighted()

    def _rebuild(self, found: list[Case]) -> None:
        table = self.query_one("#cases-table", DataTable)
        current = self.detail_id
        self.shown = found
        table.clear()
        table.add_rows([self._cells[c.id] for c in found])
        index = next((i for i, c in enumerate(found) if c.id == current), 0)
        if found:
            table.move_cursor(row=index, animate=False, scroll=True)

    def _update_status(self) -> None:
        total = len(self.library.cases) if self.library is not None else 0
        active = []
        if self.category is not None:
            active.append(f"category {self.category}")
        if self.difficulty is not None:
            active.append(self.difficulty)
        text = self.filter_text.strip()
        if text:
            active.append(f'"{text}"')
        line = f"{len(self.shown)} of {total} cases"
        line += "   " + (" + ".join(active) if active else "no filters")
        if not active:
            keys = [(self._key("cases.filter"), "text"), (self._key("cases.category"), "category"),
                    (self._key("cases.difficulty"), "difficulty")]
            line += " (" + ", ".join(f"{k} {what}" for k, what in keys) + ")"
        else:
            line += f"   ({self._key('cases.clear')} clears)"
        if self.library is not None and self.library.problems:
            line += f"   {len(self.library.problems)} problem(s) in case files"
        self.query_one("#cases-status", Static).update(line)

    def _key(self, binding_id: str) -> str:
        key_for = getattr(self.app, "key_for", None)
        if key_for is not None:
            try:
                return key_for(binding_id)
            except Exception:  # noqa: BLE001 - a label only
                pass
        return keymap.display_keys(keymap.all_specs()[binding_id].keys.split(",")[0])

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "cases-filter":
            self.apply_filter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "cases-filter":
            self.query_one("#cases-table", DataTable).focus()

    # ---------------------------------------------------------------- detail
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "cases-table":
            self._show_highlighted()

    def _show_highlighted(self) -> None:
        table = self.query_one("#cases-table", DataTable)
        row = table.cursor_row
        case = self.shown[row] if self.shown and 0 <= row < len(self.shown) else None
        self.show_case(case)

    def show_case(self, case: Case | None) -> None:
        """Put one case in the detail pane (nothing is done when it is already there)."""
        new_id = case.id if case is not None else None
        if new_id == self.detail_id and case is not None:
            return
        self.detail_id = new_id
        detail = self.query_one("#cases-detail", Static)
        pane = self.query_one("#cases-detail-pane", VerticalScroll)
        if case is None:
            detail.update("no case matches the filters" if self.library is not None else "")
            pane.border_title = "case"
        else:
            detail.update(detail_text(case))
            pane.border_title = case.id
        pane.scroll_home(animate=False)

    @property
    def detail_plain(self) -> str:
        """The detail pane's text (for tests and copy)."""
        return str(self.query_one("#cases-detail", Static).content)

    # --------------------------------------------------------------- actions
    def action_focus_filter(self) -> None:
        self.query_one("#cases-filter", Input).focus()

    def action_cycle_category(self) -> None:
        options: list[str | None] = [None, *self._categories]
        at = options.index(self.category) if self.category in options else 0
        self.set_category(options[(at + 1) % len(options)])

    def set_category(self, category: str | None) -> None:
        self.category = category
        self.apply_filter()

    def action_cycle_difficulty(self) -> None:
        at = DIFFICULTIES.index(self.difficulty) if self.difficulty in DIFFICULTIES else 0
        self.difficulty = DIFFICULTIES[(at + 1) % len(DIFFICULTIES)]
        self.apply_filter()

    def action_clear_filter(self) -> None:
        self.category = None
        self.difficulty = None
        box = self.query_one("#cases-filter", Input)
        if box.value:
            box.value = ""  # posts Input.Changed; apply_filter below makes it a no-op
        self.apply_filter()
        self.query_one("#cases-table", DataTable).focus()

    def palette_commands(self) -> Iterable[PaletteCommand]:
        categories = self._categories or list(CATEGORIES)
        commands = [PaletteCommand(f"Cases: filter by category {c}", f"Show only the {c} cases",
                                   lambda c=c: self.set_category(c)) for c in categories]
        commands.append(PaletteCommand("Cases: clear filters", "Show every case of the library",
                                       self.action_clear_filter))
        return commands
