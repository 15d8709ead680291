"""``forgetui report RUN... [--format md|json|csv] [-o FILE]``: load stored runs, render, write.

Thin: the data is ``report.build.build_report``; this only loads run.json documents by id and
writes the rendering to stdout or, atomically, to a file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from .errors import ConfigError, ExitCode

FORMATS = ("md", "json", "csv")


def render(report: dict[str, Any], fmt: str) -> str:
    """``report`` in ``fmt`` (md, json or csv); ConfigError (exit 2) for another format."""
    if fmt == "md":
        from .report.markdown import render_markdown

        return render_markdown(report)
    if fmt == "json":
        return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        from .report.csvout import render_csv

        return render_csv(report)
    raise ConfigError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")


def run_report(run_ids: list[str], fmt: str = "md", output: Path | None = None, out: TextIO | None = None) -> int:
    """Write the report of ``run_ids``; StorageError (exit 4) for an unknown run id."""
    from .paths import locations
    from .report.build import build_report
    from .store import RunStore, atomic_write_bytes

    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format {fmt!r}: use one of {', '.join(FORMATS)}")
    store = RunStore(locations().runs_dir)
    docs = [store.load_run(run_id) for run_id in run_ids]
    text = render(build_report(docs), fmt)
    if output is None:
        (out or sys.stdout).write(text)
    else:
        atomic_write_bytes(output, text.encode())
        print(f"Wrote {output}", file=sys.stderr)
    return int(ExitCode.OK)
