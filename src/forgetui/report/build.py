"""The data of ``forgetui report``: one or more run documents reduced to one plain dict.

``build_report(docs)`` is pure (no I/O, no clock): the Markdown, JSON and CSV outputs are all
renderings of its result, and the JSON output *is* its result (docs/results-format.md, "Reports").

Counting rules (stated in the report's notes too):

- pass rate = pass / (pass + fail). ``error`` (the request failed, or the judge failed) and
  ``skipped`` cases are listed apart and never counted: a server that died does not lower a
  model's score.
- Intervals are 95 % Wilson score intervals (``stats.wilson_interval``).
- Decode rate and TTFT are the medians over the clean measured speed requests of all prompts
  (``store.summary.speed_headline``: warm-ups and the prefill baseline excluded), the same figures
  as summary.json.
"""

from __future__ import annotations

from typing import Any

from forgetui.report.chart import Point, pareto_front
from forgetui.report.stats import interval_text, rate_text, wilson_interval
from forgetui.report.summary import judge_line
from forgetui.store.summary import speed_headline

REPORT_SCHEMA_VERSION = 1

NOTES = [
    ("Pass rate = pass / (pass + fail). Errors (request failures, judge failures) and skipped cases are "
     "listed apart and are not counted in any pass rate."),
    "Intervals are 95% Wilson score intervals.",
    "Hard % is the pass rate on the cases marked hard.",
    ("Decode rate and TTFT are medians over the clean measured speed requests of all prompts "
     "(warm-ups and the prefill baseline excluded)."),
    "Tokens count the model's case and speed requests; output includes reasoning. Judge tokens are not included.",
]


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def rate_block(passed: int, failed: int) -> dict[str, Any]:
    """Pass rate of ``passed`` out of ``passed + failed``, with its Wilson interval and texts."""
    graded = passed + failed
    low, high = wilson_interval(passed, graded) if graded else (None, None)
    return {
        "pass": passed,
        "fail": failed,
        "graded": graded,
        "rate": _round(passed / graded) if graded else None,
        "rate_text": rate_text(passed, graded),
        "interval": [_round(low), _round(high)] if graded else None,
        "interval_text": interval_text(passed, graded),
    }


def error_kind(case: dict[str, Any]) -> str | None:
    """``request``, ``judge`` or ``skipped`` for a case kept out of the pass rate; None otherwise."""
    status = case.get("status")
    if status == "skipped":
        return "skipped"
    if status in ("pass", "fail"):
        return None
    return "judge" if str(case.get("reason") or "").startswith("judge failed") else "request"


def _fingerprint(doc: dict[str, Any]) -> dict[str, Any]:
    fp = doc.get("fingerprint") or {}
    judge = fp.get("judge")
    judge_text = judge_line(judge).removeprefix("Judge: ") if isinstance(judge, dict) and judge.get("model") else None
    servers = {}
    for provider, server in sorted((fp.get("servers") or {}).items()):
        server = server or {}
        servers[provider] = {k: server.get(k) for k in ("kind", "base_url", "server_header", "error")
                             if server.get(k) is not None}
    return {
        "forgetui_version": fp.get("forgetui_version") or doc.get("forgetui_version"),
        "case_set_revision": fp.get("case_set_revision"),
        "sampling": fp.get("sampling"),
        "judge": judge_text,
        "python": fp.get("python"),
        "platform": fp.get("platform"),
        "servers": servers,
    }


def _labels(docs: list[dict[str, Any]]) -> dict[tuple[int, str], str]:
    """Display label per (run index, model): the model, or ``model @ run_id`` when it repeats."""
    seen: dict[str, int] = {}
    for doc in docs:
        for model in doc.get("models") or []:
            seen[model.get("model")] = seen.get(model.get("model"), 0) + 1
    return {(i, m.get("model")): (m.get("model") if seen[m.get("model")] == 1 else f"{m.get('model')} @ {doc.get('run_id')}")
            for i, doc in enumerate(docs) for m in doc.get("models") or []}


def _repeats(summary: dict[str, Any]) -> dict[str, Any] | None:
    from ..engine.repeats import repeats_line

    line = repeats_line(summary)
    if line is None:
        return None
    return {"k": summary.get("repeats"), "pass_at_1": summary.get("pass_at_1"),
            "pass_hat_k": summary.get("pass_hat_k"), "pass_at_k": summary.get("pass_at_k"), "line": line}


