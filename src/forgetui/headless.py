"""``forgetui --run profile.toml``: the same engine run with no TUI.

Progress goes to stderr (a live line when stderr is a terminal, one line per request otherwise),
the summary table to stdout, and the last line is ``Results saved: <run dir>``. Ctrl-C (or SIGTERM)
stops the run cleanly: the request in flight is cancelled (its connection closed), finished records
are already on disk, ``run.json`` says ``interrupted``, and the exit code is 130. A second Ctrl-C
exits at once; the records are still consistent because each one is fsynced as it completes.
"""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .config import load_config
from .engine.events import (CaseFinished, ModelFinished, Notice, RequestFinished, RequestStarted,
                            RunFinished, RunStarted)
from .engine.metrics import NS
from .engine.rundoc import SCHEMA_VERSION, now_iso
from .engine.runner import Runner
from .errors import ConfigError, ExitCode
from .paths import locations
from .profile import JudgeSpec, Profile, Target, load_profile, resolve_judge, resolve_targets
from .report.summary import summary_table
from .store import RunStore, atomic_write_json


def new_meta(run_id: str, profile: Profile, targets: list[Target]) -> dict[str, Any]:
    """The run's identity and fingerprint, written before the first request."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "name": profile.name,
        "status": "running",
        "created_at": now_iso(),
        "forgetui_version": __version__,
        "profile_hash": profile.content_hash(),
        "profile": profile.model_dump(mode="json"),
        "fingerprint": {
            "forgetui_version": __version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "profile_hash": profile.content_hash(),
            "case_set_revision": None,
            "judge": None,
            "sampling": {
                "temperature": profile.speed.temperature,
                "max_tokens": profile.speed.max_tokens,
            },
            "servers": {},
        },
        "targets": [
            {"model": t.label, "provider": t.provider.name, "model_id": t.model_id} for t in targets
        ],
        "resumes": [],
    }


class ProgressPrinter:
    """The headless sink: progress on stderr, nothing per token."""

    def __init__(self, stream: TextIO) -> None:
        self.out = stream
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.current: RequestStarted | None = None
        self._line_open = False

    def __call__(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            verb = "Resuming" if event.resumed else "Starting"
            done = f", {event.already_done} already done" if event.already_done else ""
            self._print(f"{verb} run {event.run_id}: {len(event.targets)} model(s), "
                        f"{event.total_requests} requests{done}")
            self._print(f"Run directory: {event.run_dir}")
        elif isinstance(event, Notice):
            self._print(f"{event.level}: {event.message}")
        elif isinstance(event, RequestStarted):
            self.current = event
            self.tick()
        elif isinstance(event, CaseFinished):
            self.current = None
            case = event.record["case"]
            attempt = f" #{case['repeat'] + 1}" if case.get("repeat") is not None else ""
            self._print(f"[{event.index}/{event.total}] {event.model} case {event.case_id}{attempt}: "
                        f"{case['status']}: {case['reason']}")
        elif isinstance(event, RequestFinished):
            self.current = None
            if not self.tty or not event.record["request"]["ok"]:
                self._print(self._finished_line(event))
        elif isinstance(event, ModelFinished):
            if event.error:
                self._print(f"{event.model}: skipped: {event.error}")
        elif isinstance(event, RunFinished):
            self._clear()

    def tick(self) -> None:
        """Redraw the live line (terminal only); called on a timer, never per token."""
        ev = self.current
        if not self.tty or ev is None:
            return
        p = ev.progress
        width = 20
        filled = int(width * (ev.index - 1) / max(1, ev.total))
        bar = "#" * filled + "-" * (width - filled)
        live = ""
        if p.t_first_token_ns and p.t_sent_ns:
            live = f" ttft {(p.t_first_token_ns - p.t_sent_ns) / NS:.3f}s, {p.token_events} events"
        elif p.state in ("sent", "connecting"):
            live = f" {p.state}"
        text = f"[{bar}] {ev.index}/{ev.total} {ev.model} {ev.phase} {ev.prompt} #{ev.repeat + 1}{live}"
        self.out.write("\r\x1b[2K" + text[:200])
        self.out.flush()
        self._line_open = True

    def _finished_line(self, event: RequestFinished) -> str:
        r = event.record["request"]
        head = f"[{event.index}/{event.total}] {event.model} {event.phase} {event.prompt} #{event.repeat + 1}"
        if not r["ok"]:
            return f"{head}: {r['outcome']}: {r['error']}"
        parts = [f"ttft {r['ttft_s']:.3f} s" if r["ttft_s"] is not None else "no token"]
        if r["decode_tps"] is not None:
            parts.append(f"decode {r['decode_tps']:.1f} tok/s")
        parts.append(f"{r['completion_tokens']} tok ({r['token_source']})")
        return f"{head}: " + ", ".join(parts)

    def _clear(self) -> None:
        if self._line_open:
            self.out.write("\r\x1b[2K")
            self.out.flush()
            self._line_open = False

    def _print(self, text: str) -> None:
        self._clear()
        print(text, file=self.out, flush=True)


def load_cases(profile: Profile, config: Any, profile_path: Path, source: str) -> tuple[list[Any], Any]:
    """The selected cases (validated) and the library; unknown selections are usage errors."""
    if not profile.cases.select:
        return [], None
    from .cases.loader import library_dirs, load_library
    from .tomlfile import key_lines, line_of

    library = load_library(library_dirs(config))
    unknown = library.unknown_tokens(profile.cases.select)
    if unknown:
        line = line_of(key_lines(source), ("cases", "select"))
        where = f"{profile_path}:{line}" if line else str(profile_path)
        known = ", ".join(library.sets()) or "none"
        raise ConfigError(f"{where}: cases.select: no case matches {', '.join(map(repr, unknown))} (sets: {known})")
    return library.select(profile.cases.select), library


def prepare(profile_path: Path, resume: str | None) -> tuple[Profile, list[Target], Any, dict[str, Any], bool, list[Any], Any]:
    """Load config, profile and cases, then create or reopen the run:
    (profile, targets, handle, meta, resumed, cases, library)."""
    loc = locations()
    config = load_config(loc.config_file)
    profile, source = load_profile(profile_path)
    targets = resolve_targets(profile, config, profile_path, source)
    resolve_judge(profile, config, profile_path, source, config_path=loc.config_file)  # bad judge: stop here
    cases, library = load_cases(profile, config, profile_path, source)
    store = RunStore(loc.runs_dir)
    if resume:
        handle = store.open(resume)
        meta = handle.read_run_json()
        if meta is None:
            handle.close()
            raise ConfigError(f"run {resume} has no run.json; it cannot be resumed")
        if meta.get("profile_hash") != profile.content_hash():
            handle.close()
            raise ConfigError(
                f"{profile_path}: the profile differs from the one run {resume} was started with "
                f"(hash {profile.content_hash()} vs {meta.get('profile_hash')}); resume needs the "
                "same profile. Run without --resume to start a new run."
            )
        if library is not None and meta.get("fingerprint", {}).get("case_set_revision") not in (None, library.revision):
            handle.close()
            raise ConfigError(f"run {resume} was started with case-set revision "
                              f"{meta['fingerprint']['case_set_revision']}, the library is now {library.revision}: "
                              "resume needs the same cases. Run without --resume to start a new run.")
        meta = {k: v for k, v in meta.items() if k not in ("models", "totals", "updated_at")}
        meta["targets"] = new_meta(resume, profile, targets)["targets"]
        meta.setdefault("resumes", []).append(now_iso())
        return profile, targets, handle, meta, True, cases, library
    run_id = store.new_run_id(profile.name)
    handle = store.create(run_id)
    meta = new_meta(run_id, profile, targets)
    if library is not None:
        meta["fingerprint"]["case_set_revision"] = library.revision
    return profile, targets, handle, meta, False, cases, library


def run_judge(profile: Profile, profile_path: Path | None = None) -> JudgeSpec | None:
    """The run's judge: config.toml's [judge] with the profile's [judge] keys on top (None: none set)."""
    loc = locations()
    return resolve_judge(profile, load_config(loc.config_file), profile_path, config_path=loc.config_file)


