"""The plain-text summary table printed at the end of a headless run."""

from __future__ import annotations

from typing import Any

from ..engine.repeats import repeats_line


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _stat(stats: dict[str, Any] | None, key: str, spec: str) -> str:
    return "-" if not stats else _fmt(stats.get(key), spec)


def human_bytes(n: int | None) -> str:
    if not n:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def human_count(n: int | None) -> str:
    if not n:
        return "-"
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{unit}".replace(".0", "")
    return str(n)


def describe_model(model: dict[str, Any]) -> str:
    """One line about a benchmarked model: server kind, quantization, size, context."""
    info = model.get("model_info") or {}
    gguf = info.get("gguf") or {}
    parts = []
    quant = info.get("quantization") or gguf.get("file_type")
    if quant:
        parts.append(quant)
    params = info.get("parameters") or gguf.get("parameter_count")
    if params:
        parts.append(f"{human_count(params)} params")
    elif info.get("parameters_label"):
        parts.append(f"{info['parameters_label']} params")
    size = info.get("size_bytes") or gguf.get("tensor_bytes")
    if size:
        parts.append(human_bytes(size))
    context = info.get("context_length") or gguf.get("context_length")
    if context:
        parts.append(f"context {context}")
    return ", ".join(parts) or "no size or quantization reported by the server"


def model_lines(doc: dict[str, Any]) -> list[str]:
    """One line per benchmarked model: its facts and whether the GPU state was controlled."""
    lines = []
    for model in doc.get("models", []):
        if model.get("error"):
            continue
        line = f"{model['model']}: {describe_model(model)}"
        lifecycle = model.get("lifecycle") or {}
        if lifecycle and not lifecycle.get("controlled"):
            line += f"; GPU state not controlled ({lifecycle.get('reason')})"
        elif lifecycle.get("load_s") is not None:
            line += f"; loaded in {lifecycle['load_s']:.1f} s"
            if lifecycle.get("unloaded"):
                line += f" after unloading {', '.join(lifecycle['unloaded'])}"
        lines.append(line)
    return lines


def cases_lines(doc: dict[str, Any]) -> list[str]:
    """Per model: cases passed by category, the quick set's scores, and every non-pass with its reason."""
    lines: list[str] = []
    for model in doc.get("models", []):
        summary = model.get("cases_summary")
        if not summary:
            continue
        cats = ", ".join(f"{cat} {c['pass']}/{sum(c.values())}" for cat, c in summary["by_category"].items())
        recovered = f"; {summary['recoveries']} recovered (thinking off)" if summary.get("recoveries") else ""
        lost = (summary.get("reasks") or 0) - (summary.get("recoveries") or 0)
        recovered += f"; {lost} re-asked with thinking off, still no answer" if lost > 0 else ""
        lines.append(f"{model['model']}: {summary['passed']}/{summary['total']} cases passed ({cats}){recovered}")
        repeats = repeats_line(summary)  # k > 1 attempts per case; the counts above are first attempts
        if repeats:
            lines.append(f"  {repeats}")
        if "ability_score" in summary:
            score = summary["ability_score"]
            lines.append(f"Ability Score: {score['passed']}/{score['of']}")
        if "agent_fitness_score" in summary:
            score = summary["agent_fitness_score"]
            lines.append(f"Agent Fitness Score: {score['passed']}/{score['of']}")
        for case_id, status in (summary.get("variants") or {}).items():
            lines.append(f"Variant {case_id}: {status}")
        for case in model.get("cases", []):
            if case["status"] != "pass":
                lines.append(f"  {case['status'].upper():<7} {case['case_id']}: {case['reason']}")
    judge = (doc.get("fingerprint") or {}).get("judge")
    if lines and isinstance(judge, dict) and judge.get("model"):
        lines.append(judge_line(judge))
    return lines