def _model_row(run_id: str, label: str, model: dict[str, Any]) -> tuple[dict[str, Any], list, list]:
    cases = [c for c in model.get("cases") or [] if isinstance(c, dict)]
    counts = dict.fromkeys(("pass", "fail", "error", "skipped"), 0)
    hard = [0, 0]
    cats: dict[str, dict[str, int]] = {}
    failures: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for case in cases:
        status = case.get("status") if case.get("status") in counts else "error"
        category = str(case.get("category") or "?")
        counts[status] += 1
        cat = cats.setdefault(category, dict.fromkeys(counts, 0))
        cat[status] += 1
        if case.get("hard") and status in ("pass", "fail"):
            hard[0 if status == "pass" else 1] += 1
        entry = {"run_id": run_id, "model": label, "category": category, "case_id": case.get("case_id"),
                 "hard": bool(case.get("hard")), "reason": case.get("reason") or ""}
        if status == "fail":
            failures.append({**entry, "line": f"{label} [{category}] {entry['case_id']}: {entry['reason']}"})
        elif status != "pass":
            kind = error_kind({**case, "status": status})
            errors.append({**entry, "kind": kind,
                           "line": f"{label} [{category}] {entry['case_id']} ({kind}): {entry['reason']}"})
    if model.get("error"):
        errors.append({"run_id": run_id, "model": label, "category": None, "case_id": None, "hard": False,
                       "reason": model["error"], "kind": "model", "line": f"{label}: not run: {model['error']}"})
    # Group failures and errors by category (first appearance), library order inside a category.
    order = {cat: n for n, cat in enumerate(cats)}
    failures.sort(key=lambda f: order.get(f["category"], -1))
    errors.sort(key=lambda e: order.get(e["category"], -1))
    speed = speed_headline(model.get("speed")) or {}
    summary = model.get("cases_summary") or {}
    recoveries = summary.get("recoveries")
    if recoveries is None:
        recoveries = sum(1 for c in cases if c.get("recovered"))
    row = {
        "run_id": run_id,
        "model": label,
        "error": model.get("error"),
        **rate_block(counts["pass"], counts["fail"]),
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "cases": len(cases),
        "hard": rate_block(*hard),
        "decode_tps": _round(speed.get("decode_tps"), 2),
        "ttft_s": _round(speed.get("ttft_s"), 4),
        "speed_requests": speed.get("requests", 0),
        "tokens": model.get("tokens"),
        "cost_usd": model.get("cost_usd"),
        "recoveries": int(recoveries or 0),
        # k attempts per case (profile [cases] repeats): pass@1 with its spread, pass^k, pass@k.
        "repeats": _repeats(summary),
        "categories": [{"category": cat, **rate_block(c["pass"], c["fail"]), "errors": c["error"],
                        "skipped": c["skipped"]} for cat, c in cats.items()],
    }
    return row, failures, errors


def _differ(runs: list[dict[str, Any]], key: str) -> bool:
    return len({repr(r["fingerprint"].get(key)) for r in runs}) > 1


def build_report(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The report of one or more run documents (run.json); see docs/results-format.md, "Reports"."""
    runs = [{"run_id": d.get("run_id"), "name": d.get("name"), "status": d.get("status"),
             "created_at": d.get("created_at"), "fingerprint": _fingerprint(d)} for d in docs]
    warnings = []
    if len(runs) > 1 and _differ(runs, "case_set_revision"):
        revs = ", ".join(f"{r['run_id']}: {r['fingerprint']['case_set_revision'] or 'none'}" for r in runs)
        warnings.append(f"the runs have different case-set revisions ({revs}): the same case id may not be "
                        "the same case")
    if len(runs) > 1 and _differ(runs, "sampling"):
        sampling = "; ".join(f"{r['run_id']}: {sampling_text(r['fingerprint']['sampling'])}" for r in runs)
        warnings.append(f"the runs have different sampling settings ({sampling})")
    labels = _labels(docs)
    models, failures, errors = [], [], []
    for i, doc in enumerate(docs):
        for model in doc.get("models") or []:
            row, fails, errs = _model_row(doc.get("run_id"), labels[(i, model.get("model"))], model)
            models.append(row)
            failures += fails
            errors += errs
    points = [Point(m["model"], m["decode_tps"], m["rate"]) for m in models
              if m["decode_tps"] is not None and m["rate"] is not None]
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "runs": runs,
        "warnings": warnings,
        "models": models,
        "failures": failures,
        "errors": errors,
        "chart": {"points": [{"label": p.label, "decode_tps": p.speed, "rate": p.score} for p in points],
                  "pareto_front": [p.label for p in pareto_front(points)]},
        "notes": NOTES,
    }


def sampling_text(sampling: Any) -> str:
    """``temperature 0.0, max_tokens 4096`` (``-`` when not recorded)."""
    if not isinstance(sampling, dict) or not sampling:
        return "-"
    return ", ".join(f"{k} {v}" for k, v in sampling.items())
