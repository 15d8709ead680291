"""What the failure inspector shows about one case result, as Rich ``Text`` (never markup).

Model text is never parsed as markup, and control characters (ESC included) are made visible,
so an answer cannot style the screen or send escape sequences to the terminal.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from ..widgets.text import inert as clean

#: Reasoning longer than this is cut to its start and (mostly) its end.
REASONING_KEEP = 6000
#: Each prompt message longer than this is cut (long-context cases send whole documents).
PROMPT_KEEP = 4000
#: Longer answers show their start and end (y still copies all of it).
RESPONSE_KEEP = 40000
SANDBOX_KEYS = ("sandbox_status", "sandbox_label", "sandbox_reason", "exit_code", "signal", "wall_s",
                "cpu_s", "sandboxed", "stdout_tail", "stderr_tail", "stdout_truncated", "stderr_truncated",
                "language", "extraction_method", "extraction_note", "code")
STATUS_STYLE = {"fail": "bold red", "error": "bold yellow"}
GLYPH = {"fail": "✗", "error": "!"}
def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def pretty(value: Any, indent: bool = False) -> str:
    """Strings as they are; lists one item a line, dicts one key a line (values as compact JSON,
    long lists again one item a line); ``indent`` gives plain indented JSON."""
    if isinstance(value, str):
        return clean(value)
    if indent or not value or not isinstance(value, (list, dict)):
        return clean(json.dumps(value, indent=2 if indent else None, ensure_ascii=False, default=str))
    if isinstance(value, list):
        return clean("\n".join(f"• {_compact(v)}" for v in value))
    lines = []
    for key, v in value.items():
        if isinstance(v, list) and v and len(_compact(v)) > 80:
            lines += [f"{key}:", *(f"  • {_compact(i)}" for i in v)]
        else:
            lines.append(f"{key}: {_compact(v)}")
    return clean("\n".join(lines))


def cut(text: str, keep: int, head: int) -> tuple[str, int]:
    """The first ``head`` and last ``keep - head`` characters of a long text, and how many were left out."""
    if len(text) <= keep:
        return text, 0
    return text[:head] + "\n…\n" + text[-(keep - head):], len(text) - keep


def section(title: str, body: str | Text | None, style: str = "") -> Text:
    """A titled block; an empty body is one compact line ("none")."""
    out = Text(title, style="bold underline")
    if body is None or (isinstance(body, str) and not body.strip()) or (isinstance(body, Text) and not body.plain.strip()):
        out.append("  none", style="dim")
        return out
    out.append("\n")
    if isinstance(body, Text):
        out.append_text(body)
    else:
        out.append(clean(body), style=style)
    return out


def render_case(model: str, c: dict[str, Any]) -> dict[str, Text]:
    """Every section of the detail pane for one case result (the names match the screen's widgets)."""
    details = c.get("details") if isinstance(c.get("details"), dict) else {}
    status = str(c.get("status", "?"))
    summary = Text.assemble((f"{status.upper()}  ", STATUS_STYLE.get(status, "bold")), (clean(c.get("case_id", "?")), "bold"))
    meta = [clean(model), clean(c.get("category") or "?"), "hard" if c.get("hard") else "standard",
            f"grader {clean(c.get('grader') or '?')}"]
    if c.get("tags"):
        meta.append("tags " + clean(", ".join(map(str, c["tags"]))))
    summary.append("\n" + " · ".join(meta), style="dim")
    summary.append("\nreason: ", style="bold")
    summary.append(clean(c.get("reason") or "-"))
    reasoning, left_out = cut(clean(c.get("reasoning") or ""), REASONING_KEEP, REASONING_KEEP // 4)
    reasoning_text = Text(reasoning, style="dim") if reasoning else None
    if left_out and reasoning_text is not None:
        reasoning_text.append(f"\n[{left_out:,} characters of reasoning left out in the middle]", style="italic")
    return {
        "summary": summary,
        "expected": section("Expected", None if c.get("expected") is None else pretty(c.get("expected"))),
        "extracted": section("Extracted", None if c.get("extracted") is None else pretty(c.get("extracted"))),
        "prompt": section("Prompt", _prompt(c.get("prompt"))),
        "response": section("Response", _response(c.get("response"))),
        "reasoning": section("Reasoning", reasoning_text),
        "tools": section("Tool calls", pretty(c["tool_calls"], indent=True) if c.get("tool_calls") else None),
        "sandbox": section("Sandbox output", _sandbox(details)),
        "judge": _judge(details),
        "details": section("Grader details", _other_details(details)),
        "usage": section("Usage and timings", _usage(c)),
    }


def _prompt(messages: Any) -> Text | None:
    if not messages:
        return None
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    out = Text()
    for m in messages if isinstance(messages, list) else [messages]:
        m = m if isinstance(m, dict) else {"role": "?", "content": m}
        extra = f" ({clean(m.get('name') or m.get('tool_call_id'))})" if m.get("name") or m.get("tool_call_id") else ""
        out.append(f"── {clean(m.get('role', '?'))}{extra} ──\n", style="bold")
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") if isinstance(p, dict) and p.get("type") == "text"
                                else json.dumps(p, ensure_ascii=False) for p in content)
        body, left_out = cut(clean(content or ""), PROMPT_KEEP, PROMPT_KEEP // 2)
        out.append(body.rstrip() + "\n")
        if left_out:
            out.append(f"[{left_out:,} characters left out in the middle]\n", style="italic dim")
        if m.get("tool_calls"):
            out.append(pretty(m["tool_calls"], indent=True) + "\n", style="dim")
    out.rstrip()
    return out


def _sandbox(d: dict[str, Any]) -> Text | None:
    if not any(k in d for k in SANDBOX_KEYS):
        return None
    out = Text()
    if "sandbox_status" in d:
        label = f" ({d['sandbox_label']})" if d.get("sandbox_label") and d.get("sandbox_label") != d.get("sandbox_status") else ""
        bits = [f"status {d.get('sandbox_status')}{label}", f"exit {d.get('exit_code')}"]
        if d.get("signal") is not None:
            bits.append(f"signal {d['signal']}")
        for key, name in (("wall_s", "wall"), ("cpu_s", "cpu")):
            if isinstance(d.get(key), (int, float)):
                bits.append(f"{name} {d[key]:.2f} s")
        bits.append("sandboxed" if d.get("sandboxed", True) else "NOT sandboxed")
        out.append(clean(" · ".join(bits)) + "\n")
        if d.get("sandbox_reason"):
            out.append(f"reason: {clean(d['sandbox_reason'])}\n")
    if "extraction_method" in d or "language" in d:
        note = f" ({clean(d['extraction_note'])})" if d.get("extraction_note") else ""
        out.append(f"language {clean(d.get('language') or '?')} · extraction {clean(d.get('extraction_method') or '?')}{note}\n")
    for key, title in (("code", "code run"), ("stdout_tail", "stdout"), ("stderr_tail", "stderr")):
        if key not in d:
            continue
        flag = " (tail, truncated)" if d.get(key.replace("_tail", "_truncated")) and key != "code" else ""
        out.append(f"── {title}{flag} ──\n", style="bold")
        out.append((clean(d[key]).rstrip() or "(empty)") + "\n", style="" if d[key] else "dim")
    out.rstrip()
    return out


def _judge(d: dict[str, Any]) -> Text:
    found = {k: v for k, v in d.items() if k.startswith("judge")}
    if not found:
        out = Text("Judge comment", style="bold underline")
        out.append("  no judge", style="dim")
        return out
    body = found.get("judge") if len(found) == 1 and "judge" in found else found
    return section("Judge comment", pretty(body))


def _other_details(d: dict[str, Any]) -> str | None:
    rest = {k: v for k, v in d.items() if k not in SANDBOX_KEYS and not k.startswith("judge")}
    return pretty(rest) if rest else None


def _usage(c: dict[str, Any]) -> Text:
    out = Text()
    bits = []
    for key, name in (("outcome", "outcome"), ("finish_reason", "finish"), ("steps", "steps")):
        if c.get(key) is not None:
            bits.append(f"{name} {c[key]}")
    for key, name in (("ttft_s", "ttft"), ("e2e_s", "e2e")):
        if isinstance(c.get(key), (int, float)):
            bits.append(f"{name} {c[key]:.3f} s")
    out.append(clean(" · ".join(bits) or "no timings"))
    if c.get("error"):
        out.append("\nerror: ", style="bold")
        out.append(clean(c["error"]))
    for key in ("usage", "timings"):
        if c.get(key):
            out.append(f"\n{key}: ", style="bold")
            out.append(clean(json.dumps(c[key], ensure_ascii=False, default=str)))
    tokens = c.get("tokens") if isinstance(c.get("tokens"), dict) else None
    if tokens:
        out.append("\ntokens: ", style="bold")
        out.append(f"in {tokens.get('input')}, out {tokens.get('output')}, reasoning {tokens.get('reasoning')}"
                   " (all attempts)")
        if c.get("cost_usd") is not None:
            out.append(f", cost ${c['cost_usd']:.6f}")
    if c.get("rate_limited"):
        out.append(f"\nrate limited {c['rate_limited']} time(s) (429), sent again", style="yellow")
    if c.get("recovered"):
        how = c.get("recovery") if isinstance(c.get("recovery"), dict) else {}
        out.append("\nrecovered: ", style="bold")
        out.append(clean(f"the first answer was lost to thinking; re-asked with thinking off ({how.get('switch', '?')})"))
    for i, attempt in enumerate(c.get("attempts") or [], 1):
        if not isinstance(attempt, dict):
            continue
        out.append(f"\nearlier attempt {i}: ", style="bold")
        bits = [f"outcome {attempt.get('outcome')}", f"finish {attempt.get('finish_reason')}",
                f"{len(attempt.get('response') or '')} chars of answer",
                f"{len(attempt.get('reasoning') or '')} chars of reasoning"]
        if attempt.get("reason") or attempt.get("error"):
            bits.append(str(attempt.get("reason") or attempt.get("error")))
        out.append(clean(" · ".join(bits)))
        if attempt.get("usage"):
            out.append(clean(f" · usage {json.dumps(attempt['usage'], ensure_ascii=False, default=str)}"), style="dim")
    if c.get("response_id"):
        out.append(f"\nresponse id {clean(c['response_id'])}", style="dim")
    return out


def _response(text: Any) -> Text | None:
    body, left_out = cut(clean(text or ""), RESPONSE_KEEP, RESPONSE_KEEP // 4)
    if not body:
        return None
    out = Text(body)
    if left_out:
        out.append(f"\n[{left_out:,} characters left out in the middle; y copies all of them]", style="italic dim")
    return out
