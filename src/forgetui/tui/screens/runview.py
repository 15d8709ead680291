"""Plain-text views of stored runs for the Results and Compare screens (no widgets here).

The tables reuse ``forgetui.report.summary`` so that the TUI and ``forgetui --run`` print the same
numbers the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...report.summary import (SPEED_HEADER, cases_lines, cost_text, format_table, has_prices, model_lines,
                               speed_rows, tokens_text)


def local_time(value: Any) -> str:
    """An ISO 8601 UTC time as local ``YYYY-MM-DD HH:MM``; anything else as it is."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M")
        except ValueError:
            return value
    return "-" if value is None else str(value)


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.0f}%"


def run_row(summary: dict[str, Any]) -> tuple[str, ...]:
    """The cells of one run in the runs table (from ``summary.json``), without the mark column."""
    targets = [t for t in summary.get("targets") or [] if t]
    models = targets[0] if targets else "-"
    if len(targets) > 1:
        models += f" +{len(targets) - 1}"
    passed = failed = errors = 0
    have_cases = False
    for model in summary.get("models") or []:
        cases = model.get("cases_summary")
        if cases:
            have_cases = True
            passed += cases.get("passed") or 0
            failed += cases.get("failed") or 0
            errors += cases.get("errors") or 0
    totals = summary.get("totals") or {}
    requests = f"{totals.get('ok', 0)}/{totals.get('requests', 0)}" if totals.get("requests") else "-"
    return (
        local_time(summary.get("created_at")),
        str(summary.get("name") or "-"),
        str(summary.get("status") or "?"),
        models,
        f"{passed}/{failed}/{errors}" if have_cases else "-",
        requests,
    )


def _sandbox(fingerprint: dict[str, Any]) -> str:
    box = fingerprint.get("sandbox")
    if not box:
        return "not used"
    if box.get("ok"):
        return f"ok ({box.get('version') or box.get('bwrap') or 'bwrap'})"
    state = "UNSANDBOXED" if box.get("allow_unsandboxed") else "unusable, code cases skipped"
    problems = "; ".join(box.get("problems") or [])
    return f"{state}{': ' + problems if problems else ''}"


def header_lines(doc: dict[str, Any]) -> list[str]:
    """Who, when and under what conditions a run ran."""
    fp = doc.get("fingerprint") or {}
    totals = doc.get("totals") or {}
    lines = [
        f"Run {doc.get('run_id', '?')}   status: {doc.get('status', '?')}",
        f"created {local_time(doc.get('created_at'))}   updated {local_time(doc.get('updated_at'))}   "
        f"profile: {doc.get('name', '-')}",
        f"forgetui {fp.get('forgetui_version') or doc.get('forgetui_version') or '?'}   "
        f"case set: {fp.get('case_set_revision') or 'none'}   sandbox: {_sandbox(fp)}",
        f"requests: {totals.get('ok', 0)}/{totals.get('requests', 0)} ok   "
        f"cases: {totals.get('cases_passed', 0)} passed, {totals.get('cases_failed', 0)} failed or errored "
        f"of {totals.get('cases', 0)}",
    ]
    if doc.get("resumes"):
        lines.append(f"resumed {len(doc['resumes'])}x, last {local_time(doc['resumes'][-1])}")
    return lines


def category_lines(row: dict[str, Any]) -> list[str]:
    """One model's categories from ``forgetui report``'s data (report.build): pass rate with raw
    counts and the 95% Wilson interval; errors and skipped cases apart, never in the rate."""
    rows = [[c["category"], c["rate_text"], c["interval_text"], str(c["errors"]), str(c["skipped"])]
            for c in row.get("categories") or []]
    if not rows:
        return []
    rows.append(["all", row["rate_text"], row["interval_text"], str(row["errors"]), str(row["skipped"])])
    return format_table(["category", "pass rate", "95% CI", "errors", "skipped"], rows)


