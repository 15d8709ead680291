"""Streaming chat client: one request in, one ``StreamResult`` with honest timings out.

Timing rules (DESIGN.md section 3):

* The clock of a request starts when its last byte has been handed to the socket (httpcore's
  ``http11.send_request_body.complete`` trace event), not when ``client.stream()`` is called: pool
  set-up and connecting added up to tens of milliseconds to TTFT in measurements. Connection time is
  kept as a figure of its own.
* Every network read is timestamped with ``perf_counter_ns()`` as it arrives, before parsing.

Robustness rules (research notes B3/B4): retry only before the first event (connect errors, 408,
409, 429, 5xx), honouring Retry-After up to a cap, with jittered backoff; a stream that ends
without ``finish_reason`` is ``truncated``, not a short answer; any received byte (keep-alive
comments included) counts as liveness for the idle timeout; leaving the ``async with`` on
cancellation closes the connection so the server frees its slot.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from .accumulate import Accumulated, ChatAccumulator
from .sse import SSEDecoder, SSEEvent

RETRYABLE_STATUS = {408, 409, 429}

#: How a request ended. "finished" is the only outcome whose numbers are trusted.
OUTCOMES = (
    "finished",      # finish_reason seen (stop, length, tool_calls, content_filter)
    "server_error",  # an error object inside the stream (HTTP 200)
    "truncated",     # the stream ended or the connection dropped without a finish_reason
    "idle_timeout",  # no bytes for idle_timeout_s
    "deadline",      # request_timeout_s passed
    "http_error",    # non-200 answer (after retries), or a non-stream answer
    "connect_error", # could not connect (after retries)
    "cancelled",     # we cancelled it (Ctrl-C, stop)
)


@dataclass
class ChatRequest:
    """One chat completion request. The API key lives only in memory (and is never repr'd)."""

    base_url: str
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    temperature: float = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)
    #: Endpoint below base_url. Dialects change it (LM Studio's /api/v0, Ollama's native /api/chat).
    path: str = "/chat/completions"
    #: "sse" (OpenAI style) or "ndjson" (one JSON object per line, Ollama's native API).
    wire: str = "sse"
    #: A complete request body in the server's own format; replaces the OpenAI body when set.
    native_body: dict[str, Any] | None = None

    def body(self, with_usage: bool) -> dict[str, Any]:
        if self.native_body is not None:
            return self.native_body
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
        }
        if with_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return body


@dataclass
class StreamProgress:
    """Live view of a request in flight. The client writes it; UIs read it on a timer."""

    state: str = "waiting"  # waiting, connecting, sent, streaming, done
    bytes: int = 0
    token_events: int = 0
    content_chars: int = 0
    reasoning_chars: int = 0
    t_sent_ns: int | None = None
    t_first_token_ns: int | None = None
    t_last_token_ns: int | None = None
    acc: Accumulated | None = None  # the text so far, for a tail view


@dataclass
class StreamResult:
    """Everything about one request: outcome, text, usage and raw timestamps (perf_counter_ns)."""

    outcome: str = "cancelled"
    error: str | None = None
    http_status: int | None = None
    attempts: int = 0
    retries: list[str] = field(default_factory=list)
    stream_options_dropped: bool = False
    t_call_ns: int | None = None  # before client.stream() of the final attempt
    t_connect_ns: int | None = None  # TCP connect duration of the final attempt, if it connected
    t_sent_ns: int | None = None  # last request byte handed to the socket: the clock's zero
    t_headers_ns: int | None = None
    t_end_ns: int | None = None
    bytes: int = 0
    comments: int = 0
    acc: Accumulated = field(default_factory=Accumulated)
    server_header: str | None = None
    #: Answers with HTTP 429 (or 503 with Retry-After) met, counting the ones retried here.
    rate_limited: int = 0
    #: Seconds the last non-200 answer asked us to wait (Retry-After), if it said.
    retry_after_s: float | None = None

    @property
    def ok(self) -> bool:
        """Numbers from this request can be trusted: clean finish and nothing malformed."""
        return self.outcome == "finished" and not self.acc.malformed


