"""DataTable with one fix for Textual 8.2.8."""

from __future__ import annotations

from typing import Iterable

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class Table(DataTable):
    """A DataTable that never keeps drawings made before its column widths were measured.

    Textual 8.2.8 measures new rows on idle (``_update_dimensions``) but keeps row renders cached
    from before, keyed without the widths; a row drawn in between stays drawn with header-only
    widths (``fake/`` for ``fake/m1``) until something else changes. The tmux smoke test caught it
    about one run in five under load. Clearing the render cache after each measurement fixes it.
    """

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self._clear_caches()
        self.refresh()
