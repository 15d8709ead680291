"""Loopback fake OpenAI-compatible streaming server for tests, the benchmark and ``make demo``.

It is the reference clock for checking a benchmark client's TTFT and decode-rate numbers: every
request is logged with ``time.perf_counter_ns()`` stamps (CLOCK_MONOTONIC on Linux, so they compare
with an in-process or a subprocess client) of when its body was read and when each SSE event left.

Standard library only, so it also runs as a plain script::

    python tests/fakeserver.py --model fake-model --ttft-s 0.05   # prints FAKESERVER_URL=...

In tests::

    with FakeServer({"m": Script(content_tokens=5)}) as server:
        httpx.post(server.base_url + "/chat/completions", json={...})
        log = server.logs[-1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import dataclasses
import json
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HOST = "127.0.0.1"
PRE_STREAM_FAULTS = frozenset({"429", "500", "503"})
MID_STREAM_FAULTS = frozenset({"drop", "malformed", "stall", "error_event", "truncate", "error_field"})
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
_ERROR_TYPES = {400: "invalid_request_error", 404: "not_found", 405: "invalid_request_error",
                429: "rate_limit_error", 500: "server_error", 503: "overloaded"}
_PING_S = 0.05


@dataclass
class Script:
    """How the server answers chat completions for one model (see the field comments)."""

    ttft_s: float = 0.02  # body fully read -> first token-bearing event
    prefill_tps: float | None = None  # if set, TTFT also grows by prompt_tokens / prefill_tps
    role_chunk: bool = True  # role delta right away, before the TTFT delay
    reasoning_tokens: int = 0  # sent before content, as reasoning
    reasoning_field: str = "reasoning_content"  # or "reasoning", or "think_inline" (<think> in content)
    content_tokens: int = 32  # capped by the request's max_tokens -> finish_reason "length"
    content_text: str | None = None  # if set, the answer is this text (one token per word), not w0 w1 ...
    answers: dict[str, str] = field(default_factory=dict)  # prompt substring -> answer text (first match wins)
    # prompt substring -> answers used in turn (the n-th matching request gets answers[n % len]);
    # checked before ``answers``: repeated attempts of one case get different answers.
    answer_cycle: dict[str, list[str]] = field(default_factory=dict)
    cycle_used: dict[str, int] = field(default_factory=dict)  # answer_cycle key -> requests answered
    tool_answers: dict[str, list[dict]] = field(default_factory=dict)  # prompt substring -> tool_calls
    tokens_per_event: int = 1  # several tokens per SSE event (speculative decoding style)
    gap_s: float = 0.01  # between consecutive token-bearing events
    tool_calls: list[dict] | None = None  # [{"name": ..., "arguments": {...} or "json"}], after content
    usage: str = "requested"  # "requested" (stream_options.include_usage), "always" or "never"
    timings: bool = False  # llama.cpp-style "timings" on the final chunk, from the server's clock
    reject_stream_options: bool = False  # HTTP 400 if the body has stream_options at all
    reject_response_format: bool = False  # HTTP 400 if the body has response_format (structured output)
    keepalive_comments: bool = False  # ": ping" comments every 0.05 s during the TTFT wait
    faults: dict[int, str] = field(default_factory=dict)  # per-model request number (1-based) -> fault
    fault_after_events: int = 3  # mid-stream faults fire after this many token-bearing events
    retry_after_s: float = 0.2  # Retry-After for 429/503, written as given
    stall_s: float = 30.0  # "stall": silence this long, then close
    # A hybrid thinking model: a request that switches thinking off (chat_template_kwargs
    # .enable_thinking false, think false, reasoning_effort minimal/low/none, or "/no_think" in the
    # last user message) gets no reasoning tokens; any other spends reasoning_tokens first.
    thinking_switch: bool = False


@dataclass
class RequestLog:
    """What the server received and sent for one request, stamped with ``perf_counter_ns``."""

    n: int  # global request number, 1-based
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None
    received_ns: int  # last byte of the body read
    connection: int  # connection number, so keep-alive reuse is visible
    model: str | None = None
    model_request_n: int = 0  # 1-based, per model; 0 when no model script was found
    events: list[tuple[int, str, int]] = field(default_factory=list)  # (send_ns, kind, tokens)
    status: int = 0  # HTTP status sent; 0 if the connection was closed before any response
    fault: str | None = None
    client_disconnected: bool = False
    finished_ns: int | None = None  # just before the last response bytes, or when it gave up

    def _token_events(self) -> list[tuple[int, str, int]]:
        return [e for e in self.events if e[1] in ("reasoning", "content", "tool_call")]

    @property
    def first_token_ns(self) -> int | None:
        """send_ns of the first reasoning/content/tool_call event, or None."""
        events = self._token_events()
        return events[0][0] if events else None

    @property
    def last_token_ns(self) -> int | None:
        """send_ns of the last reasoning/content/tool_call event, or None."""
        events = self._token_events()
        return events[-1][0] if events else None

    @property
    def tokens_sent(self) -> int:
        """Reasoning plus content tokens written (tool-call fragments count 0, as in usage)."""
        return sum(e[2] for e in self._token_events())


class _ClientGone(Exception):
    """The client closed or reset the connection."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _plan(script: Script, max_tokens: Any, n: int) -> tuple[list[tuple[str, int, dict]], str]:
    """Every token-bearing event of a full answer as (kind, tokens, delta), and the finish reason."""
    per, events = max(1, script.tokens_per_event), []

    def add(kind: str, word: str, count: int, make) -> None:
        for start in range(0, count, per):
            stop = min(start + per, count)
            text = "".join(f"{word}{i} " for i in range(start, stop))
            events.append((kind, stop - start, make(text, start == 0, stop == count)))

    def reasoning(text: str, first: bool, last: bool) -> dict:
        if script.reasoning_field != "think_inline":
            return {script.reasoning_field: text}
        return {"content": ("<think>" if first else "") + text + ("</think>" if last else "")}

    # max_tokens caps reasoning and content together, as real servers do.
    budget = max_tokens if isinstance(max_tokens, int) and max_tokens >= 0 else None
    content_total = (len(re.findall(r"\s*\S+\s*|\s+", script.content_text))
                     if script.content_text is not None else script.content_tokens)
    reasoning_n, content, finish = script.reasoning_tokens, content_total, "stop"
    if budget is not None and reasoning_n + content > budget:
        reasoning_n = min(reasoning_n, budget)
        content, finish = budget - reasoning_n, "length"
    add("reasoning", "r", reasoning_n, reasoning)
    if script.content_text is not None:
        words = re.findall(r"\s*\S+\s*|\s+", script.content_text)[:content]
        for start in range(0, len(words), per):
            chunk = words[start:start + per]
            events.append(("content", len(chunk), {"content": "".join(chunk)}))
    else:
        add("content", "w", content, lambda text, *_: {"content": text})
    if script.tool_calls and finish != "length":
        finish = "tool_calls"
        for idx, call in enumerate(script.tool_calls):
            args = call.get("arguments", {})
            args = args if isinstance(args, str) else json.dumps(args)
            head = {"index": idx, "id": f"call_fake_{n}_{idx}", "type": "function",
                    "function": {"name": call["name"], "arguments": ""}}
            events.append(("tool_call", 0, {"tool_calls": [head]}))
            cuts = [0, len(args) // 3, 2 * len(args) // 3, len(args)]
            for a, b in zip(cuts, cuts[1:]):
                if b > a:
                    frag = {"index": idx, "function": {"arguments": args[a:b]}}
                    events.append(("tool_call", 0, {"tool_calls": [frag]}))
    return events, finish


def _assemble(plan: list[tuple[str, int, dict]]) -> dict:
    """The non-streaming message equivalent to the streamed deltas."""
    msg: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: dict[int, dict] = {}
    for _, _, delta in plan:
        for key, val in delta.items():
            if key != "tool_calls":
                msg[key] = msg.get(key, "") + val
                continue
            for frag in val:
                call = calls.setdefault(frag["index"], {"type": "function",
                                                        "function": {"name": "", "arguments": ""}})
                call.setdefault("id", frag.get("id"))
                for k, v in frag.get("function", {}).items():
                    call["function"][k] += v
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
        msg["content"] = msg["content"] or None
    return msg


def _thinking_off(body: dict) -> bool:
    """The request asks for no thinking, by any switch a real server documents (Script.thinking_switch)."""
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False:
        return True
    if body.get("think") is False or body.get("reasoning_effort") in ("minimal", "low", "none"):
        return True
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return bool(users) and "/no_think" in json.dumps(users[-1].get("content"))


def _prompt_tokens(body: dict) -> int:
    """The fake tokenizer: a token per 4 characters of message text."""
    chars = 0
    for m in body.get("messages") or []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            chars += len(c)
        elif isinstance(c, list):  # content parts: count the text ones
            chars += sum(len(p.get("text") or "") for p in c if isinstance(p, dict))
    return max(1, chars // 4)


def _ttft_ns(script: Script, body: dict) -> int:
    """Scripted time to first token; with prefill_tps it grows with the prompt, like a real server."""
    prefill = _prompt_tokens(body) / script.prefill_tps if script.prefill_tps else 0.0
    return _ns(script.ttft_s + prefill)


def _usage(body: dict, sent: Any) -> dict:
    """OpenAI usage; ``sent`` yields (kind, tokens) of the token-bearing events actually sent."""
    prompt = _prompt_tokens(body)
    reasoning = content = 0
    for kind, tokens in sent:
        reasoning += tokens if kind == "reasoning" else 0
        content += tokens if kind == "content" else 0
    return {"prompt_tokens": prompt, "completion_tokens": reasoning + content,
            "total_tokens": prompt + reasoning + content,
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def _timings(usage: dict, received_ns: int, first_ns: int, last_ns: int, first_tokens: int) -> dict:
    """llama.cpp-style timings. The decode rate excludes the first event's tokens: they arrive at
    first_ns, so only the later ones were produced during predicted_ms."""
    prompt_ms, predicted_ms = (first_ns - received_ns) / 1e6, (last_ns - first_ns) / 1e6
    n = usage["completion_tokens"]
    return {"prompt_n": usage["prompt_tokens"], "cache_n": 0, "prompt_ms": prompt_ms,
            "predicted_n": n, "predicted_ms": predicted_ms,
            "prompt_per_second": usage["prompt_tokens"] / prompt_ms * 1e3 if prompt_ms > 0 else 0.0,
            "predicted_per_second": (n - first_tokens) / predicted_ms * 1e3 if predicted_ms > 0 else 0.0}


class _Conn:
    """A connection's input buffer, filled by a background task that always keeps a read pending.

    Reading all the time (not only when a request is due) is what lets the server notice a client
    hanging up during a TTFT wait or a stall, rather than only at its next write."""

    def __init__(self, reader: asyncio.StreamReader, cid: int) -> None:
        self.id = cid
        self.buf = bytearray()
        self.closed = asyncio.Event()  # EOF or reset from the client
        self._more = asyncio.Event()
        self._pump_task = asyncio.create_task(self._pump(reader))

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        try:
            while chunk := await reader.read(65536):
                self.buf += chunk
                self._more.set()
        except OSError:
            pass
        finally:
            self.closed.set()
            self._more.set()

    async def _wait_more(self) -> bool:
        if self.closed.is_set():
            return False
        self._more.clear()
        await self._more.wait()
        return True

    async def read_until(self, sep: bytes, limit: int) -> bytes | None:
        """Bytes up to and including ``sep``; None on EOF or when ``limit`` is exceeded."""
        while (i := self.buf.find(sep)) < 0:
            if len(self.buf) > limit or not await self._wait_more():
                return None
        out = bytes(self.buf[: i + len(sep)])
        del self.buf[: i + len(sep)]
        return out

    async def read_exactly(self, n: int) -> bytes | None:
        """Exactly ``n`` bytes, or None on EOF."""
        while len(self.buf) < n:
            if not await self._wait_more():
                return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def close(self) -> None:
        self._pump_task.cancel()


class _Exchange:
    """One request/response on a connection: writes the bytes and logs when each event left."""

    def __init__(self, conn: _Conn, writer: asyncio.StreamWriter, log: RequestLog, keep_alive: bool):
        self.conn, self.writer, self.log, self.keep_alive = conn, writer, log, keep_alive

    async def _write(self, data: bytes, kind: str | None = None, tokens: int = 0,
                     last: bool = False) -> None:
        if self.conn.closed.is_set():
            raise _ClientGone
        if last:  # stamp before the bytes leave: a client that has read them all sees a full log
            self.log.finished_ns = time.perf_counter_ns()
        self.writer.write(data)
        if kind is not None:  # stamp before drain(): write() has already sent what the socket took
            self.log.events.append((time.perf_counter_ns(), kind, tokens))
        try:
            await self.writer.drain()
        except OSError as exc:
            raise _ClientGone from exc

    def _head(self, status: int, headers: list[str]) -> bytes:
        self.log.status = status
        conn = "keep-alive" if self.keep_alive else "close"
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}", *headers, f"Connection: {conn}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def send_json(self, status: int, obj: Any, headers: list[str] | None = None) -> None:
        """A complete response with a Content-Length body (``obj`` may be raw bytes)."""
        body = obj if isinstance(obj, bytes) else _dumps(obj)
        hdrs = ["Content-Type: application/json", f"Content-Length: {len(body)}", *(headers or [])]
        await self._write(self._head(status, hdrs) + body, last=True)

    async def send_error(self, status: int, message: str, headers: list[str] | None = None) -> None:
        """An OpenAI-style JSON error."""
        err = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "error"), "code": status}}
        await self.send_json(status, err, headers)

    async def start_stream(self) -> None:
        hdrs = ["Content-Type: text/event-stream", "Cache-Control: no-cache",
                "Transfer-Encoding: chunked"]
        await self._write(self._head(200, hdrs))

    async def event(self, kind: str, tokens: int, payload: dict | bytes) -> None:
        """One logged SSE event (a dict becomes ``data: <json>``), as one HTTP chunk."""
        raw = payload if isinstance(payload, bytes) else b"data: " + _dumps(payload) + b"\n\n"
        await self._write(b"%x\r\n%s\r\n" % (len(raw), raw), kind, tokens)

    async def end_stream(self) -> None:
        await self._write(b"0\r\n\r\n", last=True)

    async def wait_until(self, deadline_ns: int, ping: bool = False) -> None:
        """Sleep until ``deadline_ns``, sending ": ping" comments if asked; _ClientGone on hang-up."""
        next_ping = time.perf_counter_ns() + _ns(_PING_S)
        while (now := time.perf_counter_ns()) < deadline_ns:
            if ping and now >= next_ping:
                await self._write(b"8\r\n: ping\n\n\r\n")
                next_ping += _ns(_PING_S)
                continue
            until = min(deadline_ns, next_ping) if ping else deadline_ns
            try:
                await asyncio.wait_for(self.conn.closed.wait(), (until - now) / 1e9)
            except TimeoutError:
                continue
            raise _ClientGone


