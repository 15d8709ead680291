"""``forgetui recover RUN``: ask again exactly the case rows of a stored run that came back with
nothing usable, and merge the new answers into the same run.

A row is re-run when its latest record ended in a request failure (status "error" and an outcome
other than "finished": connection, HTTP, stall, a cut stream), truncated (``finish_reason``
"length" or outcome "truncated"), or empty (no visible answer and no tool call). Rows that passed,
failed on a real answer, or were skipped are left alone, and speed requests are never re-sent.

New records are appended to the run's ``records.jsonl``; the old ones stay. ``run.json`` is
rebuilt with the latest record of each row (:func:`latest_per_key`), and ``run.json`` gets one
``recovers`` entry per invocation (when, which rows, the servers as they answered then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ExitCode
from .repeats import attempt_key, item_key
from .client import StreamClient
from .control import RunStopped
from .events import ModelFinished, Notice, RunFinished, RunStarted
from .rundoc import latest_per_key, now_iso
from .runner import Runner, client_limits
from .servers import Servers


def recover_reason(case: dict[str, Any]) -> str | None:
    """Why a stored case row needs asking again, or None when its result stands."""
    outcome = case.get("outcome")
    if case.get("status") == "error" and outcome not in (None, "finished"):
        return f"request failed ({outcome})"
    if outcome == "truncated" or case.get("finish_reason") == "length":
        return "truncated"
    if not (case.get("response") or "").strip() and not case.get("tool_calls"):
        return "empty answer"
    return None


@dataclass
class RecoverRow:
    """One case row of a stored run to ask again."""

    model: str  # target label
    case_id: str
    why: str
    before: dict[str, Any]  # the row's latest ``case`` dict before the re-run
    repeat: int | None = None  # the attempt, when the run asked each case k > 1 times

    @property
    def key(self) -> str:
        return attempt_key(self.model, self.case_id, self.repeat)


def rows_to_recover(records: list[dict[str, Any]]) -> list[RecoverRow]:
    """The rows whose latest record ended empty, truncated or in a request failure, in run order."""
    rows = []
    for rec in latest_per_key(records):
        if rec.get("kind") != "case_result" or not isinstance(rec.get("case"), dict):
            continue
        why = recover_reason(rec["case"])
        if why:
            rows.append(RecoverRow(rec["model"], rec["case"]["case_id"], why, rec["case"], rec["case"].get("repeat")))
    return rows


def targets_from_document(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's ``targets`` metadata back from a ``run.json`` (it keeps them under ``models``)."""
    keep = ("model", "provider", "model_id", "error", "model_info", "lifecycle")
    return [{k: m.get(k) for k in keep} for m in doc.get("models") or [] if isinstance(m, dict)]


class RecoverRunner(Runner):
    """A Runner that asks only the given case rows: no speed requests, no other cases.

    ``rows`` maps a target label to the cases to ask again (``repeats.Attempt`` for one attempt of a
    run that asked each case k > 1 times). Each case goes through the same
    :class:`CaseRunner` as in a run (so a thinking model that loses its answer is re-asked with
    thinking off here too). The run keeps its status; the invocation is recorded in
    ``meta["recovers"]``. Models are not isolated (loaded/unloaded): ability cases do not need it.
    """

    def __init__(self, profile: Any, targets: list[Any], handle: Any, meta: dict[str, Any],
                 rows: dict[str, list[Any]], sinks: Any = (), sandbox: Any = None,
                 sandbox_state: dict[str, Any] | None = None, judge: Any = None) -> None:
        super().__init__(profile, targets, handle, meta, sinks, resumed=True, cases=[], sandbox=sandbox,
                         judge=judge)
        self.rows = rows
        self.entry: dict[str, Any] = {
            "at": now_iso(),
            "rows": [item_key(label, c) for label, cases in rows.items() for c in cases],
            "status": "running",
            "servers": {},
            "errors": {},
        }
        if sandbox_state:
            self.entry["sandbox"] = sandbox_state

    async def run(self) -> RunFinished:
        keep_status = self.meta.get("status") or "complete"
        self.meta.setdefault("recovers", []).append(self.entry)
        targets = [t for t in self.targets if self.rows.get(t.label)]
        self._index, self._total = 0, sum(len(self.rows[t.label]) for t in targets)
        self.emit(RunStarted(self.handle.run_id, str(self.handle.path), self._total, 0,
                             tuple(t.label for t in targets), True))
        status = "interrupted"
        try:
            async with StreamClient(client_limits(self.profile)) as client:
                self.servers = Servers(client.http, self.emit)
                self._make_judge_gate(client, [c for t in targets for c in self.rows[t.label]])
                scratch = [{"model": t.label} for t in targets]  # the run's model facts stay as they were
                errors = await self.servers.preflight(targets, self.entry["servers"], scratch)
                self.entry["errors"] = errors
                for target in targets:
                    if target.label in errors:
                        self.emit(ModelFinished(target.label, {}, errors[target.label]))
                        continue
                    await self._case_runner(client, target).run(self.rows[target.label])
                    self._save(keep_status)
            status = "complete"
        except RunStopped:
            self.emit(Notice("warning", "stopped on request; the rows asked so far are stored"))
        finally:
            self.entry["status"] = status
            doc = self._save(keep_status)
            code = self._exit_code(doc) if status == "complete" else ExitCode.INTERRUPTED
            if status == "complete" and self.entry["errors"]:
                code = max(code, ExitCode.FAILURES)
            self.finished = RunFinished(self.handle.run_id, str(self.handle.path), status, int(code), doc)
            self.emit(self.finished)
        return self.finished
