"""The small per-run index (``summary.json``): what a list of runs needs, without the raw evidence.

``run.json`` holds every request and answer (megabytes for a long run); listing hundreds of runs
must not parse all of that. ``summarize_run`` reduces a run document to a few hundred bytes; the
store writes its result next to every ``run.json`` and falls back to reducing ``run.json`` itself
for runs written before the index existed.
"""

from __future__ import annotations

import statistics
from typing import Any

SUMMARY_SCHEMA_VERSION = 1

#: Top-level fields copied from run.json as they are.
_COPIED = ("run_id", "name", "status", "created_at", "updated_at", "totals")


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _cases(summary: Any) -> dict[str, Any] | None:
    """Pass/fail/error/skipped counts and the quick set's scores of one model's ``cases_summary``."""
    if not isinstance(summary, dict):
        return None
    counts = {"pass": 0, "fail": 0, "error": 0, "skipped": 0}
    for cat in (summary.get("by_category") or {}).values():
        if isinstance(cat, dict):
            for status in counts:
                counts[status] += int(cat.get(status) or 0)
    reduced: dict[str, Any] = {
        "total": summary.get("total", sum(counts.values())),
        "passed": summary.get("passed", counts["pass"]),
        "failed": counts["fail"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "recoveries": int(summary.get("recoveries") or 0),
        "reasks": int(summary.get("reasks") or 0),
    }
    for score in ("ability_score", "agent_fitness_score"):
        if isinstance(summary.get(score), dict):
            reduced[score] = summary[score]
    return reduced


def speed_headline(speed: Any) -> dict[str, Any] | None:
    """Median decode tok/s and median TTFT over the measured requests that finished cleanly."""
    if not isinstance(speed, dict):
        return None
    decode: list[float] = []
    ttft: list[float] = []
    clean = 0
    for prompt in speed.get("prompts") or []:
        for req in prompt.get("requests") or []:
            if not isinstance(req, dict) or not req.get("ok"):
                continue
            clean += 1
            if (value := _number(req.get("decode_tps"))) is not None:
                decode.append(value)
            if (value := _number(req.get("ttft_s"))) is not None:
                ttft.append(value)
    if not decode and not ttft:
        return None
    return {"decode_tps": _median(decode), "ttft_s": _median(ttft), "requests": clean}


def summarize_run(doc: dict[str, Any]) -> dict[str, Any]:
    """The ``summary.json`` of a run document (docs/results-format.md, "summary.json").

    Tolerates partial documents (a run.json written before any model finished, or by an older
    version): missing parts are ``None`` or empty, never an exception.
    """
    summary: dict[str, Any] = {"schema_version": SUMMARY_SCHEMA_VERSION}
    for key in _COPIED:
        summary[key] = doc.get(key)
    models = [m for m in doc.get("models") or [] if isinstance(m, dict)]
    summary["targets"] = [m.get("model") for m in models]
    summary["models"] = [
        {
            "model": m.get("model"),
            "error": m.get("error"),
            "cases_summary": _cases(m.get("cases_summary")),
            "speed": speed_headline(m.get("speed")),
            # Tokens in/out (reasoning apart) and dollars; None in runs written before they existed.
            "tokens": m.get("tokens"),
            "cost_usd": m.get("cost_usd"),
            "judge_tokens": m.get("judge_tokens"),
            "judge_cost_usd": m.get("judge_cost_usd"),
        }
        for m in models
    ]
    return summary
