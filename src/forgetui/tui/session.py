"""A run started from the TUI: the same ``prepare`` -> ``Runner`` -> store path as ``forgetui --run``.

``LiveRun`` is the TUI's sink: the engine calls it for each event (never per token) and it keeps
the counters, the event log and the request in flight. Screens *read* it on a timer; nothing here
touches a widget, so this module imports no Textual.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from ..engine.control import RunControl
from ..engine.events import (CaseFinished, ModelFinished, Notice, RequestFinished, RequestStarted,
                             RunFinished, RunStarted)
from ..paths import locations


@dataclass(frozen=True)
class LogLine:
    seq: int
    level: str  # info, warning, error, pass, fail
    text: str


class LiveRun:
    """What the Run screen shows, updated by engine events."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.run_dir: str | None = None
        self.targets: tuple[str, ...] = ()
        self.total = 0
        self.already = 0
        self.done = 0
        self.passed = 0
        self.failed = 0
        self.errors = 0
        self.speed_ok = 0
        self.speed_bad = 0
        self.current: RequestStarted | None = None
        #: The most recent request started (kept after it finished, so its text stays on screen).
        self.last: RequestStarted | None = None
        self.inflight: dict[int, RequestStarted] = {}
        self.log: deque[LogLine] = deque(maxlen=2000)
        self._log_seq = 0
        self.started = time.monotonic()
        self.first_request_at: float | None = None
        self.finished: RunFinished | None = None
        self.failure_ids: list[tuple[str, str]] = []  # (model, case id) in the order they failed
        #: Tokens so far (speed requests and cases, all attempts), cost when the provider has prices.
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd: float | None = None
        self.recovered = 0
        #: Bumped on every event, so a screen can skip redrawing what did not change.
        self.version = 0

    def note(self, level: str, text: str) -> None:
        self._log_seq += 1
        self.log.append(LogLine(self._log_seq, level, text))
        self.version += 1

    def __call__(self, event: Any) -> None:
        self.version += 1
        if isinstance(event, RunStarted):
            self.run_id, self.run_dir = event.run_id, event.run_dir
            self.targets, self.total, self.already = event.targets, event.total_requests, event.already_done
            self.done = event.already_done
            verb = "Resumed" if event.resumed else "Started"
            self.note("info", f"{verb} run {event.run_id}: {len(event.targets)} model(s), {event.total_requests} requests")
        elif isinstance(event, Notice):
            self.note(event.level, event.message)
        elif isinstance(event, RequestStarted):
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
            self.inflight[event.index] = event
            self.current = self.last = event
        elif isinstance(event, RequestFinished):
            self._finish(event.index)
            r = event.record["request"]
            self.tokens_in += r.get("prompt_tokens") or 0
            self.tokens_out += r.get("completion_tokens") or 0
            if event.phase == "warmup":
                return
            if r["ok"]:
                self.speed_ok += 1
                rate = f", {r['decode_tps']:.1f} tok/s" if r.get("decode_tps") else ""
                ttft = f"ttft {r['ttft_s']:.3f}s" if r.get("ttft_s") is not None else "no token"
                self.note("info", f"{event.model} {event.phase} {event.prompt} #{event.repeat + 1}: {ttft}{rate}")
            else:
                self.speed_bad += 1
                self.note("error", f"{event.model} {event.phase} {event.prompt}: {r['outcome']}: {r['error']}")
        elif isinstance(event, CaseFinished):
            self._finish(event.index)
            case = event.record["case"]
            status = case["status"]
            tokens = case.get("tokens") or {}
            self.tokens_in += tokens.get("input") or 0
            self.tokens_out += tokens.get("output") or 0
            if case.get("cost_usd") is not None:
                self.cost_usd = (self.cost_usd or 0.0) + case["cost_usd"]
            self.recovered += 1 if case.get("recovered") else 0
            if status == "pass":
                self.passed += 1
            elif status == "fail":
                self.failed += 1
                self.failure_ids.append((event.model, event.case_id))
            else:
                self.errors += 1
                self.failure_ids.append((event.model, event.case_id))
            level = {"pass": "pass", "fail": "fail"}.get(status, "error")
            attempt = f" #{case['repeat'] + 1}" if case.get("repeat") is not None else ""
            self.note(level, f"{event.model} {event.case_id}{attempt}: {status}: {case['reason']}")
        elif isinstance(event, ModelFinished):
            if event.error:
                self.note("error", f"{event.model}: skipped: {event.error}")
            else:
                self.note("info", f"{event.model}: done")
        elif isinstance(event, RunFinished):
            self.finished = event
            self.current = None
            self.inflight.clear()
            self.note("info" if event.status == "complete" else "warning",
                      f"Run {event.status} (exit code {event.exit_code}); saved in {event.run_dir}")

    def _finish(self, index: int) -> None:
        self.done += 1
        self.inflight.pop(index, None)
        self.current = max(self.inflight.values(), key=lambda e: e.index) if self.inflight else None

    def eta_s(self) -> float | None:
        """Seconds left at the pace of this session's finished requests."""
        finished_here = self.done - self.already
        if self.first_request_at is None or finished_here <= 0 or self.finished is not None:
            return None
        per = (time.monotonic() - self.first_request_at) / finished_here
        return per * max(0, self.total - self.done)