def model_section(model: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """One model of a run: facts, categories, failures and errors (as ``forgetui report`` lists
    them), the quick set's scores, the speed table."""
    label = model.get("model", "?")
    lines = [f"== {label} " + "=" * max(0, 60 - len(label))]
    if model.get("error"):
        return lines + [f"not benchmarked: {model['error']}"]
    one = {"models": [model]}
    lines += [line.split(": ", 1)[1] if line.startswith(f"{label}: ") else line for line in model_lines(one)]
    row = next((r for r in report["models"] if r["model"] == label), None)
    table = category_lines(row) if row else []
    if table:
        hard = row.get("hard") or {}
        lines += ["", *table]
        if hard.get("graded"):
            lines.append(f"hard cases: {hard['rate_text']} {hard['interval_text']}")
        if row.get("repeats"):
            lines.append(row["repeats"]["line"])
        if row.get("tokens"):
            lines.append(f"{tokens_text(row['tokens'])}; {cost_text(row.get('cost_usd'), has_prices(model.get('prices')))}")
        complete = "by_category" in (model.get("cases_summary") or {})
        scores = [line for line in cases_lines(one)[1:] if not line.startswith("  ")] if complete else []
        lines += scores  # Ability / Agent Fitness scores and variants; each failure is listed below
        failures = [f["line"].split(" ", 1)[1] for f in report["failures"] if f["model"] == label]
        errors = [e["line"].split(" ", 1)[1] for e in report["errors"] if e["model"] == label]
        if failures:
            lines += ["", f"failures ({len(failures)}):", *(f"  {line}" for line in failures)]
        if errors:
            lines += ["", f"errors and skipped, not counted in the rate ({len(errors)}):",
                      *(f"  {line}" for line in errors)]
    rows = speed_rows(one)
    if rows:
        lines += ["", "speed:", *format_table(SPEED_HEADER[1:], [r[1:] for r in rows])]
    return lines


def detail_text(doc: dict[str, Any]) -> str:
    """The whole detail pane for one run."""
    from ...report.build import build_report

    lines = header_lines(doc)
    report = build_report([doc])
    for model in doc.get("models") or []:
        lines += ["", *model_section(model, report)]
    if not doc.get("models"):
        lines += ["", "No model results in this run yet."]
    return "\n".join(lines)


def _num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def compare_lines(result: dict[str, Any]) -> list[str]:
    """Per category pass rates and speed medians of a ``compare_models`` result, as text tables."""
    lines: list[str] = []
    rows = []
    for item in [*result["categories"], {"category": "all", **result["overall"]}]:
        a, b = item["a"], item["b"]
        rows.append([
            item["category"],
            f"{a['pass']}/{a['pass'] + a['fail'] + a['error']}" if a else "-",
            percent(a["rate"]) if a else "-",
            f"{b['pass']}/{b['pass'] + b['fail'] + b['error']}" if b else "-",
            percent(b["rate"]) if b else "-",
        ])
    if result["categories"]:
        lines += ["Cases passed (skipped cases not counted):",
                  *format_table(["category", "A passed", "A %", "B passed", "B %"], rows)]
    else:
        lines.append("No cases in either model.")
    lines.append("")
    if result["speed"]:
        speed = [[
            row["prompt"],
            _num(row["a_decode_tps"], ".1f"), _num(row["b_decode_tps"], ".1f"), _num(row["decode_ratio"], ".2f", "x"),
            _num(row["a_ttft_s"], ".3f", "s"), _num(row["b_ttft_s"], ".3f", "s"), _num(row["ttft_ratio"], ".2f", "x"),
        ] for row in result["speed"]]
        lines += ["Speed, medians of clean measured requests (ratio = B / A):",
                  *format_table(["prompt", "A tok/s", "B tok/s", "B/A", "A ttft", "B ttft", "B/A"], speed)]
    else:
        lines.append("No speed results in either model.")
    return lines
