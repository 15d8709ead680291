"""``forgetui recover RUN``: re-run the rows of a stored run that ended empty, truncated or in a
request failure, merge them into the run, and say what changed (engine/recover.py has the rules).

The run's own stored profile is used (providers inline, or by name from the current config), and
the same case library revision: a library that changed since the run is refused, as for resume.
Progress goes to stderr like a headless run; stdout gets one line per re-run row (before -> after),
the summary table, and the run directory. Exit code as for a run: 0 ok, 1 failures remain.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO


from .config import load_config
from .engine.events import Notice
from .engine.repeats import as_attempt
from .engine.recover import RecoverRunner, rows_to_recover, targets_from_document
from .errors import ConfigError
from .headless import ProgressPrinter, _drive, make_sandbox, run_judge
from .paths import locations
from .profile import resolve_targets, stored_profile
from .report.summary import summary_table
from .store import RunStore


def _status(case: dict[str, Any]) -> str:
    return f"{case.get('status')} ({case.get('reason')})"


def run_recover(run_id: str, allow_unsandboxed: bool = False, stdout: TextIO | None = None,
                stderr: TextIO | None = None) -> int:
    """Recover one stored run; returns the process exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    loc = locations()
    config = load_config(loc.config_file)
    handle = RunStore(loc.runs_dir).open(run_id)
    try:
        doc = handle.read_run_json()
        profile = stored_profile(doc, run_id, "recovered")
        try:
            targets = resolve_targets(profile, config)
        except ConfigError as exc:
            raise ConfigError(f"run {run_id} (stored profile, providers from {loc.config_file}): "
                              f"{exc.message}") from exc
        meta = {k: v for k, v in doc.items() if k not in ("models", "totals", "updated_at")}
        meta["targets"] = targets_from_document(doc)
        printer = ProgressPrinter(stderr)
        rows = rows_to_recover(handle.records)
        chosen: dict[str, list[Any]] = {}
        if rows:
            from .cases.loader import library_dirs, load_library

            library = load_library(library_dirs(config))
            stored_rev = doc.get("fingerprint", {}).get("case_set_revision")
            if stored_rev not in (None, library.revision):
                raise ConfigError(f"run {run_id} was run with case-set revision {stored_rev}, the library is "
                                  f"now {library.revision}: recover needs the same cases")
            labels = {t.label for t in targets}
            for row in rows:
                case = library.by_id(row.case_id)
                if case is None or row.model not in labels:
                    printer(Notice("warning", f"{row.model} {row.case_id}: no longer in the library or the "
                                   "profile; not re-run", row.model))
                    continue
                chosen.setdefault(row.model, []).append(as_attempt(case, row.repeat))
        asked = [r for r in rows if any(c.id == r.case_id for c in chosen.get(r.model, []))]
        if not asked:
            print(f"Nothing to recover in run {run_id}: no row ended empty, truncated or in a request failure.",
                  file=stdout)
        else:
            print(f"Recovering {len(asked)} row(s) of run {run_id}:", file=stdout)
            for row in asked:
                print(f"  {row.model} {row.case_id}: {row.why}", file=stdout)
        scratch: dict[str, Any] = {"fingerprint": {}}
        sandbox = make_sandbox([c for cases in chosen.values() for c in cases], allow_unsandboxed, scratch, printer)
        judge = run_judge(profile)
        runner = RecoverRunner(profile, targets, handle, meta, chosen, [printer], sandbox=sandbox,
                               sandbox_state=scratch["fingerprint"].get("sandbox"), judge=judge)
        if not asked:
            return int(runner._exit_code(runner.document()))
        finished = asyncio.run(_drive(runner, printer))
    finally:
        handle.close()
    after = {(m["model"], c["case_id"]): c for m in finished.document["models"] for c in m.get("cases", [])}
    print("Before -> after:", file=stdout)
    for row in asked:
        new = after.get((row.model, row.case_id), {})
        print(f"  {row.model} {row.case_id}: {_status(row.before)} -> {_status(new)}", file=stdout)
    print(summary_table(finished.document), file=stdout)
    if judge is None and any(c.grader_kind == "judge" for cases in chosen.values() for c in cases):
        print(f"Judged rows were asked again without a judge: run 'forgetui judge {run_id}' to judge them.",
              file=stdout)
    if finished.status == "interrupted":
        print(f"Interrupted. Run 'forgetui recover {run_id}' again for the rows not asked yet.", file=stdout)
    print(f"Run directory: {finished.run_dir}", file=stdout)
    print(f"Results saved: {Path(finished.run_dir) / 'run.json'}", file=stdout, flush=True)
    return finished.exit_code
