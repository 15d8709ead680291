"""The Markdown rendering of a report (``build_report``'s dict): plain text, no UI library."""

from __future__ import annotations

from typing import Any

from forgetui.report.build import sampling_text
from forgetui.report.chart import Point, text_chart
from forgetui.report.summary import cost_text

MODEL_HEADER = ["model", "pass rate", "95% CI", "Hard %", "decode tok/s", "TTFT", "tokens in", "tokens out",
                "cost", "recoveries", "errors", "skipped"]
CATEGORY_HEADER = ["model", "category", "pass rate", "95% CI", "errors", "skipped"]


def _cell(value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _tokens(model: dict[str, Any], key: str) -> str | None:
    value = (model.get("tokens") or {}).get(key)
    return None if value is None else f"{value:,}"


def _cost(value: float | None) -> str:
    return "-" if value is None else cost_text(value).removeprefix("cost ")


def _fingerprint_lines(run: dict[str, Any]) -> list[str]:
    fp = run["fingerprint"]
    lines = [f"### Run {run['run_id']}", ""]
    facts = [
        ("name", run.get("name")),
        ("status", run.get("status")),
        ("created", run.get("created_at")),
        ("forgetui", fp.get("forgetui_version")),
        ("case set revision", fp.get("case_set_revision") or "none"),
        ("sampling", sampling_text(fp.get("sampling"))),
        ("judge", fp.get("judge") or "none"),
        ("platform", " / ".join(x for x in (fp.get("platform"), fp.get("python") and f"Python {fp['python']}") if x)
         or None),
    ]
    lines += [f"- {name}: {value}" for name, value in facts if value is not None]
    for provider, server in fp.get("servers", {}).items():
        if server.get("error"):
            lines.append(f"- server {provider}: unreachable ({server['error']})")
            continue
        parts = [server.get("kind"), server.get("base_url"), server.get("server_header")]
        lines.append(f"- server {provider}: {', '.join(str(p) for p in parts if p)}")
    return lines + [""]


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: fingerprint, warnings, model and category tables, chart, failures,
    errors, notes."""
    lines = ["# forgetui report", ""]
    for run in report["runs"]:
        lines += _fingerprint_lines(run)
    for warning in report["warnings"]:
        lines += [f"> **Warning:** {warning}", ""]
    models = report["models"]
    lines += ["## Models", ""]
    lines += _table(MODEL_HEADER, [[
        m["model"], m["rate_text"], m["interval_text"], m["hard"]["rate_text"],
        None if m["decode_tps"] is None else f"{m['decode_tps']:.1f}",
        None if m["ttft_s"] is None else f"{m['ttft_s']:.3f}s",
        _tokens(m, "input"), _tokens(m, "output"), _cost(m["cost_usd"]), m["recoveries"], m["errors"],
        m["skipped"],
    ] for m in models])
    repeated = [m for m in models if m.get("repeats")]
    if repeated:
        lines += ["", "## Repeats", "",
                  "Each case was asked k times. pass@1: the chance one attempt passes (95% Wilson interval "
                  "over all attempts); pass^k: all k attempts pass, what an unattended agent loop needs.", ""]
        lines += [f"- {m['model']}: {m['repeats']['line']}" for m in repeated]
    lines += ["", "## Categories", ""]
    lines += _table(CATEGORY_HEADER, [[m["model"], c["category"], c["rate_text"], c["interval_text"],
                                       c["errors"], c["skipped"]] for m in models for c in m["categories"]])
    points = [Point(p["label"], p["decode_tps"], p["rate"]) for p in report["chart"]["points"]]
    lines += ["", "## Pass rate against decode rate", "", "```", text_chart(points), "```", ""]
    lines += ["## Failures", ""]
    lines += _grouped(report["failures"]) or ["No failures.", ""]
    lines += ["## Errors and skipped cases (not counted in pass rates)", ""]
    lines += _grouped(report["errors"]) or ["No errors.", ""]
    lines += ["## Notes", ""]
    lines += [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def _grouped(entries: list[dict[str, Any]]) -> list[str]:
    """Entries under one ``### model`` heading each, already ordered by category."""
    lines: list[str] = []
    current = None
    for entry in entries:
        if entry["model"] != current:
            if current is not None:
                lines.append("")
            current = entry["model"]
            lines += [f"### {current}", ""]
        lines.append(f"- {entry['line']}")
    return lines + [""] if lines else []