def judge_line(judge: dict[str, Any]) -> str:
    """Which judge decided the judged cases and how it did on its calibration probes."""
    probes = judge.get("calibration")
    if not probes:
        return f"Judge: {judge['model']} (not calibrated: no judged answer needed it)"
    passed = sum(1 for p in probes if p.get("ok"))
    if judge.get("trusted"):
        return f"Judge: {judge['model']} (calibration {passed}/{len(probes)} probes)"
    used = "used anyway (force = true)" if judge.get("force") else "judged cases skipped"
    return f"Judge: {judge['model']} FAILED calibration ({passed}/{len(probes)} probes): {used}"


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def tokens_text(tokens: dict[str, Any] | None) -> str:
    """``tokens in N, out M (reasoning R)``; reasoning is part of out (OpenAI's counting)."""
    tokens = tokens or {}
    if all(tokens.get(k) is None for k in ("input", "output", "reasoning")):
        return "tokens unknown (no usage from the server)"
    text = f"tokens in {_count(tokens.get('input'))}, out {_count(tokens.get('output'))}"
    return text + (f" (reasoning {tokens['reasoning']})" if tokens.get("reasoning") is not None else "")


def cost_text(cost: float | None, priced: bool = True) -> str:
    """``cost $0.001234``, or why there is none."""
    if cost is None:
        return "cost: n/a (no prices)" if not priced else "cost: n/a (no token counts)"
    digits = 2 if cost >= 100 else 4 if cost >= 0.01 else 6
    return f"cost ${cost:,.{digits}f}"


def has_prices(prices: Any) -> bool:
    return isinstance(prices, dict) and None not in (prices.get("input_per_mtok"), prices.get("output_per_mtok"))


def usage_lines(doc: dict[str, Any]) -> list[str]:
    """Per model: tokens in/out (reasoning) and cost, its judge's apart; then the run's total."""
    lines = []
    models = [m for m in doc.get("models", []) if "tokens" in m and not m.get("error")]
    for model in models:
        lines.append(f"{model['model']}: {tokens_text(model['tokens'])}; "
                     f"{cost_text(model.get('cost_usd'), has_prices(model.get('prices')))}")
        judge = model.get("judge_tokens") or {}
        if any(v is not None for v in judge.values()):
            lines.append(f"{model['model']} judge: {tokens_text(judge)}; "
                         f"{cost_text(model.get('judge_cost_usd'), model.get('judge_cost_usd') is not None)}")
    totals = doc.get("totals") or {}
    if models and "tokens" in totals:
        priced = any(has_prices(m.get("prices")) for m in models)
        partial = priced and not all(has_prices(m.get("prices")) for m in models)
        line = f"total: {tokens_text(totals['tokens'])}; {cost_text(totals.get('cost_usd'), priced)}"
        lines.append(line + (" (models without prices not counted)" if partial else ""))
        if totals.get("judge_cost_usd") is not None:
            lines.append(f"total judge: {tokens_text(totals.get('judge_tokens'))}; {cost_text(totals['judge_cost_usd'])}")
    return lines


SPEED_HEADER = ["model", "prompt", "ok", "ttft med", "ttft p95", "decode tok/s", "+/-", "prefill tok/s", "tokens",
                "flags"]


def speed_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One row (cells under ``SPEED_HEADER``) per model and prompt; a model that failed gets one error row."""
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
    return rows


def format_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, with a dashed rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def summary_table(doc: dict[str, Any]) -> str:
    """One row per model and prompt: TTFT, decode and prefill rates, tokens and flags."""
    rows = speed_rows(doc)
    case_lines = cases_lines(doc)
    if not rows and not case_lines:
        return "No results."
    facts = model_lines(doc)
    lines = [*facts, ""] if facts else []
    if rows:
        lines += format_table(SPEED_HEADER, rows)
    if case_lines:
        lines += ["", *case_lines]
    usage = usage_lines(doc)
    if usage:
        lines += ["", *usage]
    totals = doc.get("totals", {})
    lines.append("")
    lines.append(
        f"{totals.get('ok', 0)}/{totals.get('requests', 0)} requests ok, "
        f"{totals.get('completion_tokens', 0)} tokens generated; status: {doc.get('status')}"
    )
    return "\n".join(lines)
