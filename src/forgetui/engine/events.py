"""Events the engine emits while a run goes. Sinks (store, headless printer, TUI state) consume them.

Events are frozen and cheap; nothing here is emitted per token. Live per-token state lives in
``StreamProgress`` objects that a UI reads on a timer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .client import StreamProgress


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    run_dir: str
    total_requests: int
    already_done: int
    targets: tuple[str, ...]
    resumed: bool


@dataclass(frozen=True)
class Notice:
    level: str  # info, warning, error
    message: str
    model: str | None = None


@dataclass(frozen=True)
class RequestStarted:
    model: str
    phase: str  # baseline, warmup, measure
    prompt: str
    repeat: int
    index: int  # 1-based position among this run's requests
    total: int
    progress: StreamProgress = field(compare=False)


@dataclass(frozen=True)
class RequestFinished:
    model: str
    phase: str
    prompt: str
    repeat: int
    index: int
    total: int
    record: dict[str, Any] = field(compare=False)


@dataclass(frozen=True)
class CaseFinished:
    model: str
    case_id: str
    index: int
    total: int
    record: dict[str, Any] = field(compare=False)


@dataclass(frozen=True)
class ModelFinished:
    model: str
    summary: dict[str, Any] = field(compare=False)
    error: str | None = None


@dataclass(frozen=True)
class RunFinished:
    run_id: str
    run_dir: str
    status: str  # complete, interrupted
    exit_code: int
    document: dict[str, Any] = field(compare=False)


Event = RunStarted | Notice | RequestStarted | RequestFinished | CaseFinished | ModelFinished | RunFinished
Sink = Callable[[Event], None]
