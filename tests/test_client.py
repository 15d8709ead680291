"""The streaming client against the loopback fake server: timings checked against the server's
own send times, and every fault turned into a recorded outcome with a clear reason."""

from __future__ import annotations

import asyncio

import pytest

from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient, StreamProgress
from forgetui.engine.metrics import NS
from forgetui.engine.speed import request_record
from tests.fakeserver import Script
from tests.conftest import closed_url


def req(base_url: str, model: str = "m", max_tokens: int = 64, **kw) -> ChatRequest:
    return ChatRequest(base_url=base_url, model=model, messages=[{"role": "user", "content": "hello there"}],
                       max_tokens=max_tokens, **kw)


async def stream(server, script_model: str = "m", limits: ClientLimits | None = None, **kw):
    async with StreamClient(limits or ClientLimits(idle_timeout_s=5, request_timeout_s=30)) as client:
        request = req(server.base_url, script_model, **kw)
        result = await client.chat_stream(request)
    return request, result


async def test_ttft_and_decode_match_the_servers_own_send_times(fake) -> None:
    server = fake({"m": Script(ttft_s=0.15, gap_s=0.01, content_tokens=40)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    log = server.logs[-1]
    assert rec["ok"] and rec["finish_reason"] == "stop" and rec["completion_tokens"] == 40
    assert rec["token_source"] == "usage" and rec["events"] == 40
    server_ttft = (log.first_token_ns - log.received_ns) / NS
    # The client clock starts when the body is on the socket, so only loopback and scheduling
    # separate the two; a clock started before client.stream() would add milliseconds here.
    assert -0.002 < rec["ttft_s"] - server_ttft < 0.02
    server_decode = (log.tokens_sent - 1) / ((log.last_token_ns - log.first_token_ns) / NS)
    assert rec["decode_tps"] == pytest.approx(server_decode, rel=0.05)
    assert rec["ttfr_s"] < rec["ttft_s"]  # the role chunk comes first and carries no token
    assert rec["response_id"].startswith("chatcmpl-fake-")
    assert rec["e2e_s"] >= rec["ttft_s"]


async def test_several_tokens_per_event_are_not_counted_as_one(fake) -> None:
    server = fake({"m": Script(ttft_s=0.02, gap_s=0.01, content_tokens=64, tokens_per_event=4)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    log = server.logs[-1]
    assert rec["events"] == 16 and rec["completion_tokens"] == 64
    server_decode = (64 - 4) / ((log.last_token_ns - log.first_token_ns) / NS)
    assert rec["decode_tps"] == pytest.approx(server_decode, rel=0.05)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "think_inline"])
async def test_reasoning_phase_is_timed_apart_from_content(fake, field: str) -> None:
    server = fake({"m": Script(reasoning_tokens=10, content_tokens=10, reasoning_field=field, gap_s=0.01)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert rec["ok"]
    assert rec["reasoning"].split() == [f"r{i}" for i in range(10)]
    assert rec["content"].split() == [f"w{i}" for i in range(10)]
    assert rec["ttft_s"] == rec["ttft_reasoning_s"] < rec["ttft_content_s"]
    log = server.logs[-1]
    first_content = next(t for t, kind, _ in log.events if kind == "content")
    server_gap = (first_content - log.first_token_ns) / NS
    assert rec["ttft_content_s"] - rec["ttft_reasoning_s"] == pytest.approx(server_gap, abs=0.02)


async def test_tool_calls_are_assembled(fake) -> None:
    server = fake({"m": Script(content_tokens=2, tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert rec["ok"] and rec["finish_reason"] == "tool_calls"
    assert rec["tool_calls"][0]["name"] == "get_weather"
    assert rec["tool_calls"][0]["arguments_parsed"] == {"city": "Oslo"}


async def test_llamacpp_timings_give_server_prefill(fake) -> None:
    server = fake({"m": Script(timings=True, usage="never", content_tokens=8)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert rec["token_source"] == "server" and rec["completion_tokens"] == 8
    assert rec["prefill_source"] == "server" and rec["prefill_tps"] > 0


async def test_unrequested_usage_chunk_is_accepted(fake) -> None:
    server = fake({"m": Script(usage="always", content_tokens=5)})
    request, result = await stream(server)
    assert request_record(request, result, None)["token_source"] == "usage"


@pytest.mark.parametrize(
    ("fault", "outcome", "reason"),
    [
        ("drop", "truncated", "connection dropped mid-stream"),
        ("truncate", "truncated", "stream ended without finish_reason"),
        ("error_event", "server_error", "model crashed"),
        ("error_field", "server_error", "boom"),
    ],
)
async def test_mid_stream_faults_become_clear_outcomes(fake, fault: str, outcome: str, reason: str) -> None:
    server = fake({"m": Script(faults={1: fault}, content_tokens=20)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert not rec["ok"] and rec["outcome"] == outcome
    assert reason in rec["error"]
    assert rec["attempts"] == 1  # never retried after the first event: no spliced answers
    assert rec["content"].startswith("w0 w1 w2")  # the partial answer is kept as evidence


async def test_malformed_chunk_is_skipped_recorded_and_not_trusted(fake) -> None:
    server = fake({"m": Script(faults={1: "malformed"}, content_tokens=10)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert rec["outcome"] == "finished" and not rec["ok"]
    assert rec["malformed_events"] == 1 and "malformed" in rec["error"]


async def test_429_with_retry_after_then_success(fake) -> None:
    server = fake({"m": Script(faults={1: "429"}, retry_after_s=0.3, content_tokens=5)})
    request, result = await stream(server)
    rec = request_record(request, result, None)
    assert rec["ok"] and rec["attempts"] == 2
    assert "HTTP 429" in rec["retries"][0] and "retry in 0.30 s" in rec["retries"][0]
    first, second = server.logs[-2], server.logs[-1]
    assert (second.received_ns - first.finished_ns) / NS >= 0.28  # Retry-After honoured


async def test_retry_after_above_cap_is_not_retried(fake) -> None:
    server = fake({"m": Script(faults={1: "429"}, retry_after_s=120)})
    request, result = await stream(server, limits=ClientLimits(retry_after_cap_s=5, request_timeout_s=10))
    assert result.outcome == "http_error" and result.attempts == 1
    assert "above retry_after_cap_s=5" in result.error


async def test_500_is_retried_then_recorded(fake) -> None:
    server = fake({"m": Script(faults={1: "500", 2: "500", 3: "500"})})
    request, result = await stream(server, limits=ClientLimits(retries=2, request_timeout_s=30))
    assert result.outcome == "http_error" and result.http_status == 500
    assert result.attempts == 3 and len(server.logs) == 3
    assert result.error.startswith("HTTP 500")


async def test_404_unknown_model_is_not_retried(fake) -> None:
    server = fake({"m": Script()})
    request, result = await stream(server, script_model="nope")
    assert result.outcome == "http_error" and result.attempts == 1 and "404" in result.error


async def test_stall_hits_the_idle_timeout(fake) -> None:
    server = fake({"m": Script(faults={1: "stall"}, stall_s=10, content_tokens=20)})
    request, result = await stream(server, limits=ClientLimits(idle_timeout_s=0.4, request_timeout_s=30))
    assert result.outcome == "idle_timeout" and "stalled mid-stream" in result.error
    assert (result.t_end_ns - result.t_sent_ns) / NS < 3


async def test_keepalive_comments_count_as_liveness(fake) -> None:
    server = fake({"m": Script(ttft_s=1.0, keepalive_comments=True, content_tokens=3)})
    request, result = await stream(server, limits=ClientLimits(idle_timeout_s=0.4, request_timeout_s=30))
    assert result.outcome == "finished" and result.comments >= 5


async def test_deadline_ends_a_slow_request(fake) -> None:
    server = fake({"m": Script(gap_s=0.05, content_tokens=200)})
    request, result = await stream(server, limits=ClientLimits(request_timeout_s=0.4), max_tokens=200)
    assert result.outcome == "deadline" and "request_timeout_s" in result.error


async def test_rejected_stream_options_retried_without(fake) -> None:
    server = fake({"m": Script(reject_stream_options=True, content_tokens=4)})
    async with StreamClient(ClientLimits(request_timeout_s=10)) as client:
        first = await client.chat_stream(req(server.base_url))
        second = await client.chat_stream(req(server.base_url))
    assert first.ok and first.stream_options_dropped and first.attempts == 2
    assert second.ok and second.attempts == 1  # remembered for the provider
    assert "stream_options" not in server.logs[-1].body


async def test_connection_refused_is_a_connect_error() -> None:
    async with StreamClient(ClientLimits(retries=1, request_timeout_s=10)) as client:
        result = await client.chat_stream(req(closed_url()))
    assert result.outcome == "connect_error" and result.attempts == 2
    assert "cannot connect" in result.error


async def test_cancellation_closes_the_connection(fake) -> None:
    server = fake({"m": Script(gap_s=0.02, content_tokens=500)})
    progress = StreamProgress()
    async with StreamClient(ClientLimits(request_timeout_s=30)) as client:
        task = asyncio.ensure_future(client.chat_stream(req(server.base_url, max_tokens=500), progress))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if progress.token_events >= 3:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    for _ in range(200):  # the server notices the closed socket at its next write
        if server.logs[-1].client_disconnected:
            break
        await asyncio.sleep(0.01)
    assert server.logs[-1].client_disconnected
    assert server.logs[-1].tokens_sent < 500


async def test_progress_is_updated_while_streaming(fake) -> None:
    server = fake({"m": Script(content_tokens=10)})
    progress = StreamProgress()
    async with StreamClient() as client:
        await client.chat_stream(req(server.base_url), progress)
    assert progress.state == "done" and progress.token_events == 10 and progress.content_chars > 0
