"""``forgetui judge RUN [--judge PROVIDER/MODEL] [--force]``: (re)judge the judged cases of a stored
run from their stored answers, with the run's judge or another one. The answering model is never
asked again.

Every judged row whose model answered (outcome finished) is graded again from its stored response:
a cut-off or empty answer still fails without a judge; the others go to the judge, which is
calibrated first (grading/judge.py). Each new verdict is appended to ``records.jsonl`` as a new
case record with the same key (the latest record of a key wins in ``run.json``, the old one stays
in the records), and records which judge made it. ``run.json`` is rewritten; its fingerprint names
the judge and its calibration, and ``rejudged`` lists every invocation.

A judge that fails calibration changes nothing (the run keeps its verdicts) unless ``--force``.

stdout: one line per row (before -> after) and a count; stderr: notices (calibration). Exit code:
0 when every row got a verdict, 1 when the judge failed calibration (nothing changed) or some
judgements failed (``error``), 2 for a usage problem (no judge, unknown provider).
"""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace
from typing import Any, TextIO


from .config import load_config
from .engine.client import StreamClient
from .engine.events import Notice
from .engine.rundoc import build_document, latest_per_key, now_iso
from .engine.runner import client_limits
from .errors import ConfigError, ExitCode
from .grading import registry
from .grading.judge import JudgeGate, judge_case
from .paths import locations
from .profile import JudgeSpec, resolve_judge, stored_profile
from .store import RunStore


def judged_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest record of every judged case row whose model gave an answer to judge."""
    rows = []
    for rec in latest_per_key(records):
        case = rec.get("case") if rec.get("kind") == "case_result" else None
        if isinstance(case, dict) and case.get("grader") == "judge" and case.get("outcome") in ("finished", "truncated") \
                and (case.get("outcome") == "finished" or case.get("finish_reason")):
            rows.append(rec)
    return rows


def _params(case: dict[str, Any], library: Any) -> Any:
    """The case's reference and rubric as the run stored them (the library only for old records)."""
    details = case.get("details") or {}
    rubric = details.get("rubric")
    reference = case.get("expected")
    if (rubric is None or not reference) and library is not None:
        known = library.by_id(case.get("case_id"))
        if known is not None and known.grader_kind == "judge":
            reference = reference or known.params.reference
            rubric = known.params.rubric if rubric is None else rubric
    return registry.JudgeParams(reference=reference or "(no reference stored)", rubric=rubric or "")


async def rejudge_case(gate: JudgeGate, case: dict[str, Any], library: Any = None) -> dict[str, Any] | None:
    """The row's new ``case`` dict, or None when no judge is involved (a cut-off or empty answer
    fails without one, so its stored verdict stands)."""
    params = _params(case, library)
    usage = case.get("usage") or {}
    verdict = await registry.grade(
        "judge", params, case.get("response") or "", finish_reason=case.get("finish_reason"),
        completion_tokens=usage.get("completion_tokens"),
        reasoning_tokens=(usage.get("completion_tokens_details") or {}).get("reasoning_tokens"))
    if verdict.status != "skipped":
        return None
    verdict = await judge_case(gate, SimpleNamespace(grader_kind="judge", params=params), verdict,
                               messages=case.get("prompt") or [])
    details = dict(verdict.details)
    old_judge = (case.get("details") or {}).get("judge") or {}
    new = dict(case)
    new.update(status=verdict.status, reason=verdict.reason, extracted=details.pop("extracted", None),
               expected=details.pop("expected", None), details=details)
    new["rejudged"] = {"at": now_iso(), "previous": {"status": case.get("status"), "reason": case.get("reason"),
                                                     "judge": old_judge.get("judge")}}
    return new


def run_judge_command(run_id: str, judge_model: str | None = None, force: bool = False,
                      stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Re-judge one stored run; returns the process exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    loc = locations()
    config = load_config(loc.config_file)
    with RunStore(loc.runs_dir).open(run_id) as handle:
        doc = handle.read_run_json()
        profile = stored_profile(doc, run_id, "judged")
        spec = resolve_judge(profile, config, model=judge_model, config_path=loc.config_file)
        if spec is None:
            raise ConfigError(f"no judge: pass --judge PROVIDER/MODEL, or set [judge] model in {loc.config_file}")
        if force:
            spec = JudgeSpec(spec.settings.model_copy(update={"force": True}), spec.target)
        rows = judged_rows(handle.records)
        if not rows:
            print(f"Nothing to judge in run {run_id}: no judged case with a stored answer.", file=stdout)
            return int(ExitCode.OK)
        from .engine.recover import targets_from_document

        meta = {k: v for k, v in doc.items() if k not in ("models", "totals", "updated_at")}
        meta["targets"] = targets_from_document(doc)
        meta.setdefault("fingerprint", {})
        from .engine.costs import record_prices

        record_prices(meta["fingerprint"], [spec.target.provider])  # the judge's cost in run.json

        def emit(event: Any) -> None:
            if isinstance(event, Notice):
                print(f"{event.level}: {event.message}", file=stderr, flush=True)

        library = None
        if any("rubric" not in (r["case"].get("details") or {}) for r in rows):
            from .cases.loader import library_dirs, load_library

            library = load_library(library_dirs(config))
        seq = max((r.get("seq") for r in handle.records if isinstance(r.get("seq"), int)), default=-1)
        changed: list[tuple[dict[str, Any], dict[str, Any]]] = []

        async def go() -> JudgeGate:
            nonlocal seq
            async with StreamClient(client_limits(profile)) as client:
                gate = JudgeGate(spec, client, {}, meta["fingerprint"], emit)
                if not (await gate.get()).usable:
                    return gate  # an untrusted judge must not replace the verdicts the run has
                news = await asyncio.gather(*(rejudge_case(gate, r["case"], library) for r in rows))
                for rec, new in zip(rows, news):
                    if new is None:
                        continue
                    seq += 1
                    handle.append({**rec, "seq": seq, "ts": now_iso(), "case": new})
                    changed.append((rec, new))
                return gate

        gate = asyncio.run(go())
        judge = gate.judge
        if judge is not None and not judge.usable:
            print(f"Judge {spec.target.label} failed calibration ({judge.calibration_problems()}): nothing "
                  f"changed in run {run_id}. Use --force to judge with it anyway.", file=stdout)
            return int(ExitCode.FAILURES)
        counts = {s: sum(1 for _, new in changed if new["status"] == s) for s in ("pass", "fail", "error", "skipped")}
        meta.setdefault("rejudged", []).append({
            "at": now_iso(), "judge": spec.target.label, "trusted": judge.trusted if judge else None,
            "forced": spec.settings.force, "cases": len(changed), **counts})
        handle.write_run_json(build_document(meta, handle.records, profile.speed))
    print(f"Re-judged {len(changed)} case(s) of run {run_id} with {spec.target.label}:", file=stdout)
    for rec, new in changed:
        before = rec["case"]
        print(f"  {rec.get('model')} {new['case_id']}: {before.get('status')} -> {new['status']}: {new['reason']}",
              file=stdout)
    left = len(rows) - len(changed)
    if left:
        print(f"  ({left} cut-off or empty answer(s) fail without a judge; unchanged)", file=stdout)
    print(", ".join(f"{n} {s}" for s, n in counts.items()), file=stdout)
    print(f"Results saved: {handle.path / 'run.json'}", file=stdout, flush=True)
    if counts["error"] or counts["skipped"]:
        return int(ExitCode.FAILURES)
    return int(ExitCode.OK)
