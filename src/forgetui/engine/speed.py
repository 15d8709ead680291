"""The speed benchmark: prompts, cache busting, the request plan, and per-request records.

Every prompt starts with a unique nonce, so no prefix cache can serve it; ``temperature`` is 0 and
``max_tokens`` fixed so repeats are comparable. Warm-up requests are sent and stored but never
counted. A 1-token baseline request (tiny prompt, ``max_tokens = 1``) is measured first so that
prefill can be estimated on servers that do not report their own timings.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from .client import ChatRequest, StreamResult
from .metrics import NS, decode_rate, estimated_prefill, server_prefill, token_counts

# About 50, 200 and 800 characters, as bench-llm does. Each asks for a long answer so that
# max_tokens, not the model's sense of being done, ends the stream.
BUILTIN_PROMPTS: dict[str, str] = {
    "short": "Write a long, detailed story about a lighthouse keeper.",
    "medium": (
        "You are a patient teacher. Explain, step by step and at length, how a bicycle's gears, "
        "chain and derailleur work together, what changes when a rider shifts, and why cadence "
        "matters on a steep hill. Do not stop early."
    ),
    "long": (
        "Read the following notes from a small team's planning meeting, then write a long, "
        "well-organised project plan from them. Notes: the team maintains a command-line tool "
        "that benchmarks language models on local hardware. Users complain that numbers differ "
        "between runs, that a warm prompt cache makes some models look faster than they are, and "
        "that the tool hides which server version produced a result. The team wants repeatable "
        "measurements, a clear record of every request, results that survive a crash, and a "
        "summary a person can read at a glance. They have two engineers for six weeks, a shared "
        "GPU machine that other people also use during the day, and no budget for hosted APIs "
        "beyond a small monthly allowance. Risks they named: flaky network to the GPU machine, "
        "models that reason for a long time before answering, and servers that stream several "
        "tokens per event. Write the plan with goals, milestones per week, risks with mitigations, "
        "and how success will be measured. Be thorough and do not stop early."
    ),
}

BASELINE_PROMPT = "Reply with the single word: ok"


def nonce() -> str:
    """A unique prefix: defeats prefix caches, which key on the start of the prompt."""
    return f"[{secrets.token_hex(6)}] "


@dataclass(frozen=True)
class PlannedRequest:
    """One request of the speed plan; ``key`` identifies it across resumes."""

    model: str
    phase: str  # baseline, warmup, measure
    prompt: str  # prompt name ("baseline" for the 1-token probe)
    repeat: int

    @property
    def key(self) -> str:
        return f"{self.model}|speed|{self.prompt}|{self.phase}|{self.repeat}"

    @property
    def counted(self) -> bool:
        """Warm-ups are not measurements: they are re-sent after a resume."""
        return self.phase != "warmup"


def plan_model(model: str, speed: Any) -> list[PlannedRequest]:
    """The full request sequence for one model, in the order it is sent."""
    plan: list[PlannedRequest] = []
    if speed.prefill_baseline:
        plan.append(PlannedRequest(model, "warmup", "baseline", 0))
        plan += [PlannedRequest(model, "baseline", "baseline", i) for i in range(speed.repeats)]
    for name in speed.prompts:
        plan += [PlannedRequest(model, "warmup", name, i) for i in range(speed.warmup)]
        plan += [PlannedRequest(model, "measure", name, i) for i in range(speed.repeats)]
    return plan


def prune_done(plan: list[PlannedRequest], done: set[str]) -> list[PlannedRequest]:
    """Drop completed requests; drop a prompt's warm-ups too when none of its measurements remain."""
    remaining = [p for p in plan if p.counted and p.key not in done]
    needs = {(p.prompt) for p in remaining}
    return [p for p in plan if (p.counted and p.key not in done) or (not p.counted and p.prompt in needs)]


def speed_tokens_needed(speed: Any) -> int:
    """Context the longest speed request needs: prompt (about 4 characters a token, plus the nonce
    and a chat template's overhead) and the tokens to generate."""
    longest = max(len(prompt_text(name, speed)) for name in speed.prompts)
    return longest // 4 + 64 + speed.max_tokens


