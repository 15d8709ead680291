"""Pure metric functions: per-request speed figures and per-prompt summaries.

Definitions (docs/metrics.md holds the same table; keep them in step):

* ``ttfr_s``: clock start -> first SSE event that parses (may be a role-only chunk).
* ``ttft_s``: clock start -> first event carrying a generated token (content, reasoning or tool call).
* ``ttft_reasoning_s`` / ``ttft_content_s``: -> first reasoning token / first visible content or
  tool-call token.
* ``decode_tps``: tokens generated after the first token-bearing event divided by the time from the
  first to the last token-bearing event. Servers may put several tokens in one event, so the tokens
  of the first event are taken as the mean tokens per event (``N / events``), never as 1.
* ``prefill_tps``: uncached prompt tokens / prefill time, from the server's own timings when it
  reports them (``prefill_source = "server"``), else ``(prompt_tokens - p0) / (ttft - t0)`` where
  ``(p0, t0)`` come from a measured 1-token baseline request (``"estimate"``).
* ``e2e_s``: clock start -> last token-bearing event.

The clock starts when the request's last byte was handed to the socket (see engine.client).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

NS = 1_000_000_000

#: Summary flags, in the words a person sees.
SLOW_TTFT_S = 0.5
UNSTABLE_SPREAD = 0.10
#: The prefill estimate needs at least this much over the baseline to mean anything.
MIN_PREFILL_TOKENS = 32
MIN_PREFILL_S = 0.005


def _s(start: int | None, end: int | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start) / NS


def token_counts(
    usage: dict[str, Any] | None,
    timings: dict[str, Any] | None,
    content: str,
    reasoning: str,
    token_events: int,
    prompt_chars: int,
) -> dict[str, Any]:
    """Prompt/completion/reasoning tokens and where they came from: usage, tokenizer, server or estimate.

    Never counts SSE events as tokens; an estimate (about 4 characters a token, and at least one
    token per event) is used only when the server gave no count, and is labelled as such.
    """
    usage = usage or {}
    timings = timings or {}
    details = usage.get("completion_tokens_details") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    out: dict[str, Any] = {
        "prompt_tokens": None,
        "completion_tokens": None,
        "reasoning_tokens": None,
        "cached_tokens": None,
        "token_source": "estimate",
    }
    if isinstance(usage.get("completion_tokens"), int):
        out["completion_tokens"] = usage["completion_tokens"]
        # A dialect that counted with the server's tokenizer after the stream says so.
        out["token_source"] = "tokenizer" if usage.get("source") == "tokenizer" else "usage"
    elif isinstance(timings.get("predicted_n"), int):
        out["completion_tokens"] = timings["predicted_n"]
        out["token_source"] = "server"
    else:
        estimate = math.ceil((len(content) + len(reasoning)) / 4)
        out["completion_tokens"] = max(token_events, estimate)
    if isinstance(usage.get("prompt_tokens"), int):
        out["prompt_tokens"] = usage["prompt_tokens"]
    elif isinstance(timings.get("prompt_n"), int):
        out["prompt_tokens"] = timings["prompt_n"] + int(timings.get("cache_n") or 0)
    else:
        out["prompt_tokens"] = max(1, math.ceil(prompt_chars / 4))
    if isinstance(details.get("reasoning_tokens"), int):
        out["reasoning_tokens"] = details["reasoning_tokens"]
    elif reasoning and out["token_source"] == "estimate":
        out["reasoning_tokens"] = math.ceil(len(reasoning) / 4)
    if isinstance(prompt_details.get("cached_tokens"), int):
        out["cached_tokens"] = prompt_details["cached_tokens"]
    elif isinstance(timings.get("cache_n"), int):
        out["cached_tokens"] = timings["cache_n"]
    return out


def decode_rate(completion_tokens: int | None, token_events: int, first_ns: int | None, last_ns: int | None) -> float | None:
    """Tokens after the first token-bearing event per second of streaming; None if undefined."""
    if not completion_tokens or token_events < 2 or first_ns is None or last_ns is None:
        return None
    elapsed = (last_ns - first_ns) / NS
    if elapsed <= 0:
        return None
    after_first = completion_tokens - completion_tokens / token_events
    return after_first / elapsed


def server_prefill(timings: dict[str, Any] | None) -> float | None:
    """Prefill tokens/s from llama.cpp-style timings (uncached ``prompt_n`` over ``prompt_ms``)."""
    if not timings:
        return None
    n, ms = timings.get("prompt_n"), timings.get("prompt_ms")
    if isinstance(n, (int, float)) and isinstance(ms, (int, float)) and n > 0 and ms > 0:
        return n / (ms / 1000)
    return None


def estimated_prefill(
    prompt_tokens: int | None,
    ttft_s: float | None,
    baseline: tuple[int, float] | None,
) -> float | None:
    """Client-side prefill estimate from TTFT minus a measured 1-token baseline (llama-benchy's idea)."""
    if baseline is None or prompt_tokens is None or ttft_s is None:
        return None
    base_tokens, base_ttft = baseline
    tokens = prompt_tokens - base_tokens
    elapsed = ttft_s - base_ttft
    # Below this the difference is jitter, not prefill: a number would be confidently wrong.
    if tokens < MIN_PREFILL_TOKENS or elapsed < MIN_PREFILL_S:
        return None
    return tokens / elapsed


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def describe(values: Iterable[float | None]) -> dict[str, float | int] | None:
    """n, mean, median, p95, stdev (sample; 0 for one value), min, max of the non-None values."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {
        "n": len(vals),
        "mean": statistics.fmean(vals),
        "median": statistics.median(vals),
        "p95": percentile(vals, 95),
        "stdev": statistics.stdev(vals) if len(vals) > 1 else 0.0,
        "min": min(vals),
        "max": max(vals),
    }


def summarize_requests(requests: list[dict[str, Any]], max_tokens: int | None = None) -> dict[str, Any]:
    """Summary of one prompt's measured requests, with flags a person can act on.

    Only requests that ended cleanly (``ok``) feed the statistics; the rest are counted as errors.
    """
    ok = [r for r in requests if r.get("ok")]
    errors = [r for r in requests if not r.get("ok")]
    summary: dict[str, Any] = {
        "requests": len(requests),
        "ok": len(ok),
        "errors": len(errors),
        "ttft_s": describe(r.get("ttft_s") for r in ok),
        "ttft_content_s": describe(r.get("ttft_content_s") for r in ok),
        "ttft_reasoning_s": describe(r.get("ttft_reasoning_s") for r in ok),
        "decode_tps": describe(r.get("decode_tps") for r in ok),
        "prefill_tps": describe(r.get("prefill_tps") for r in ok),
        "e2e_s": describe(r.get("e2e_s") for r in ok),
        "completion_tokens": describe(r.get("completion_tokens") for r in ok),
        "flags": [],
    }
    flags: list[str] = summary["flags"]
    ttft = summary["ttft_s"]
    if ttft and ttft["median"] > SLOW_TTFT_S:
        flags.append("slow to start")
    decode = summary["decode_tps"]
    if decode and decode["n"] >= 2 and decode["median"] > 0:
        spread = (decode["max"] - decode["min"]) / decode["median"]
        summary["decode_spread"] = spread
        if spread > UNSTABLE_SPREAD:
            flags.append("unstable")
    if errors:
        flags.append(f"{len(errors)} failed")
    if any((r.get("cached_tokens") or 0) > 0 for r in ok):
        flags.append("prompt cache hit")
    if any(r.get("token_source") == "estimate" for r in ok):
        flags.append("tokens estimated")
    if max_tokens and any(
        r.get("finish_reason") == "stop" and (r.get("completion_tokens") or 0) < max_tokens * 0.5
        for r in ok
    ):
        flags.append("stopped early")
    prefill_sources = {r.get("prefill_source") for r in ok if r.get("prefill_tps") is not None}
    summary["prefill_source"] = (
        "server" if prefill_sources == {"server"} else ("estimate" if prefill_sources else None)
    )
    return summary
