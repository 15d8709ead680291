"""Tests of the fake OpenAI-compatible server that the benchmark's own tests lean on.

Timing assertions are deliberately loose: these run on shared 2-core machines.
"""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakeserver import FakeServer, RequestLog, Script

pytestmark = pytest.mark.timeout(30)

MSG = [{"role": "user", "content": "x" * 40}]  # 40 chars -> prompt_tokens 10


def chat(model: str = "m", stream: bool = True, **extra) -> dict:
    return {"model": model, "messages": MSG, "stream": stream, **extra}


def parse(lines: list[str]) -> list:
    """SSE data payloads: parsed JSON, "[DONE]", or the raw text when it is not JSON."""
    out = []
    for line in lines:
        if line.startswith("data: "):
            payload = line[len("data: "):]
            try:
                out.append(payload if payload == "[DONE]" else json.loads(payload))
            except ValueError:
                out.append(payload)
    return out


def stream(client: httpx.Client, server: FakeServer, **body) -> tuple[httpx.Response, list[str]]:
    """POST a streaming chat request; the response and its non-empty lines."""
    with client.stream("POST", server.base_url + "/chat/completions", json=chat(**body)) as r:
        if r.status_code != 200:
            r.read()
            return r, []
        return r, [ln for ln in r.iter_lines() if ln]


def content_of(events: list) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                   if isinstance(e, dict) and e.get("choices"))


def wait_finished(log: RequestLog, timeout: float = 3.0) -> None:
    """The server finishes its bookkeeping a moment after the client sees the end."""
    deadline = time.monotonic() + timeout
    while log.finished_ns is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.finished_ns is not None


@pytest.fixture
def serve():
    """Factory: serve(scripts, **kwargs) -> started FakeServer plus an httpx.Client; all closed after."""
    started = []

    def make(scripts=None, **kwargs):
        server = FakeServer(scripts if scripts is not None else {"m": Script()}, **kwargs).start()
        client = httpx.Client(timeout=10)
        started.append((server, client))
        return server, client

    yield make
    for server, client in started:
        client.close()
        server.stop()


def test_models_listing_and_404s(serve):
    server, client = serve({"a": Script(), "b": Script()})
    r = client.get(server.base_url + "/models")
    assert r.status_code == 200
    assert r.json() == {"object": "list", "data": [
        {"id": "a", "object": "model", "owned_by": "fake"},
        {"id": "b", "object": "model", "owned_by": "fake"}]}
    r = client.post(server.base_url + "/chat/completions", json=chat("nope"))
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found"
    assert client.get(server.base_url + "/elsewhere").status_code == 404
    assert server.logs[0].path == "/v1/models" and server.logs[0].status == 200


def test_default_script_serves_unlisted_models(serve):
    server, client = serve({}, default=Script(content_tokens=2, ttft_s=0, gap_s=0))
    r = client.post(server.base_url + "/chat/completions", json=chat("anything", stream=False))
    assert r.json()["choices"][0]["message"]["content"] == "w0 w1 "


def test_only_loopback_and_known_faults():
    with pytest.raises(ValueError):
        FakeServer(host="0.0.0.0")
    with pytest.raises(ValueError):
        FakeServer({"m": Script(faults={1: "explode"})})


def test_normal_stream_structure(serve):
    server, client = serve({"m": Script(content_tokens=5, ttft_s=0.01, gap_s=0.005)})
    r, lines = stream(client, server)
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["transfer-encoding"] == "chunked"
    events = parse(lines)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert content_of(chunks) == "w0 w1 w2 w3 w4 "
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"  # no usage chunk: not requested
    assert {(c["id"], c["object"], c["model"], c["created"]) for c in chunks} == {
        ("chatcmpl-fake-1", "chat.completion.chunk", "m", chunks[0]["created"])}
    log = server.logs[0]
    assert [k for _, k, _ in log.events] == ["role"] + ["content"] * 5 + ["final", "done"]
    assert log.tokens_sent == 5 and log.status == 200 and log.headers["host"].startswith("127.0.0.1")
    assert log.body["messages"] == MSG and log.model == "m" and log.model_request_n == 1


@pytest.mark.parametrize("mode, include, expected", [
    ("requested", False, False), ("requested", True, True), ("always", False, True), ("never", True, False)])