def prompt_text(name: str, speed: Any) -> str:
    if name == "baseline":
        return BASELINE_PROMPT
    return speed.prompt_text.get(name) or BUILTIN_PROMPTS[name]


def build_request(planned: PlannedRequest, speed: Any, base_url: str, model_id: str,
                  api_key: str | None, extra_body: dict[str, Any]) -> ChatRequest:
    """The chat request for a planned speed request, with a fresh nonce."""
    text = nonce() + prompt_text(planned.prompt, speed)
    return ChatRequest(
        base_url=base_url,
        model=model_id,
        messages=[{"role": "user", "content": text}],
        max_tokens=1 if planned.prompt == "baseline" else speed.max_tokens,
        temperature=speed.temperature,
        extra_body=dict(extra_body),
        api_key=api_key,
    )


def request_record(request: ChatRequest, result: StreamResult,
                   baseline: tuple[int, float] | None) -> dict[str, Any]:
    """The stored evidence and metrics of one request (the ``request`` object in records)."""
    acc = result.acc
    prompt = request.messages[-1]["content"]
    counts = token_counts(acc.usage, acc.timings, acc.content, acc.reasoning, acc.token_events, len(prompt))
    t0 = result.t_sent_ns

    def since(t: int | None) -> float | None:
        return None if t is None or t0 is None else (t - t0) / NS

    ttft = since(acc.t_first_token_ns)
    prefill = server_prefill(acc.timings)
    prefill_source = "server" if prefill is not None else None
    if prefill is None and request.max_tokens > 1:
        prefill = estimated_prefill(counts["prompt_tokens"], ttft, baseline)
        prefill_source = "estimate" if prefill is not None else None
    return {
        "ok": result.ok,
        "outcome": result.outcome,
        "error": result.error,
        "http_status": result.http_status,
        "attempts": result.attempts,
        "retries": result.retries,
        "response_id": acc.response_id,
        "ttfr_s": since(acc.t_first_event_ns),
        "ttft_s": ttft,
        "ttft_reasoning_s": since(acc.t_first_reasoning_ns),
        "ttft_content_s": since(acc.t_first_content_ns),
        "decode_tps": decode_rate(counts["completion_tokens"], acc.token_events,
                                  acc.t_first_token_ns, acc.t_last_token_ns),
        "prefill_tps": prefill,
        "prefill_source": prefill_source,
        "e2e_s": since(acc.t_last_token_ns),
        "connect_s": result.t_connect_ns / NS if result.t_connect_ns is not None else None,
        **counts,
        "events": acc.token_events,
        "data_events": acc.data_events,
        "comments": result.comments,
        "bytes": result.bytes,
        "malformed_events": len(acc.malformed),
        "finish_reason": acc.finish_reason,
        "max_tokens": request.max_tokens,
        "stream_options_dropped": result.stream_options_dropped,
        "prompt": prompt,
        "content": acc.content,
        "reasoning": acc.reasoning,
        "tool_calls": [c.as_dict() for c in acc.tool_calls],
        "usage": acc.usage,
        "timings": acc.timings,
        "clock": {
            "t_call_ns": result.t_call_ns,
            "t_sent_ns": t0,
            "t_headers_ns": result.t_headers_ns,
            "t_first_event_ns": acc.t_first_event_ns,
            "t_first_token_ns": acc.t_first_token_ns,
            "t_last_token_ns": acc.t_last_token_ns,
            "t_end_ns": result.t_end_ns,
        },
    }


def baseline_from(records: list[dict[str, Any]]) -> tuple[int, float] | None:
    """(prompt tokens, median TTFT) of the measured 1-token baseline requests, if any succeeded."""
    points = [
        (r["prompt_tokens"], r["ttft_s"])
        for r in records
        if r.get("ok") and r.get("ttft_s") is not None and r.get("prompt_tokens")
    ]
    if not points:
        return None
    points.sort(key=lambda p: p[1])
    return points[len(points) // 2]
