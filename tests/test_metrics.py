"""Tests for forgetui.engine.metrics: pure functions, checked against hand-computed values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from forgetui.engine.metrics import (
    NS,
    SLOW_TTFT_S,
    UNSTABLE_SPREAD,
    decode_rate,
    describe,
    estimated_prefill,
    percentile,
    server_prefill,
    summarize_requests,
    token_counts,
)


def tc(
    usage: dict[str, Any] | None = None,
    timings: dict[str, Any] | None = None,
    content: str = "",
    reasoning: str = "",
    token_events: int = 0,
    prompt_chars: int = 0,
) -> dict[str, Any]:
    return token_counts(usage, timings, content, reasoning, token_events, prompt_chars)


# --------------------------------------------------------------------------- token_counts


def test_usage_wins_over_timings_and_estimate() -> None:
    out = tc(
        usage={"prompt_tokens": 50, "completion_tokens": 7},
        timings={"prompt_n": 10, "cache_n": 5, "predicted_n": 99},
        content="x" * 400,
        token_events=300,
        prompt_chars=4000,
    )
    assert out == {
        "prompt_tokens": 50,
        "completion_tokens": 7,
        "reasoning_tokens": None,
        "cached_tokens": 5,  # usage has no prompt_tokens_details, so timings cache_n
        "token_source": "usage",
    }


def test_timings_predicted_n_when_no_usage() -> None:
    out = tc(
        timings={"prompt_n": 10, "cache_n": 5, "predicted_n": 42},
        content="x" * 400,
        reasoning="y" * 40,
        token_events=300,
        prompt_chars=4000,
    )
    assert out["completion_tokens"] == 42
    assert out["token_source"] == "server"
    assert out["prompt_tokens"] == 15  # prompt_n + cache_n
    assert out["cached_tokens"] == 5
    assert out["reasoning_tokens"] is None  # no estimate once the server counted


def test_timings_prompt_n_without_cache_n() -> None:
    out = tc(timings={"prompt_n": 10, "predicted_n": 1})
    assert out["prompt_tokens"] == 10
    assert out["cached_tokens"] is None


def test_usage_prompt_tokens_even_when_completion_from_timings() -> None:
    out = tc(usage={"prompt_tokens": 33}, timings={"prompt_n": 10, "predicted_n": 4})
    assert out["prompt_tokens"] == 33
    assert out["completion_tokens"] == 4
    assert out["token_source"] == "server"


def test_estimate_uses_chars_when_larger_than_events() -> None:
    # 10 + 3 = 13 chars -> ceil(13/4) = 4 > 2 events
    out = tc(content="x" * 10, reasoning="y" * 3, token_events=2, prompt_chars=9)
    assert out == {
        "prompt_tokens": 3,  # ceil(9/4)
        "completion_tokens": 4,
        "reasoning_tokens": 1,  # ceil(3/4)
        "cached_tokens": None,
        "token_source": "estimate",
    }


def test_estimate_uses_events_when_larger_than_chars() -> None:
    out = tc(content="a" * 8, token_events=5)  # ceil(8/4) = 2 < 5
    assert out["completion_tokens"] == 5
    assert out["token_source"] == "estimate"
    assert out["reasoning_tokens"] is None  # no reasoning text


@pytest.mark.parametrize(
    ("chars", "events", "expected"),
    [(0, 0, 0), (1, 0, 1), (4, 0, 1), (5, 0, 2), (8, 1, 2), (9, 1, 3), (9, 3, 3), (9, 4, 4)],
)
def test_estimate_is_max_of_events_and_ceil_chars_over_4(chars: int, events: int, expected: int) -> None:
    out = tc(content="c" * chars, token_events=events)
    assert out["completion_tokens"] == expected == max(events, math.ceil(chars / 4))


@pytest.mark.parametrize(("chars", "expected"), [(0, 1), (1, 1), (4, 1), (5, 2), (4001, 1001)])
def test_prompt_estimate(chars: int, expected: int) -> None:
    assert tc(prompt_chars=chars)["prompt_tokens"] == expected


def test_reasoning_and_cached_tokens_from_usage_details() -> None:
    out = tc(
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 60,
            "completion_tokens_details": {"reasoning_tokens": 45},
            "prompt_tokens_details": {"cached_tokens": 64},
        },
        timings={"cache_n": 3},
        reasoning="r" * 1000,
    )
    assert out["reasoning_tokens"] == 45
    assert out["cached_tokens"] == 64  # usage details win over timings cache_n
    assert out["token_source"] == "usage"


def test_null_details_are_tolerated() -> None:
    out = tc(
        usage={
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "completion_tokens_details": None,
            "prompt_tokens_details": None,
        },
        reasoning="rrrr",
    )
    assert out["reasoning_tokens"] is None  # source is usage: no estimate
    assert out["cached_tokens"] is None


def test_zero_cached_tokens_are_reported_as_zero() -> None:
    out = tc(usage={"completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}})
    assert out["cached_tokens"] == 0


def test_zero_completion_tokens_in_usage_is_trusted() -> None:
    out = tc(usage={"prompt_tokens": 3, "completion_tokens": 0}, content="abcdefgh", token_events=2)
    assert out["completion_tokens"] == 0
    assert out["token_source"] == "usage"


def test_non_int_usage_values_fall_through() -> None:
    out = tc(
        usage={"prompt_tokens": None, "completion_tokens": "7"},
        timings={"predicted_n": None},
        content="abcd",
        token_events=0,
        prompt_chars=8,
    )
    assert out["completion_tokens"] == 1
    assert out["token_source"] == "estimate"
    assert out["prompt_tokens"] == 2


# --------------------------------------------------------------------------- decode_rate


def test_decode_rate_one_token_per_event() -> None:
    # 100 tokens in 100 events, first -> last 0.99 s: 99 tokens after the first in 0.99 s.
    assert decode_rate(100, 100, 0, 990_000_000) == 100.0


def test_decode_rate_several_tokens_per_event() -> None:
    # 100 tokens in 25 events of 4: (100 - 4) / 0.24 s.
    assert decode_rate(100, 25, 5 * NS, 5 * NS + 240_000_000) == 400.0


def test_decode_rate_uses_mean_tokens_per_event_not_one() -> None:
    # 10 tokens in 2 events over 1 s: the first event is taken as 5 tokens, not 1.
    assert decode_rate(10, 2, 0, NS) == 5.0


@pytest.mark.parametrize(
    ("tokens", "events", "first", "last"),
    [
        (100, 1, 0, NS),  # one event: no interval
        (100, 0, 0, NS),
        (100, 10, 5, 5),  # zero elapsed
        (100, 10, 6, 5),  # negative elapsed
        (0, 10, 0, NS),  # zero tokens
        (None, 10, 0, NS),
        (100, 10, None, NS),
        (100, 10, 0, None),
    ],
)
def test_decode_rate_undefined(tokens: int | None, events: int, first: int | None, last: int | None) -> None:
    assert decode_rate(tokens, events, first, last) is None


# --------------------------------------------------------------------------- prefill


def test_server_prefill() -> None:
    assert server_prefill({"prompt_n": 500, "prompt_ms": 250}) == 2000.0
    assert server_prefill({"prompt_n": 3, "prompt_ms": 1.5, "cache_n": 1000}) == 2000.0


@pytest.mark.parametrize(
    "timings",
    [
        None,
        {},
        {"prompt_n": 500},
        {"prompt_ms": 250},
        {"prompt_n": 0, "prompt_ms": 250},
        {"prompt_n": 500, "prompt_ms": 0},
        {"prompt_n": 500, "prompt_ms": -1},
        {"prompt_n": "500", "prompt_ms": 250},
    ],
)
def test_server_prefill_undefined(timings: dict[str, Any] | None) -> None:
    assert server_prefill(timings) is None


def test_estimated_prefill_subtracts_baseline() -> None:
    # (1001 - 1) tokens over (0.75 - 0.25) s
    assert estimated_prefill(1001, 0.75, (1, 0.25)) == 2000.0


@pytest.mark.parametrize(
    ("prompt", "ttft", "baseline"),
    [
        (1001, 0.75, None),
        (None, 0.75, (1, 0.25)),
        (1001, None, (1, 0.25)),
        (1, 0.75, (1, 0.25)),  # no extra tokens
        (0, 0.75, (1, 0.25)),  # fewer tokens than baseline
        (1001, 0.25, (1, 0.25)),  # no extra time
        (1001, 0.2, (1, 0.25)),  # faster than baseline
    ],
)
def test_estimated_prefill_undefined(
    prompt: int | None, ttft: float | None, baseline: tuple[int, float] | None
) -> None:
    assert estimated_prefill(prompt, ttft, baseline) is None


# --------------------------------------------------------------------------- percentile / describe


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 50, 2.5),
        ([1, 2, 3, 4], 95, 3.85),  # pos 2.85: 3 + 0.85 * (4 - 3)
        ([1, 2, 3, 4], 0, 1),
        ([1, 2, 3, 4], 100, 4),
        ([1, 2, 3, 4], 25, 1.75),  # pos 0.75
        ([4, 1, 3, 2], 50, 2.5),  # unsorted input
        ([10, 20, 30], 50, 20),
        ([10, 20, 30], 90, 28),  # pos 1.8: 20 + 0.8 * 10
        ([0, 100], 95, 95),
        ([7], 95, 7),
        ([7], 0, 7),
    ],
)
def test_percentile(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected, abs=1e-12)


def test_percentile_does_not_mutate_input() -> None:
    values = [3.0, 1.0, 2.0]
    percentile(values, 50)
    assert values == [3.0, 1.0, 2.0]


def test_describe_empty_and_all_none() -> None:
    assert describe([]) is None
    assert describe([None, None]) is None
    assert describe(iter(())) is None


def test_describe_one_value() -> None:
    assert describe([2.5]) == {
        "n": 1,
        "mean": 2.5,
        "median": 2.5,
        "p95": 2.5,
        "stdev": 0.0,
        "min": 2.5,
        "max": 2.5,
    }


def test_describe_values_ignoring_none() -> None:
    d = describe(v for v in [4, None, 1, 3, None, 2])
    assert d is not None
    assert d["n"] == 4
    assert d["mean"] == 2.5
    assert d["median"] == 2.5
    assert d["p95"] == pytest.approx(3.85, abs=1e-12)
    assert d["stdev"] == pytest.approx(math.sqrt(5 / 3), abs=1e-12)  # sample stdev
    assert (d["min"], d["max"]) == (1, 4)


def test_describe_zero_is_not_none() -> None:
    d = describe([0.0, 0.0])
    assert d is not None
    assert d["n"] == 2
    assert d["mean"] == 0.0


# --------------------------------------------------------------------------- summarize_requests


def req(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ok": True,
        "ttft_s": 0.1,
        "ttft_content_s": 0.1,
        "ttft_reasoning_s": None,
        "decode_tps": 100.0,
        "prefill_tps": None,
        "prefill_source": None,
        "e2e_s": 1.0,
        "completion_tokens": 100,
        "token_source": "usage",
        "cached_tokens": 0,
        "finish_reason": "length",
    }
    base.update(over)
    return base


def test_summary_clean_run_has_no_flags() -> None:
    s = summarize_requests([req(), req(), req()], max_tokens=100)
    assert s["flags"] == []
    assert (s["requests"], s["ok"], s["errors"]) == (3, 3, 0)
    assert s["decode_spread"] == 0.0
    assert s["prefill_source"] is None
    assert s["ttft_reasoning_s"] is None
    assert s["ttft_s"]["n"] == 3
    assert s["completion_tokens"]["mean"] == 100


def test_summary_slow_to_start() -> None:
    assert "slow to start" in summarize_requests([req(ttft_s=0.4), req(ttft_s=0.6), req(ttft_s=0.7)])["flags"]
    # median exactly at the threshold is not slow
    flags = summarize_requests([req(ttft_s=0.1), req(ttft_s=SLOW_TTFT_S), req(ttft_s=2.0)])["flags"]
    assert "slow to start" not in flags


def test_summary_unstable_above_ten_percent() -> None:
    s = summarize_requests([req(decode_tps=90.0), req(decode_tps=100.0), req(decode_tps=112.0)])
    assert s["decode_spread"] == pytest.approx(0.22, abs=1e-12)
    assert "unstable" in s["flags"]


def test_summary_not_unstable_at_five_percent() -> None:
    s = summarize_requests([req(decode_tps=97.5), req(decode_tps=100.0), req(decode_tps=102.5)])
    assert s["decode_spread"] == pytest.approx(0.05, abs=1e-12)
    assert "unstable" not in s["flags"]


def test_summary_unstable_threshold_is_strict() -> None:
    s = summarize_requests([req(decode_tps=95.0), req(decode_tps=100.0), req(decode_tps=105.0)])
    assert s["decode_spread"] == UNSTABLE_SPREAD
    assert "unstable" not in s["flags"]


def test_summary_single_decode_value_has_no_spread() -> None:
    s = summarize_requests([req(decode_tps=50.0), req(decode_tps=None)])
    assert "decode_spread" not in s
    assert "unstable" not in s["flags"]


def test_summary_failed_count_and_exclusion_from_statistics() -> None:
    bad = req(
        ok=False,
        ttft_s=9.0,
        decode_tps=1.0,
        cached_tokens=500,
        token_source="estimate",
        finish_reason="stop",
        completion_tokens=1,
        prefill_tps=10.0,
        prefill_source="server",
    )
    s = summarize_requests([req(), bad, req(), {**bad}], max_tokens=100)
    assert (s["requests"], s["ok"], s["errors"]) == (4, 2, 2)
    assert s["flags"] == ["2 failed"]
    assert s["ttft_s"]["n"] == 2
    assert s["ttft_s"]["max"] == 0.1
    assert s["decode_tps"]["min"] == 100.0
    assert s["decode_spread"] == 0.0
    assert s["prefill_source"] is None


def test_summary_missing_ok_counts_as_failed() -> None:
    r = req()
    del r["ok"]
    s = summarize_requests([r, req()])
    assert (s["ok"], s["errors"]) == (1, 1)
    assert "1 failed" in s["flags"]


def test_summary_all_failed() -> None:
    s = summarize_requests([req(ok=False)])
    assert s["ttft_s"] is None
    assert s["decode_tps"] is None
    assert s["flags"] == ["1 failed"]


def test_summary_prompt_cache_hit() -> None:
    assert "prompt cache hit" in summarize_requests([req(), req(cached_tokens=32)])["flags"]
    assert "prompt cache hit" not in summarize_requests([req(cached_tokens=None), req(cached_tokens=0)])["flags"]


def test_summary_tokens_estimated() -> None:
    assert "tokens estimated" in summarize_requests([req(), req(token_source="estimate")])["flags"]
    assert "tokens estimated" not in summarize_requests([req(token_source="server")])["flags"]


def test_summary_stopped_early() -> None:
    flags = summarize_requests([req(), req(finish_reason="stop", completion_tokens=49)], max_tokens=100)["flags"]
    assert "stopped early" in flags
    # exactly half is not early; "length" is never early; no max_tokens means no flag
    assert "stopped early" not in summarize_requests(
        [req(finish_reason="stop", completion_tokens=50)], max_tokens=100
    )["flags"]
    assert "stopped early" not in summarize_requests(
        [req(finish_reason="length", completion_tokens=10)], max_tokens=100
    )["flags"]
    assert "stopped early" not in summarize_requests([req(finish_reason="stop", completion_tokens=1)])["flags"]


def test_summary_flag_order() -> None:
    s = summarize_requests(
        [
            req(ttft_s=1.0, decode_tps=50.0, cached_tokens=8, token_source="estimate", finish_reason="stop",
                completion_tokens=3),
            req(ttft_s=1.0, decode_tps=100.0),
            req(ok=False),
        ],
        max_tokens=100,
    )
    assert s["flags"] == [
        "slow to start",
        "unstable",
        "1 failed",
        "prompt cache hit",
        "tokens estimated",
        "stopped early",
    ]


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (["server", "server"], "server"),
        (["estimate", "estimate"], "estimate"),
        (["server", "estimate"], "estimate"),
        ([], None),
    ],
)
def test_summary_prefill_source(sources: list[str], expected: str | None) -> None:
    reqs = [req(prefill_tps=1000.0, prefill_source=src) for src in sources]
    reqs.append(req(prefill_tps=None, prefill_source="estimate"))  # no figure: does not count
    s = summarize_requests(reqs)
    assert s["prefill_source"] == expected
    if sources:
        assert s["prefill_tps"]["n"] == len(sources)
    else:
        assert s["prefill_tps"] is None