def test_usage_chunk(serve, mode, include, expected):
    server, client = serve({"m": Script(content_tokens=3, ttft_s=0, gap_s=0, usage=mode,
                                        reasoning_tokens=2)})
    _, lines = stream(client, server, stream_options={"include_usage": include})
    events = parse(lines)
    usage_chunks = [e for e in events if isinstance(e, dict) and "usage" in e]
    assert len(usage_chunks) == int(expected)
    if expected:
        assert events[-2] is usage_chunks[0] and usage_chunks[0]["choices"] == []
        assert usage_chunks[0]["usage"] == {
            "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
            "completion_tokens_details": {"reasoning_tokens": 2}}


def test_ttft_and_gap_are_honoured_by_the_servers_clock(serve):
    server, client = serve({"m": Script(content_tokens=5, ttft_s=0.1, gap_s=0.05)})
    stream(client, server)
    log = server.logs[0]
    role_ns = log.events[0][0]
    assert (role_ns - log.received_ns) / 1e9 < 0.05  # the role chunk does not wait for TTFT
    assert 0.09 <= (log.first_token_ns - log.received_ns) / 1e9 <= 0.3
    stamps = [ns for ns, kind, _ in log.events if kind == "content"]
    gaps = [(b - a) / 1e9 for a, b in zip(stamps, stamps[1:])]
    assert len(gaps) == 4 and min(gaps) >= 0.045 and sorted(gaps)[2] <= 0.15
    assert log.received_ns < log.first_token_ns <= log.last_token_ns < log.finished_ns


def test_tokens_per_event(serve):
    server, client = serve({"m": Script(content_tokens=10, tokens_per_event=3, ttft_s=0, gap_s=0)})
    _, lines = stream(client, server)
    assert content_of(parse(lines)) == "".join(f"w{i} " for i in range(10))
    assert [t for _, k, t in server.logs[0].events if k == "content"] == [3, 3, 3, 1]


def test_max_tokens_gives_length(serve):
    server, client = serve({"m": Script(content_tokens=20, ttft_s=0, gap_s=0)})
    _, lines = stream(client, server, max_tokens=7, stream_options={"include_usage": True})
    events = parse(lines)
    assert content_of(events) == "".join(f"w{i} " for i in range(7))
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 7


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "think_inline"])
def test_reasoning(serve, field):
    server, client = serve({"m": Script(reasoning_tokens=3, content_tokens=2, reasoning_field=field,
                                        ttft_s=0, gap_s=0)})
    _, lines = stream(client, server)
    deltas = [e["choices"][0]["delta"] for e in parse(lines)[1:-2]]
    if field == "think_inline":
        assert content_of(parse(lines)) == "<think>r0 r1 r2 </think>w0 w1 "
    else:
        assert "".join(d.get(field) or "" for d in deltas) == "r0 r1 r2 "
        assert content_of(parse(lines)) == "w0 w1 "
    assert [k for _, k, _ in server.logs[0].events][1:6] == ["reasoning"] * 3 + ["content"] * 2


