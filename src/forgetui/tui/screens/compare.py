"""Two models side by side (two runs, or two models of one run), pushed over Results; escape goes back.

The numbers come from ``forgetui.report.compare.compare_models``; this screen only lays them out.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Container, ScrollableContainer, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ...report.compare import compare_models
from .. import keymap
from .runview import compare_lines, local_time
from ..widgets.table import Table


def header_lines(result: dict[str, Any]) -> list[str]:
    """Which model of which run is A and B, the case set, and any warning."""
    lines = [f"{tag}: {side['model']}   {side['name'] or '-'}, {local_time(side['created_at'])}, run {side['run_id']}"
             for tag, side in (("A", result["a"]), ("B", result["b"]))]
    if not result["revision_mismatch"]:
        lines.append(f"case set {result['a']['case_set_revision'] or 'none'} for both")
    if "paired" in result:
        lines.append(f"Verdict: {result['paired']['verdict_line']}")
    return lines + [f"WARNING: {w}" for w in result["warnings"]]


class CompareScreen(Screen):
    BINDINGS = keymap.bindings("compare")
    KEY_SCOPE = "compare"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    DEFAULT_CSS = """
    CompareScreen #compare-header { height: auto; padding: 0 1; background: $panel; }
    CompareScreen #compare-header.-warn { background: $warning 30%; }
    CompareScreen #compare-body { layout: vertical; height: 1fr; }
    CompareScreen.-wide #compare-body { layout: horizontal; }
    CompareScreen #compare-summary { height: 1fr; }
    CompareScreen.-wide #compare-summary { width: 1fr; }
    CompareScreen #compare-numbers { width: auto; }
    CompareScreen #diff-pane { height: 1fr; }
    CompareScreen.-wide #diff-pane { width: 1fr; }
    CompareScreen #diff-title { height: 1; color: $text-muted; }
    CompareScreen #diff { height: 1fr; }
    """
    HELP = """\
# Compare

Model A against model B: from two marked runs, or the first two models of one run.

- **Cases passed** per category: passed / graded and the pass rate; skipped cases (no sandbox,
  no judge) are not counted.
- **Speed**: medians of the clean measured requests per prompt and over all prompts (warm-ups
  and the prefill baseline excluded), with the ratio B / A (above 1: B decodes faster, or B's
  TTFT is longer).
- **Cases that differ**: every case whose status differs between A and B, or that only one has.

A warning in the header means the runs used different case-set revisions: a case id may then
name a changed case. The **Verdict** line is McNemar's exact test on the cases both answered
(pass or fail on both sides): "indistinguishable at this sample size" means the difference can be
chance (docs/reports.md, "Compare").
**escape** goes back to Results.
"""

    def __init__(self, doc_a: dict[str, Any], model_a: str, doc_b: dict[str, Any], model_b: str) -> None:
        super().__init__()
        self.result = compare_models(doc_a, model_a, doc_b, model_b)

    def compose(self) -> ComposeResult:
        result = self.result
        yield Static("\n".join(header_lines(result)), id="compare-header", markup=False,
                     classes="-warn" if result["warnings"] else "")
        with Container(id="compare-body"):
            with ScrollableContainer(id="compare-summary", classes="pane"):
                yield Static("\n".join(compare_lines(result)), id="compare-numbers", markup=False)
            with Vertical(id="diff-pane", classes="pane"):
                n = len(result["differing"])
                title = (f"{n} case{'s' if n != 1 else ''} differ ({result['common_cases']} in both)"
                         if n else f"No case differs ({result['common_cases']} in both)")
                yield Static(title, id="diff-title", markup=False)
                yield Table(id="diff", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#diff", DataTable)
        table.add_columns("case", "category", "A", "B")
        for row in self.result["differing"]:
            table.add_row(str(row["case_id"]), str(row["category"] or "-"), row["a"] or "(absent)",
                          row["b"] or "(absent)", key=str(row["case_id"]))
        table.focus()

    def text(self) -> str:
        """Everything the screen says, as plain text (for tests and copying)."""
        parts = [str(self.query_one("#compare-header", Static).content),
                 str(self.query_one("#compare-numbers", Static).content),
                 str(self.query_one("#diff-title", Static).content)]
        table = self.query_one("#diff", DataTable)
        parts += ["  ".join(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]
        return "\n".join(parts)

    def action_back(self) -> None:
        self.app.pop_screen()
