"""Orchestration: profile -> requests -> records on disk -> events for the sinks.

Speed requests are sent one at a time, one model at a time: two streams on the same hardware would
slow each other and both numbers would be wrong. (Provider concurrency is for ability cases.)
Models run one after another, each its speed requests first and then its cases, and a model's
cases all end before the next model starts: no case request (of any model) ever overlaps a speed
request. The cases of one provider share one adaptive limiter for the whole run
(``limiter.ProviderLimiters``): a 429 lowers that provider's concurrency for later models too.
Each finished request is appended to ``records.jsonl`` (fsynced) *before* anyone is told about it,
and ``run.json`` is rewritten after every model, so a crash loses at most the request in flight.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

from ..errors import ExitCode
from ..profile import Profile, Target
from .client import ClientLimits, StreamClient, StreamProgress
from .control import RunControl, RunStopped
from .costs import record_prices
from .events import ModelFinished, Notice, RequestFinished, RequestStarted, RunFinished, RunStarted, Sink
from .limiter import ProviderLimiters
from .cases_run import CaseRunner
from .repeats import plan_attempts
from .rundoc import SCHEMA_VERSION, build_document, now_iso
from .servers import Servers
from .speed import (PlannedRequest, baseline_from, build_request, plan_model, prune_done,
                    request_record, speed_tokens_needed)


def client_limits(profile: Profile) -> ClientLimits:
    lim = profile.limits
    return ClientLimits(
        connect_timeout_s=lim.connect_timeout_s,
        idle_timeout_s=lim.idle_timeout_s,
        request_timeout_s=lim.request_timeout_s,
        retries=lim.retries,
        retry_after_cap_s=lim.retry_after_cap_s,
    )


class Runner:
    """Runs one profile into one run directory (new or resumed)."""

    def __init__(self, profile: Profile, targets: list[Target], handle: Any,
                 meta: dict[str, Any], sinks: Iterable[Sink] = (), resumed: bool = False,
                 cases: list[Any] | None = None, sandbox: Any = None,
                 control: RunControl | None = None, judge: Any = None) -> None:
        self.profile = profile
        #: The run's judge (profile.JudgeSpec) or None; made and calibrated at the first judged case.
        self.judge_spec = judge
        self.judge_gate: Any = None
        self.targets = targets
        self.handle = handle
        self.meta = meta
        self.sinks = list(sinks)
        self.resumed = resumed
        #: Selected ability cases (already loaded and validated) and the sandbox for exec cases.
        self.cases = cases or []
        self.sandbox = sandbox
        self.model_errors: dict[str, str] = {}
        self._seq = itertools.count(len(handle.records))
        self.current: StreamProgress | None = None
        #: Pause / stop-after-current, set by a UI; checked before every request.
        self.control = control or RunControl()
        #: Set when the run ends, also when it ends by cancellation (which then propagates).
        self.finished: RunFinished | None = None
        #: One adaptive concurrency limiter per provider, described in the fingerprint.
        self.limiters = ProviderLimiters(self.emit, meta.setdefault("fingerprint", {}).setdefault("concurrency", {}))

    def emit(self, event: Any) -> None:
        for sink in self.sinks:
            sink(event)

    def document(self) -> dict[str, Any]:
        return build_document(self.meta, self.handle.records, self.profile.speed, self.model_errors)

    def _save(self, status: str) -> dict[str, Any]:
        self.meta["status"] = status
        doc = self.document()
        self.handle.write_run_json(doc)
        return doc

    async def run(self) -> RunFinished:
        """Run everything; on cancellation the run is saved as interrupted and the event says so."""
        speed = self.profile.speed
        done = {r["key"] for r in self.handle.records if r.get("counted")}
        plans: dict[str, list[PlannedRequest]] = {}
        total = already = 0
        for t in self.targets:
            full = plan_model(t.label, speed) if speed.enabled else []
            plans[t.label] = prune_done(full, done)
            counted = [p for p in full if p.counted]
            already += sum(1 for p in counted if p.key in done)
            total += len(counted) + sum(1 for p in plans[t.label] if not p.counted)
        k = self.profile.cases.repeats  # attempts per case (engine/repeats.py)
        case_plans = {t.label: plan_attempts(self.cases, t.label, k, done) for t in self.targets}
        total += len(self.cases) * k * len(self.targets)
        already += sum(len(self.cases) * k - len(case_plans[t.label]) for t in self.targets)
        self._index = already
        self._total = total
        priced = [t.provider for t in self.targets]
        if self.judge_spec is not None:
            priced.append(self.judge_spec.target.provider)
        record_prices(self.meta["fingerprint"], priced)  # so every cost in run.json can be recomputed
        self._save("running")
        self.emit(RunStarted(self.handle.run_id, str(self.handle.path), total, already,
                             tuple(t.label for t in self.targets), self.resumed))
        status = "interrupted"
        try:
            async with StreamClient(client_limits(self.profile)) as client:
                self.servers = Servers(client.http, self.emit)
                self._make_judge_gate(client, self.cases)
                self.model_errors.update(await self.servers.preflight(
                    self.targets, self.meta["fingerprint"].setdefault("servers", {}), self.meta["targets"],
                    needed_tokens=speed_tokens_needed(speed) if speed.enabled else 0))
                for target, target_meta in zip(self.targets, self.meta["targets"]):
                    if target.label in self.model_errors:
                        self.emit(ModelFinished(target.label, {}, self.model_errors[target.label]))
                        continue
                    if not plans[target.label] and not case_plans[target.label]:
                        continue
                    lifecycle = await self.servers.isolate(target, self.profile.lifecycle.isolate)
                    target_meta["lifecycle"] = lifecycle
                    try:
                        await self._run_model(client, target, plans[target.label])
                        if case_plans[target.label]:
                            await self._case_runner(client, target).run(case_plans[target.label])
                        self._model_done(target)
                    finally:
                        if self.profile.lifecycle.restore:
                            await self.servers.restore(target, lifecycle)
                    self._save("running")
            status = "complete"
        except RunStopped:
            self.emit(Notice("warning", "stopped on request; finished requests are stored and the run can be resumed"))
        finally:
            doc = self._save(status)
            code = self._exit_code(doc) if status == "complete" else ExitCode.INTERRUPTED
            finished = RunFinished(self.handle.run_id, str(self.handle.path), status, int(code), doc)
            self.finished = finished
            self.emit(finished)
        return finished

    def _make_judge_gate(self, client: StreamClient, cases: Iterable[Any]) -> None:
        """The judge (made and calibrated at its first use) when a judge is set and a case needs it."""
        if self.judge_spec is not None and any(c.grader_kind == "judge" for c in cases):
            from ..grading.judge import JudgeGate

            self.judge_gate = JudgeGate(self.judge_spec, client, self.servers.dialects,
                                        self.meta["fingerprint"], self.emit)

    def _exit_code(self, doc: dict[str, Any]) -> ExitCode:
        totals = doc["totals"]
        if self.model_errors and totals["ok"] == 0 and len(self.model_errors) == len(self.targets):
            return ExitCode.CONNECTION
        requests = [r for m in doc["models"] for p in (m["speed"] or {}).get("prompts", []) for r in p["requests"]]
        if requests and all(r.get("outcome") == "connect_error" for r in requests):
            return ExitCode.CONNECTION
        if totals["errors"] or self.model_errors or totals.get("cases_failed"):
            return ExitCode.FAILURES
        if any(a.get("status") in ("fail", "error") for m in doc["models"] for c in m.get("cases") or []
               for a in c.get("repeats") or []):  # k > 1: a later attempt failed
            return ExitCode.FAILURES
        return ExitCode.OK

    def _append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Number and store a record (fsynced) before anyone hears of it."""
        record = {**record, "seq": next(self._seq), "run_id": self.handle.run_id}
        self.handle.append(record)
        return record

    def _next_index(self) -> int:
        self._index += 1
        return self._index

    def _case_runner(self, client: StreamClient, target: Target) -> CaseRunner:
        client = self.limiters.client(client, target, self.servers.dialect(target))
        return CaseRunner(client=client, dialect=self.servers.dialect(target), target=target,
                          sandbox=self.sandbox, append=self._append, emit=self.emit,
                          counter=self._next_index, total=self._total,
                          max_tokens_cap=self.profile.cases.max_tokens,
                          checkpoint=self.control.checkpoint, judge=self.judge_gate)

    def _model_done(self, target: Target) -> None:
        doc = self.document()
        summary = next((m for m in doc["models"] if m["model"] == target.label), {})
        self.emit(ModelFinished(target.label, summary, None))

    async def _run_model(self, client: StreamClient, target: Target, plan: list[PlannedRequest]) -> None:
        speed = self.profile.speed
        prov = target.provider
        api_key = prov.api_key()
        recs = [r["request"] for r in self.handle.records
                if r.get("model") == target.label and r.get("phase") == "baseline"]
        baseline = baseline_from(recs)
        for planned in plan:
            await self.control.checkpoint()
            dialect = self.servers.dialect(target)
            request = build_request(planned, speed, prov.base_url, target.model_id, api_key, prov.extra_body)
            request = dialect.prepare(request, "speed")
            progress = StreamProgress()
            self.current = progress
            index = self._next_index()
            self.emit(RequestStarted(target.label, planned.phase, planned.prompt, planned.repeat,
                                     index, self._total, progress))
            result = await client.chat_stream(request, progress)
            await dialect.finalize(request, result)
            req = request_record(request, result, baseline)
            record = self._append({
                "schema_version": SCHEMA_VERSION,
                "kind": "speed_request",
                "key": planned.key,
                "counted": planned.counted,
                "ts": now_iso(),
                "model": target.label,
                "phase": planned.phase,
                "prompt": planned.prompt,
                "repeat": planned.repeat,
                "request": req,
            })
            if planned.phase == "baseline":
                recs.append(req)
                baseline = baseline_from(recs)
            self.emit(RequestFinished(target.label, planned.phase, planned.prompt, planned.repeat,
                                      index, self._total, record))
        self.current = None
