"""SVG snapshots of whole screens at a fixed size, without pytest-textual-snapshot (its pinned
syrupy needs pytest < 9). ``FORGETUI_UPDATE_SNAPSHOTS=1 pytest tests/test_tui_snapshots.py``
rewrites them; look at the SVGs (any browser) before committing. On a mismatch the actual SVG is
written next to the expected one as ``_actual/NAME.svg`` and the failure shows the text lines that
differ."""

from __future__ import annotations

import difflib
import html
import os
import re
from collections import defaultdict
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "snapshots"


def svg_text_lines(svg: str) -> list[str]:
    """The screen's text, row by row, from the SVG's positioned <text> elements."""
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows[float(m.group(2))].append((float(m.group(1)), html.unescape(m.group(3))))
    lines = []
    for y in sorted(rows):
        line = ""
        for x, text in sorted(rows[y]):
            line = line.ljust(int(round(x / 12.2))) + text
        lines.append(line.rstrip())
    return lines


def assert_snapshot(svg: str, name: str) -> None:
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("FORGETUI_UPDATE_SNAPSHOTS") == "1":
        path.write_text(svg)
        return
    if not path.exists():
        raise AssertionError(f"no snapshot {path}; create it with FORGETUI_UPDATE_SNAPSHOTS=1 and review it")
    expected = path.read_text()
    if svg == expected:
        return
    actual = SNAPSHOTS / "_actual" / path.name
    actual.parent.mkdir(exist_ok=True)
    actual.write_text(svg)
    diff = "\n".join(difflib.unified_diff(svg_text_lines(expected), svg_text_lines(svg), "expected", "actual",
                                          lineterm="", n=1))
    raise AssertionError(f"snapshot {name} differs (actual: {actual}); text diff:\n{diff or '(styles only)'}")
