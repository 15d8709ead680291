"""The plain-text summary table printed at the end of a headless run."""

from __future__ import annotations

from typing import Any


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _stat(stats: dict[str, Any] | None, key: str, spec: str) -> str:
    return "-" if not stats else _fmt(stats.get(key), spec)


def summary_table(doc: dict[str, Any]) -> str:
    """One row per model and prompt: TTFT, decode and prefill rates, tokens and flags."""
    header = ["model", "prompt", "ok", "ttft med", "ttft p95", "decode tok/s", "+/-", "prefill tok/s", "tokens", "flags"]
    rows: list[list[str]] = []
    for model in doc.get("models", []):
        speed = model.get("speed")
        if model.get("error"):
            rows.append([model["model"], "-", "-", "-", "-", "-", "-", "-", "-", f"error: {model['error']}"[:80]])
            continue
        if not speed:
            continue
        for prompt in speed["prompts"]:
            s = prompt["summary"]
            prefill = _stat(s["prefill_tps"], "median", ".0f")
            if prefill != "-" and s.get("prefill_source") == "estimate":
                prefill += " est"
            rows.append([
                model["model"],
                prompt["name"],
                f"{s['ok']}/{s['requests']}",
                _stat(s["ttft_s"], "median", ".3f") + ("s" if s["ttft_s"] else ""),
                _stat(s["ttft_s"], "p95", ".3f") + ("s" if s["ttft_s"] else ""),
                _stat(s["decode_tps"], "median", ".1f"),
                _stat(s["decode_tps"], "stdev", ".1f"),
                prefill,
                _stat(s["completion_tokens"], "median", ".0f"),
                ", ".join(s["flags"]),
            ])
    if not rows:
        return "No results."
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    totals = doc.get("totals", {})
    lines.append("")
    lines.append(
        f"{totals.get('ok', 0)}/{totals.get('requests', 0)} requests ok, "
        f"{totals.get('completion_tokens', 0)} tokens generated; status: {doc.get('status')}"
    )
    return "\n".join(lines)