class _Retry(Exception):
    def __init__(self, reason: str, delay_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s


class _DropStreamOptions(Exception):
    pass


@dataclass
class ClientLimits:
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 120.0
    request_timeout_s: float = 900.0
    retries: int = 2
    retry_after_cap_s: float = 60.0
    max_connections: int = 64


class StreamClient:
    """An httpx-based streaming client shared by every request of a run."""

    def __init__(self, limits: ClientLimits | None = None) -> None:
        self.limits = limits or ClientLimits()
        lim = self.limits
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=lim.connect_timeout_s, read=lim.idle_timeout_s, write=30.0, pool=None
            ),
            limits=httpx.Limits(
                max_connections=lim.max_connections, max_keepalive_connections=lim.max_connections
            ),
        )
        # Servers that rejected stream_options once are not asked again.
        self._no_usage_option: set[str] = set()

    @property
    def http(self) -> httpx.AsyncClient:
        """The shared httpx client (dialects use it for their native endpoints)."""
        return self._http

    async def __aenter__(self) -> "StreamClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat_stream(
        self, request: ChatRequest, progress: StreamProgress | None = None
    ) -> StreamResult:
        """Run one streaming chat request to its end; never raises except on cancellation."""
        result = StreamResult()
        progress = progress or StreamProgress()
        with_usage = request.base_url not in self._no_usage_option and request.native_body is None
        failures = 0
        try:
            async with asyncio.timeout(self.limits.request_timeout_s):
                while True:
                    result.attempts += 1
                    try:
                        await self._attempt(request, with_usage, result, progress)
                        break
                    except _DropStreamOptions:
                        with_usage = False
                        result.stream_options_dropped = True
                        self._no_usage_option.add(request.base_url)
                        result.retries.append("server rejected stream_options; retried without")
                    except _Retry as retry:
                        failures += 1
                        if failures > self.limits.retries:
                            break
                        delay = retry.delay_s if retry.delay_s is not None else _backoff(failures)
                        result.retries.append(f"{retry.reason}; retry in {delay:.2f} s")
                        await asyncio.sleep(delay)
                if result.stream_options_dropped and result.http_status == 400:
                    # Rejected without stream_options too: the 400 was about something else in
                    # this request (e.g. response_format), so keep asking this server for usage.
                    self._no_usage_option.discard(request.base_url)
        except TimeoutError:
            result.outcome = "deadline"
            result.error = f"no finish within request_timeout_s={self.limits.request_timeout_s:g}"
        except asyncio.CancelledError:
            result.outcome = "cancelled"
            result.error = "cancelled"
            raise
        finally:
            if result.t_end_ns is None:
                result.t_end_ns = time.perf_counter_ns()
            progress.state = "done"
        return result

    async def _attempt(
        self,
        request: ChatRequest,
        with_usage: bool,
        result: StreamResult,
        progress: StreamProgress,
    ) -> None:
        marks: dict[str, int] = {}

        async def trace(name: str, info: dict[str, Any]) -> None:
            marks[name] = time.perf_counter_ns()

        accept = "text/event-stream" if request.wire == "sse" else "application/x-ndjson"
        headers = {"Accept": accept, "Accept-Encoding": "identity"}
        if request.api_key:
            headers["Authorization"] = f"Bearer {request.api_key}"
        url = request.base_url.rstrip("/") + request.path
        # Reset per attempt: only the final attempt's numbers describe the answer.
        acc = ChatAccumulator()
        result.acc = acc.result
        result.outcome, result.error, result.http_status = "connect_error", None, None
        result.t_sent_ns = result.t_headers_ns = result.t_end_ns = result.t_connect_ns = None
        result.bytes = result.comments = 0
        progress.acc = acc.result
        progress.state = "connecting"
        result.t_call_ns = time.perf_counter_ns()
        try:
            async with self._http.stream(
                "POST",
                url,
                content=json.dumps(request.body(with_usage)).encode(),
                headers={**headers, "Content-Type": "application/json"},
                extensions={"trace": trace},
            ) as resp:
                result.t_headers_ns = time.perf_counter_ns()
                result.t_sent_ns = marks.get("http11.send_request_body.complete", result.t_call_ns)
                progress.t_sent_ns = result.t_sent_ns
                progress.state = "sent"
                if "connection.connect_tcp.complete" in marks:
                    start = marks.get("connection.connect_tcp.started", result.t_call_ns)
                    result.t_connect_ns = marks["connection.connect_tcp.complete"] - start
                result.http_status = resp.status_code
                result.server_header = resp.headers.get("server")
                if resp.status_code != 200:
                    await self._http_error(resp, with_usage, result)
                    return
                ctype = resp.headers.get("content-type", "")
                if request.wire == "ndjson":
                    await self._read_stream(resp, acc, result, progress, NDJSONDecoder())
                    return
                if "text/event-stream" not in ctype:
                    raw = await resp.aread()
                    result.outcome = "http_error"
                    result.error = f"server did not stream (content-type {ctype or 'missing'}): {raw[:200]!r}"
                    return
                await self._read_stream(resp, acc, result, progress)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            result.outcome = "connect_error"
            result.error = f"cannot connect to {request.base_url}: {_short(exc)}"
            raise _Retry(result.error) from None
        except httpx.ReadTimeout:
            acc.finish()
            result.outcome = "idle_timeout"
            result.error = f"no bytes for idle_timeout_s={self.limits.idle_timeout_s:g}" + (
                " (stalled mid-stream)" if acc.result.data_events else " (before the first event)"
            )
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            acc.finish()
            if acc.result.data_events == 0 and result.bytes == 0:
                result.outcome = "connect_error"
                result.error = f"server closed the connection before answering: {_short(exc)}"
                raise _Retry(result.error) from None
            result.outcome = "truncated"
            result.error = f"connection dropped mid-stream: {_short(exc)}"
        finally:
            result.t_end_ns = time.perf_counter_ns()

    async def _read_stream(
        self,
        resp: httpx.Response,
        acc: ChatAccumulator,
        result: StreamResult,
        progress: StreamProgress,
        decoder: "SSEDecoder | NDJSONDecoder | None" = None,
    ) -> None:
        decoder = decoder or SSEDecoder()
        r = acc.result
        progress.state = "streaming"
        async for chunk in resp.aiter_bytes():
            now = time.perf_counter_ns()
            result.bytes += len(chunk)
            progress.bytes = result.bytes
            for event in decoder.feed(chunk):
                acc.on_event(event, now)
            if r.token_events != progress.token_events:
                progress.token_events = r.token_events
                progress.content_chars = r.content_chars
                progress.reasoning_chars = r.reasoning_chars
                progress.t_first_token_ns = r.t_first_token_ns
                progress.t_last_token_ns = r.t_last_token_ns
            if r.done or r.server_error:
                break
        pending = decoder.close()
        if pending is not None:
            acc.on_event(pending, time.perf_counter_ns())
        acc.finish()
        result.comments = getattr(decoder, "comments", 0)
        if isinstance(decoder, SSEDecoder) and decoder.error_fields and not r.server_error:
            r.server_error = decoder.error_fields[-1][:500]
        if r.server_error:
            result.outcome = "server_error"
            result.error = f"server error inside the stream: {r.server_error}"
        elif r.finish_reason is None:
            result.outcome = "truncated"
            result.error = "stream ended without finish_reason" + (
                " ([DONE] without a finish)" if r.done else " (no [DONE])"
            )
        else:
            result.outcome = "finished"
            if r.malformed:
                result.error = f"{len(r.malformed)} malformed event(s) skipped: {r.malformed[0][:80]!r}"

    async def _http_error(self, resp: httpx.Response, with_usage: bool, result: StreamResult) -> None:
        raw = await resp.aread()
        status = resp.status_code
        message = _error_message(raw)
        result.outcome = "http_error"
        result.error = f"HTTP {status}: {message}"
        if status == 400 and with_usage:
            # Some providers reject stream_options (often with a generic message); they still
            # stream without it. Ask once more without it; a real bad request fails again.
            raise _DropStreamOptions()
        result.retry_after_s = delay = _retry_after(resp.headers)
        if status == 429 or (status == 503 and delay is not None):
            result.rate_limited += 1
        if status in RETRYABLE_STATUS or status >= 500:
            if delay is not None and delay > self.limits.retry_after_cap_s:
                result.error += (
                    f" (server asked to wait {delay:g} s, above retry_after_cap_s="
                    f"{self.limits.retry_after_cap_s:g}; not retried)"
                )
                return
            raise _Retry(result.error, delay)


class NDJSONDecoder:
    """One JSON document per line (Ollama's native streaming): same interface as SSEDecoder."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += chunk
        end = self._buffer.rfind(b"\n")
        if end < 0:
            return []
        lines = bytes(self._buffer[:end]).split(b"\n")
        del self._buffer[: end + 1]
        return [SSEEvent(data=line.decode("utf-8", "replace")) for line in lines if line.strip()]

    def close(self) -> SSEEvent | None:
        rest = bytes(self._buffer).strip()
        self._buffer.clear()
        return SSEEvent(data=rest.decode("utf-8", "replace")) if rest else None


def _backoff(failures: int) -> float:
    """Exponential backoff with jitter: 0.5, 1, 2, 4, 8 s (capped), minus up to 25 %."""
    return min(0.5 * 2 ** (failures - 1), 8.0) * (1 - 0.25 * random.random())


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, Retry-After seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(raw: bytes) -> str:
    """The human part of an error body: JSON error.message, else the first bytes."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        return str(err)[:300]
    return str(data)[:300]


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300] if str(exc) else type(exc).__name__