class RunSession:
    """One run driven from the TUI. ``prepare()`` raises ConfigError/StorageError before anything
    is sent; ``run()`` is awaited in a worker and returns the RunFinished event."""

    def __init__(self, profile_path: Path, resume: str | None = None, allow_unsandboxed: bool = False) -> None:
        self.profile_path = profile_path
        self.resume = resume
        self.allow_unsandboxed = allow_unsandboxed
        self.live = LiveRun()
        self.control = RunControl()
        self.runner: Any = None
        self._handle: Any = None

    def prepare(self) -> None:
        from ..engine.runner import Runner
        from ..headless import make_sandbox, prepare, run_judge

        profile, targets, handle, meta, resumed, cases, _library = prepare(self.profile_path, self.resume)
        self._handle = handle
        try:
            sandbox = make_sandbox(cases, self.allow_unsandboxed, meta, self.live)
            judge = run_judge(profile, self.profile_path)
        except BaseException:
            handle.close()
            raise
        self.runner = Runner(profile, targets, handle, meta, [self.live], resumed=resumed, cases=cases,
                             sandbox=sandbox, control=self.control, judge=judge)
        if handle.torn_tail:
            self.live.note("warning", f"dropped a torn last record ({len(handle.torn_tail)} bytes, kept aside)")

    async def run(self) -> RunFinished:
        try:
            return await self.runner.run()
        except asyncio.CancelledError:
            if self.runner.finished is not None:
                return self.runner.finished
            raise
        finally:
            self._handle.close()

    @property
    def active(self) -> bool:
        return self.runner is not None and self.live.finished is None


#: Ad-hoc run kinds offered on the Models screen: label -> (speed settings or None, case selection).
RUN_KINDS: dict[str, tuple[dict[str, Any] | None, list[str]]] = {
    "speed + quick cases": ({"prompts": ["short", "medium"], "warmup": 1, "repeats": 2, "max_tokens": 128}, ["quick"]),
    "speed only": ({"prompts": ["short", "medium", "long"], "warmup": 1, "repeats": 3, "max_tokens": 256}, []),
    "quick cases": (None, ["quick"]),
    "standard cases": (None, ["standard"]),
    "hard cases": (None, ["hard"]),
    "full (speed + all cases)": ({"prompts": ["short", "medium", "long"], "warmup": 1, "repeats": 3, "max_tokens": 256}, ["full"]),
}


def profiles_dir() -> Path:
    path = locations().data_dir / "profiles"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_adhoc_profile(targets: list[str], kind: str, case_ids: list[str] | None = None,
                        name: str | None = None) -> Path:
    """Write the profile for an ad-hoc run (targets ``provider/model`` from the user config) and
    return its path, so the run can be resumed with ``forgetui --run PATH --resume ID`` like any
    other. ``case_ids`` replaces the kind's case selection (re-running failures)."""
    speed, select = RUN_KINDS[kind]
    if case_ids is not None:
        speed, select = None, [f"id:{cid}" for cid in case_ids]
    slug = re.sub(r"[^a-z0-9]+", "-", (name or kind).lower()).strip("-")[:40] or "run"
    profile: dict[str, Any] = {
        "name": f"tui-{slug}",
        "description": f"{kind} from the forgetui TUI: {', '.join(targets)}",
        "models": {"targets": list(targets)},
        "speed": speed if speed is not None else {"enabled": False},
    }
    if select:
        profile["cases"] = {"select": select}
    path = profiles_dir() / f"tui-{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() % 10000:04d}.toml"
    path.write_text(tomli_w.dumps(profile))
    return path