class FakeServer:
    """Fake OpenAI-compatible server on 127.0.0.1, running its own event loop in a daemon thread.

    Models in ``scripts`` answer per their Script (and are what GET /v1/models lists); any other
    model uses ``default`` or gets 404.
    It stops by itself after ``max_lifetime_s`` or after serving ``max_requests`` requests.
    Use as a context manager (sync code and async tests alike) or call start()/stop()."""

    def __init__(self, scripts: dict[str, Script] | None = None, default: Script | None = None,
                 max_lifetime_s: float = 300.0, max_requests: int = 10000, *,
                 host: str = HOST, port: int = 0) -> None:
        if host != HOST:
            raise ValueError(f"FakeServer listens only on {HOST}, not {host!r}")
        self.scripts = dict(scripts or {})
        self.default = default
        for script in [*self.scripts.values(), default]:
            bad = set(script.faults.values()) - PRE_STREAM_FAULTS - MID_STREAM_FAULTS if script else set()
            if bad:
                raise ValueError(f"unknown fault(s) {sorted(bad)}")
        self.max_lifetime_s, self.max_requests = max_lifetime_s, max_requests
        self.port = port  # the bound port once started
        self.logs: list[RequestLog] = []
        self._n = 0
        self._model_n: dict[str, int] = {}
        self._conn_ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_evt: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def running(self) -> bool:
        """True while the server thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> FakeServer:
        """Start listening; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("FakeServer already started")
        self._thread = threading.Thread(target=self._run, name="fakeserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("FakeServer did not start")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Close the listener and every connection and join the thread; safe to call again."""
        thread, loop = self._thread, self._loop
        if thread is None:
            return
        if loop is not None and thread.is_alive():
            try:
                loop.call_soon_threadsafe(self._stop_evt.set)
            except RuntimeError:  # the loop closed between the check and the call
                pass
        if thread is not threading.current_thread():
            thread.join(10)

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Wait for the server to stop by itself; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # report startup failures to start(); later ones are bugs
            self._error = exc
            if self._ready.is_set():
                raise
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop, self._stop_evt = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._handle, HOST, self.port)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await asyncio.wait_for(self._stop_evt.wait(), self.max_lifetime_s)
        except TimeoutError:
            pass
        self._stopping = True
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await server.wait_closed()
        await asyncio.sleep(0)  # let the aborted transports run their close callbacks

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        conn = _Conn(reader, next(self._conn_ids))
        try:
            while not self._stopping and self._n < self.max_requests:
                if not await self._serve_one(conn, writer):
                    break
        except (_ClientGone, OSError):
            pass
        except asyncio.CancelledError:
            # Our own shutdown. End normally: Python 3.11's start_server callback logs a spurious
            # error for a cancelled handler task.
            if not self._stopping:
                raise
        finally:
            self._tasks.discard(task)
            conn.close()
            if self._stopping:  # shutting down: don't wait for unsent data to drain
                writer.transport.abort()
            else:
                writer.close()

    async def _serve_one(self, conn: _Conn, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; False when the connection should close."""
        head = await conn.read_until(b"\r\n\r\n", 65536)
        if head is None:
            return False
        lines = [ln for ln in head.decode("latin-1").split("\r\n") if ln]
        parts = lines[0].split(" ") if lines else []
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length", "0")
        if len(parts) != 3 or not length.isdigit() or "chunked" in headers.get("transfer-encoding", ""):
            return False  # not something this minimal server speaks: just hang up
        if headers.get("expect", "").lower() == "100-continue":  # curl sends it for big bodies
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        raw = await conn.read_exactly(int(length))
        received_ns = time.perf_counter_ns()
        if raw is None or self._n >= self.max_requests:  # over the cap: shutdown is under way
            return False
        method, target, version = parts
        conn_hdr = headers.get("connection", "").lower()
        keep_alive = conn_hdr != "close" if version == "HTTP/1.1" else conn_hdr == "keep-alive"
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self._n += 1
        log = RequestLog(n=self._n, method=method, path=target.split("?")[0], headers=headers,
                         body=body, received_ns=received_ns, connection=conn.id)
        self.logs.append(log)
        ex = _Exchange(conn, writer, log, keep_alive)
        try:
            await self._route(ex)
        except _ClientGone:
            log.client_disconnected, ex.keep_alive = True, False
        finally:
            if log.finished_ns is None:  # no complete response: hung up, faulted or cancelled
                log.finished_ns = time.perf_counter_ns()
            if log.n >= self.max_requests:
                self._stop_evt.set()
        return ex.keep_alive

    async def _route(self, ex: _Exchange) -> None:
        log, body = ex.log, ex.log.body
        if log.path not in ("/v1/models", "/v1/chat/completions"):
            return await ex.send_error(404, f"no route for {log.path}")
        if log.method != ("GET" if log.path == "/v1/models" else "POST"):
            return await ex.send_error(405, f"{log.method} not allowed on {log.path}")
        if log.path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.scripts]
            return await ex.send_json(200, {"object": "list", "data": data})
        if not isinstance(body, dict):
            return await ex.send_error(400, "the body must be a JSON object")
        log.model = model = body.get("model")
        script = self.scripts.get(model, self.default) if isinstance(model, str) else None
        if script is None:
            return await ex.send_error(404, f"model {model!r} not found")
        log.model_request_n = self._model_n[model] = self._model_n.get(model, 0) + 1
        log.fault = script.faults.get(log.model_request_n)
        if log.fault in PRE_STREAM_FAULTS:
            retry = [] if log.fault == "500" else [f"Retry-After: {script.retry_after_s}"]
            return await ex.send_error(int(log.fault), f"fake {log.fault}", retry)
        if script.reject_stream_options and "stream_options" in body:
            return await ex.send_error(400, "stream_options is not supported")
        if script.reject_response_format and "response_format" in body:
            return await ex.send_error(400, "response_format is not supported")
        prompt = json.dumps(body.get("messages") or [])
        answer = None
        cycle_key = next((key for key in script.answer_cycle if json.dumps(key)[1:-1] in prompt), None)
        if cycle_key is not None:  # count on the server's own Script, not a replaced copy
            n = script.cycle_used.get(cycle_key, 0)
            script.cycle_used[cycle_key] = n + 1
            answer = script.answer_cycle[cycle_key][n % len(script.answer_cycle[cycle_key])]
        if answer is None:
            answer = next((text for key, text in script.answers.items() if json.dumps(key)[1:-1] in prompt), None)
        if answer is not None:
            script = dataclasses.replace(script, content_text=answer)
        if script.thinking_switch and _thinking_off(body):
            script = dataclasses.replace(script, reasoning_tokens=0)
        last = (body.get("messages") or [{}])[-1]
        after_tool = isinstance(last, dict) and last.get("role") == "tool"  # results came back: answer in text
        calls = None if after_tool else next(
            (c for key, c in script.tool_answers.items() if json.dumps(key)[1:-1] in prompt), None)
        if calls is not None:
            script = dataclasses.replace(script, tool_calls=calls, content_tokens=0, content_text=script.content_text or "")
        plan, finish = _plan(script, body.get("max_completion_tokens", body.get("max_tokens")), log.n)
        if body.get("stream"):
            await self._stream(ex, script, plan, finish)
        else:
            await self._complete(ex, script, plan, finish)

    async def _stream(self, ex: _Exchange, script: Script, plan: list, finish: str) -> None:
        log, body = ex.log, ex.log.body
        base = {"id": f"chatcmpl-fake-{log.n}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": log.model}

        def chunk(delta: dict, reason: str | None = None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

        await ex.start_stream()
        if script.role_chunk:
            await ex.event("role", 0, chunk({"role": "assistant", "content": None}))
        await ex.wait_until(log.received_ns + _ttft_ns(script, body), ping=script.keepalive_comments)
        fault = log.fault if log.fault in MID_STREAM_FAULTS else None
        last_ns = None
        for i, (kind, tokens, delta) in enumerate(plan):
            if last_ns is not None:  # pace from the previous token event so overhead doesn't add up
                await ex.wait_until(last_ns + _ns(script.gap_s))
            if fault and i == script.fault_after_events:
                if not await self._mid_stream_fault(ex, script, fault):
                    return
                fault = None
            await ex.event(kind, tokens, chunk(delta))
            last_ns = log.events[-1][0]
        if fault and not await self._mid_stream_fault(ex, script, fault):
            return  # the stream had fewer events than fault_after_events
        final = chunk({}, finish)
        usage = _usage(body, ((k, t) for _, k, t in log.events))
        if script.timings:
            tok = log._token_events()
            now = time.perf_counter_ns()
            final["timings"] = _timings(usage, log.received_ns, log.first_token_ns or now,
                                        log.last_token_ns or now, tok[0][2] if tok else 0)
        await ex.event("final", 0, final)
        opts = body.get("stream_options")
        requested = isinstance(opts, dict) and bool(opts.get("include_usage"))
        if script.usage == "always" or (script.usage == "requested" and requested):
            await ex.event("usage", 0, {**base, "choices": [], "usage": usage})
        await ex.event("done", 0, b"data: [DONE]\n\n")
        await ex.end_stream()

    async def _mid_stream_fault(self, ex: _Exchange, script: Script, fault: str) -> bool:
        """Inject a mid-stream fault; True if the stream should carry on."""
        if fault == "malformed":
            await ex.event("malformed", 0, b"data: {not json\n\n")
            return True
        if fault == "error_event":
            err = {"error": {"message": "model crashed", "type": "server_error"}}
            await ex.event("error", 0, err)
        elif fault == "error_field":
            await ex.event("error", 0, b'error: {"message":"boom"}\n\n')
        if fault in ("error_event", "error_field", "truncate"):
            await ex.end_stream()  # a clean end of the HTTP body, just no [DONE]
            return False
        if fault == "stall":
            await ex.wait_until(time.perf_counter_ns() + _ns(script.stall_s))
        ex.keep_alive = False  # "drop" and a finished "stall": hang up without the last chunk
        return False

    async def _complete(self, ex: _Exchange, script: Script, plan: list, finish: str) -> None:
        """Non-streaming answer, sent after the time the stream would have taken. Mid-stream faults
        map to: drop/stall/truncate -> hang up without a response (stall after stall_s),
        error_event/error_field -> HTTP 500, malformed -> a 200 whose body is not JSON."""
        log = ex.log
        first_ns = log.received_ns + _ttft_ns(script, log.body)
        await ex.wait_until(first_ns + _ns(max(0, len(plan) - 1) * script.gap_s))
        if log.fault in ("drop", "stall", "truncate"):
            if log.fault == "stall":
                await ex.wait_until(time.perf_counter_ns() + _ns(script.stall_s))
            ex.keep_alive = False
            return
        if log.fault in ("error_event", "error_field"):
            return await ex.send_error(500, "model crashed")
        if log.fault == "malformed":
            return await ex.send_json(200, b"{not json")
        usage = _usage(log.body, ((k, t) for k, t, _ in plan))
        out = {"id": f"chatcmpl-fake-{log.n}", "object": "chat.completion", "created": int(time.time()),
               "model": log.model, "usage": usage,
               "choices": [{"index": 0, "message": _assemble(plan), "finish_reason": finish}]}
        if script.timings:
            out["timings"] = _timings(usage, log.received_ns, first_ns, time.perf_counter_ns(),
                                      plan[0][1] if plan else 0)
        await ex.send_json(200, out)


def main(argv: list[str] | None = None) -> int:
    """CLI: serve the default Script for the given models until the lifetime cap or a signal."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", action="append", dest="models", metavar="NAME")
    p.add_argument("--ttft-s", type=float, default=Script.ttft_s)
    p.add_argument("--gap-s", type=float, default=Script.gap_s)
    p.add_argument("--tokens", type=int, default=Script.content_tokens)
    p.add_argument("--tokens-per-event", type=int, default=Script.tokens_per_event)
    p.add_argument("--reasoning-tokens", type=int, default=Script.reasoning_tokens)
    p.add_argument("--prefill-tps", type=float, default=None)
    p.add_argument("--max-lifetime-s", type=float, default=300.0)
    p.add_argument("--log-file", help="on exit, write one JSON line per request (times, events)")
    a = p.parse_args(argv)
    script = Script(ttft_s=a.ttft_s, gap_s=a.gap_s, content_tokens=a.tokens, prefill_tps=a.prefill_tps,
                    tokens_per_event=a.tokens_per_event, reasoning_tokens=a.reasoning_tokens)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before listening, so an early signal is not lost
        signal.signal(sig, lambda *_: stop.set())
    server = FakeServer({m: script for m in a.models or ["fake-model"]},
                        max_lifetime_s=a.max_lifetime_s, port=a.port)
    with server:
        print(f"FAKESERVER_URL={server.base_url}", flush=True)
        while server.running and not stop.wait(0.1):
            pass
    if a.log_file:
        with open(a.log_file, "w", encoding="utf-8") as out:
            for log in server.logs:
                out.write(json.dumps({
                    "n": log.n, "model": log.model, "path": log.path, "status": log.status,
                    "received_ns": log.received_ns, "finished_ns": log.finished_ns,
                    "events": log.events, "client_disconnected": log.client_disconnected,
                }) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