def make_sandbox(cases: list[Any], allow_unsandboxed: bool, meta: dict[str, Any], printer: Any) -> Any:
    """A sandbox when any selected case runs code; its state goes into the fingerprint."""
    if not any(c.grader_kind == "exec" or "exec" in str(c.grader) for c in cases):
        return None
    from .sandbox import Sandbox

    sandbox = Sandbox(allow_unsandboxed=allow_unsandboxed)
    check = sandbox.check()
    meta["fingerprint"]["sandbox"] = {"ok": check.ok, "bwrap": check.bwrap, "version": check.version,
                                      "problems": check.problems, "allow_unsandboxed": allow_unsandboxed}
    if not check.ok:
        what = ("running code cases WITHOUT a sandbox (--allow-unsandboxed): results are marked unsandboxed"
                if allow_unsandboxed else "code cases will be skipped")
        printer(Notice("warning", f"sandbox unusable: {'; '.join(check.problems)}; {what}"))
    return sandbox


def run_headless(profile_path: Path, resume: str | None = None, json_out: Path | None = None,
                 stdout: TextIO | None = None, stderr: TextIO | None = None,
                 resume_hint: bool = True, allow_unsandboxed: bool = False) -> int:
    """Run a profile headless; returns the process exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    profile, targets, handle, meta, resumed, cases, _library = prepare(profile_path, resume)
    printer = ProgressPrinter(stderr)
    sandbox = make_sandbox(cases, allow_unsandboxed, meta, printer)
    runner = Runner(profile, targets, handle, meta, [printer], resumed=resumed, cases=cases, sandbox=sandbox,
                    judge=run_judge(profile, profile_path))
    if handle.torn_tail:
        printer(Notice("warning", f"dropped a torn last record ({len(handle.torn_tail)} bytes, kept aside)"))
    try:
        finished = asyncio.run(_drive(runner, printer))
    finally:
        handle.close()
    doc = finished.document
    if json_out is not None:
        atomic_write_json(json_out, doc)
    print(summary_table(doc), file=stdout)
    if finished.status == "interrupted":
        hint = (f"Resume with: forgetui --run {profile_path} --resume {finished.run_id}" if resume_hint
                else "Finished requests are stored; this run cannot be resumed (its server is gone).")
        print(f"Interrupted. {hint}", file=stdout)
    print(f"Run directory: {finished.run_dir}", file=stdout)
    print(f"Results saved: {Path(finished.run_dir) / 'run.json'}", file=stdout, flush=True)
    return finished.exit_code


async def _drive(runner: Runner, printer: ProgressPrinter) -> RunFinished:
    """Run with signal handling: first Ctrl-C/SIGTERM cancels cleanly, a second exits at once."""
    loop = asyncio.get_running_loop()
    stops = 0

    def on_signal() -> None:
        nonlocal stops
        stops += 1
        if stops > 1:
            os._exit(int(ExitCode.INTERRUPTED))
        printer(Notice("warning", "stopping: the request in flight is cancelled; the run can be resumed "
                       "(press Ctrl-C again to quit at once)"))
        inner.cancel()

    inner = asyncio.ensure_future(runner.run())
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    ticker = asyncio.ensure_future(_tick(printer)) if printer.tty else None
    try:
        return await inner
    except asyncio.CancelledError:
        if runner.finished is None:
            raise
        return runner.finished
    finally:
        if ticker:
            ticker.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _tick(printer: ProgressPrinter) -> None:
    while True:
        await asyncio.sleep(0.25)
        printer.tick()