def test_tool_call_fragments(serve):
    calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    server, client = serve({"m": Script(content_tokens=1, tool_calls=calls, ttft_s=0, gap_s=0)})
    _, lines = stream(client, server)
    events = parse(lines)
    frags = [e["choices"][0]["delta"]["tool_calls"][0] for e in events
             if e != "[DONE]" and "tool_calls" in e["choices"][0]["delta"]]
    assert frags[0] == {"index": 0, "id": "call_fake_1_0", "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}
    assert len(frags) == 4 and all(set(f) == {"index", "function"} for f in frags[1:])
    assert json.loads("".join(f["function"]["arguments"] for f in frags)) == {"city": "Oslo"}
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_streaming_completion(serve):
    calls = [{"name": "f", "arguments": "{}"}]
    server, client = serve({"m": Script(reasoning_tokens=1, content_tokens=2, tool_calls=calls,
                                        ttft_s=0.05, gap_s=0, timings=True)})
    r = client.post(server.base_url + "/chat/completions", json=chat(stream=False))
    out = r.json()
    assert r.status_code == 200 and out["object"] == "chat.completion"
    msg = out["choices"][0]["message"]
    assert msg["content"] == "w0 w1 " and msg["reasoning_content"] == "r0 "
    assert msg["tool_calls"] == [{"type": "function", "id": "call_fake_1_0",
                                  "function": {"name": "f", "arguments": "{}"}}]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["usage"]["completion_tokens"] == 3 and out["timings"]["predicted_n"] == 3
    assert (server.logs[0].finished_ns - server.logs[0].received_ns) / 1e9 >= 0.045


def test_timings_match_the_log(serve):
    server, client = serve({"m": Script(content_tokens=5, ttft_s=0.02, gap_s=0.02, timings=True)})
    _, lines = stream(client, server)
    timings = parse(lines)[-2]["timings"]
    log = server.logs[0]
    assert timings["prompt_ms"] == pytest.approx((log.first_token_ns - log.received_ns) / 1e6)
    assert timings["predicted_ms"] == pytest.approx((log.last_token_ns - log.first_token_ns) / 1e6)
    assert timings["predicted_n"] == 5 and timings["prompt_n"] == 10 and timings["cache_n"] == 0
    assert timings["predicted_per_second"] == pytest.approx(4 / timings["predicted_ms"] * 1e3)


@pytest.mark.parametrize("fault", ["429", "500", "503"])
def test_http_error_faults(serve, fault):
    server, client = serve({"m": Script(faults={1: fault}, retry_after_s=0.25, content_tokens=2)})
    r, _ = stream(client, server)
    assert r.status_code == int(fault)
    assert r.headers.get("retry-after") == (None if fault == "500" else "0.25")
    assert "message" in json.loads(r.content)["error"]
    r, lines = stream(client, server)  # faults are per request number: the second one is fine
    assert r.status_code == 200 and parse(lines)[-1] == "[DONE]"
    assert [log.fault for log in server.logs] == [fault, None]


def test_drop_fault(serve):
    server, client = serve({"m": Script(faults={1: "drop"}, content_tokens=10, ttft_s=0, gap_s=0)})
    with pytest.raises(httpx.RemoteProtocolError):
        stream(client, server)
    log = server.logs[0]
    wait_finished(log)
    assert log.fault == "drop" and log.tokens_sent == 3 and not log.client_disconnected


def test_malformed_fault_then_continues(serve):
    server, client = serve({"m": Script(faults={1: "malformed"}, content_tokens=6, ttft_s=0, gap_s=0)})
    _, lines = stream(client, server)
    events = parse(lines)
    assert "{not json" in events and events[-1] == "[DONE]"
    assert content_of(events) == "".join(f"w{i} " for i in range(6))
    assert [k for _, k, _ in server.logs[0].events][4] == "malformed"


def test_stall_fault(serve):
    server, client = serve({"m": Script(faults={1: "stall"}, stall_s=0.3, content_tokens=10,
                                        ttft_s=0, gap_s=0)})
    start = time.monotonic()
    with pytest.raises(httpx.RemoteProtocolError):
        stream(client, server)
    assert time.monotonic() - start >= 0.28
    assert server.logs[0].tokens_sent == 3 and server.logs[0].fault == "stall"


@pytest.mark.parametrize("fault", ["error_event", "truncate", "error_field"])
def test_faults_that_end_the_stream_cleanly(serve, fault):
    server, client = serve({"m": Script(faults={1: fault}, content_tokens=10, ttft_s=0, gap_s=0)})
    _, lines = stream(client, server)  # no exception: the HTTP body ends properly
    events = parse(lines)
    assert "[DONE]" not in events and content_of(events) == "w0 w1 w2 "
    assert not any(e["choices"][0]["finish_reason"] for e in events if e.get("choices"))
    if fault == "error_event":
        assert events[-1] == {"error": {"message": "model crashed", "type": "server_error"}}
    if fault == "error_field":
        assert lines[-1] == 'error: {"message":"boom"}'
    if fault == "truncate":
        assert len(events) == 4


def test_reject_stream_options(serve):
    server, client = serve({"m": Script(reject_stream_options=True, content_tokens=2)})
    r, _ = stream(client, server, stream_options={"include_usage": True})
    assert r.status_code == 400 and json.loads(r.content)["error"]["type"] == "invalid_request_error"
    r, lines = stream(client, server)
    assert r.status_code == 200 and parse(lines)[-1] == "[DONE]"


def test_keep_alive_reuses_one_connection(serve):
    server, client = serve({"m": Script(content_tokens=2, ttft_s=0, gap_s=0), "n": Script()})
    stream(client, server)
    client.post(server.base_url + "/chat/completions", json=chat(stream=False))
    stream(client, server, model="n", max_tokens=1)
    assert len({log.connection for log in server.logs}) == 1
    assert [(log.n, log.model_request_n) for log in server.logs] == [(1, 1), (2, 2), (3, 1)]


def test_client_disconnect_mid_stream_is_logged(serve):
    server, client = serve({"m": Script(content_tokens=500, ttft_s=0, gap_s=0.01)})
    with client.stream("POST", server.base_url + "/chat/completions", json=chat()) as r:
        for i, _ in zip(range(3), r.iter_lines()):
            pass  # leaving the block unread closes the connection
    log = server.logs[0]
    wait_finished(log)
    assert log.client_disconnected and log.tokens_sent < 500


def test_client_disconnect_during_ttft_is_noticed_promptly(serve):
    server, _ = serve({"m": Script(ttft_s=10)})
    with httpx.Client(timeout=httpx.Timeout(5, read=0.2)) as client, pytest.raises(httpx.ReadTimeout):
        stream(client, server)
    log = server.logs[0]
    wait_finished(log)
    assert log.client_disconnected and log.first_token_ns is None


def test_lifetime_cap_stops_the_server():
    server = FakeServer({"m": Script(content_tokens=1000, ttft_s=0, gap_s=0.02)}, max_lifetime_s=0.5)
    with server, httpx.Client(timeout=5) as client:
        with pytest.raises(httpx.RemoteProtocolError):  # an open stream is cut at the cap too
            stream(client, server)
        assert server.wait_stopped(5)
        with pytest.raises(httpx.ConnectError):
            client.get(server.base_url + "/models")


def test_request_cap_stops_the_server(serve):
    server, client = serve(max_requests=2)
    assert client.get(server.base_url + "/models").status_code == 200
    assert client.get(server.base_url + "/models").status_code == 200
    assert server.wait_stopped(5)
    server.stop()  # idempotent


def test_cli_prints_url_and_serves():
    script = Path(__file__).with_name("fakeserver.py")
    args = [sys.executable, str(script), "--model", "a", "--model", "b", "--tokens", "3",
            "--ttft-s", "0", "--gap-s", "0", "--max-lifetime-s", "30"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([proc.stdout], [], [], 10)[0], "no URL line within 10 s"
        key, _, url = proc.stdout.readline().strip().partition("=")
        assert key == "FAKESERVER_URL" and url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with httpx.Client(timeout=5) as client:
            assert [m["id"] for m in client.get(url + "/models").json()["data"]] == ["a", "b"]
            r = client.post(url + "/chat/completions", json=chat("b", stream=False))
            assert r.json()["choices"][0]["message"]["content"] == "w0 w1 w2 "
        proc.terminate()
        assert proc.wait(5) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()


async def test_async_client_stream_and_timing():
    with FakeServer({"m": Script(content_tokens=4, ttft_s=0.1, gap_s=0.03)}) as server:
        async with httpx.AsyncClient(timeout=10) as client:
            async with client.stream("POST", server.base_url + "/chat/completions",
                                     json=chat(stream_options={"include_usage": True})) as r:
                lines = [ln async for ln in r.aiter_lines() if ln]
    events = parse(lines)
    assert content_of(events) == "w0 w1 w2 w3 " and events[-2]["usage"]["completion_tokens"] == 4
    log = server.logs[0]
    assert 0.09 <= (log.first_token_ns - log.received_ns) / 1e9 <= 0.3
    assert not server.running


async def test_async_concurrent_streams_overlap():
    with FakeServer({"m": Script(content_tokens=5, ttft_s=0.1, gap_s=0.05)}) as server:
        async with httpx.AsyncClient(timeout=10) as client:
            async def one() -> str:
                r = await client.post(server.base_url + "/chat/completions", json=chat(stream=False))
                return r.json()["choices"][0]["message"]["content"]

            start = time.monotonic()
            results = await asyncio.gather(*(one() for _ in range(3)))
            elapsed = time.monotonic() - start
    assert results == ["w0 w1 w2 w3 w4 "] * 3
    assert elapsed < 0.9  # 3 x 0.3 s if they had been served one after another
    assert len({log.connection for log in server.logs}) == 3


async def test_async_keepalive_comments():
    with FakeServer({"m": Script(content_tokens=1, ttft_s=0.3, keepalive_comments=True)}) as server:
        async with httpx.AsyncClient(timeout=10) as client:
            async with client.stream("POST", server.base_url + "/chat/completions", json=chat()) as r:
                lines = [ln async for ln in r.aiter_lines() if ln]
    first_data = next(i for i, ln in enumerate(lines) if '"w0 "' in ln)
    assert 3 <= lines[:first_data].count(": ping") <= 7
