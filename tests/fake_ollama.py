"""A loopback fake Ollama server for tests: the documented native API and the OpenAI model list.

It answers exactly the shapes Ollama documents, and nothing it does not:

* ``GET /api/version`` -> ``{"version": "0.12.6"}`` (docs.ollama.com/api-reference/get-version).
* ``GET /api/tags`` -> ``{"models": [{name, model, modified_at, size, digest, details: {format,
  family, families, parameter_size, quantization_level}}]}`` (ollama/ollama docs/api.md, "List
  Local Models").
* ``GET /api/ps`` -> the loaded models with the same fields plus ``expires_at``, ``size_vram`` and
  ``context_length`` (docs/api.md "List Running Models"; ``context_length`` from
  docs.ollama.com/api/ps).
* ``POST /api/show {"model"}`` -> ``modelfile`` (with ``FROM <blob path>``), ``parameters``
  (``name value`` lines), ``template``, ``details``, ``model_info`` (``general.architecture``,
  ``general.parameter_count``, ``<arch>.context_length`` ...), ``capabilities``; 404
  ``{"error": "model 'x' not found"}`` for an unknown model (docs/api.md "Show Model Information";
  error shape from docs.ollama.com/api/errors).
* ``POST /api/generate``: no prompt loads the model (``done_reason`` "load"), no prompt with
  ``keep_alive`` 0 unloads it (``done_reason`` "unload") (docs/api.md "Load a model" / "Unload a
  model"). The load answer also carries ``total_duration`` and ``load_duration`` as current servers
  send them (``report_load_duration=False`` leaves them out, as in the docs' example). A prompt
  streams ``response`` lines like ``/api/chat``.
* ``POST /api/chat`` streams NDJSON (HTTP/1.1 chunked, one line per chunk, sent at once):
  optional ``message.thinking`` lines, then ``message.content`` lines ``gap_s`` apart, optional
  ``message.tool_calls`` (``[{"function": {"name", "arguments": {object}}}]``), then the final line
  ``done: true`` with ``done_reason``, ``total_duration``, ``load_duration``,
  ``prompt_eval_count``, ``prompt_eval_duration``, ``eval_count``, ``eval_duration`` in
  nanoseconds ("All durations are returned in nanoseconds", docs/api.md "Conventions"). The
  durations are the fake's own ``perf_counter_ns`` measurements of what it did: load (sleeping
  ``load_s`` when the model was not loaded, as Ollama loads on demand), prefill (sleeping
  ``prefill_s``), decode (first to last token line). ``options.num_predict`` caps thinking plus
  content tokens, then ``done_reason`` is "length". ``error_after`` sends
  ``{"error": "..."}`` mid-stream, HTTP status unchanged (docs.ollama.com/api/errors, "Errors that
  occur while streaming").
* ``GET /v1/models`` -> the OpenAI-compatible list ``{"object": "list", "data": [{"id", ...}]}``.

Every request is recorded (method, path, parsed body) in ``requests``; every chat/generate stream
also in ``streams`` with the numbers it sent. Bounded: 127.0.0.1 only, port 0, daemon threads,
stops itself after ``max_lifetime_s`` or ``max_requests``, bodies up to 1 MiB, streams up to
``MAX_TOKENS`` tokens, idle connections close after 5 s. Standard library only.
"""

from __future__ import annotations

import datetime as _dt
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackFake

MAX_BODY = 1 << 20
MAX_TOKENS = 4096
VERSION = "0.12.6"


@dataclass
class FakeModel:
    """One local model, as the fake describes it."""

    name: str
    family: str = "qwen3"
    parameter_size: str = "8.2B"
    parameter_count: int = 8_190_735_360
    quantization_level: str = "Q4_K_M"
    size: int = 5_225_376_047
    context_trained: int = 40960
    num_ctx: int | None = None  # PARAMETER num_ctx in the Modelfile, when set
    blob_path: str = "/nonexistent/.ollama/models/blobs/sha256-a3de86cd1c13"
    loaded_context: int = 4096  # what /api/ps reports while loaded (when num_ctx is not set)
    capabilities: list[str] = field(default_factory=lambda: ["completion", "tools", "thinking"])


@dataclass
class ChatScript:
    """How ``/api/chat`` answers (see the module docstring)."""

    thinking_tokens: int = 0
    content_tokens: int = 8
    gap_s: float = 0.01  # between token lines
    prefill_s: float = 0.03  # body read -> first token line (reported as prompt_eval_duration)
    load_s: float = 0.02  # on-demand load when the model is not loaded
    tool_calls: list[dict] | None = None  # [{"name", "arguments": {...}}], sent after content
    error_after: int | None = None  # send {"error": ...} after this many token lines
    omit_prompt_eval: bool = False  # as when the whole prompt came from the cache


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    received_ns: int


@dataclass
class StreamLog:
    """What one streaming answer sent: its line times and the final line."""

    path: str
    model: str
    received_ns: int
    token_ns: list[int] = field(default_factory=list)
    final: dict | None = None
    error: str | None = None


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _digest(name: str) -> str:
    return (name.encode().hex() * 8)[:64]


class FakeOllama(LoopbackFake):
    thread_name = "fake-ollama"

    """Start with ``start()`` (or ``with``); ``root`` is ``http://127.0.0.1:PORT``, ``base_url``
    the OpenAI-compatible ``.../v1``."""

    def __init__(self, models: list[FakeModel] | None = None, script: ChatScript | None = None,
                 *, version: str = VERSION, report_load_duration: bool = True,
                 max_lifetime_s: float = 60.0, max_requests: int = 1000) -> None:
        self.models = {m.name: m for m in (models or [FakeModel("qwen3:8b")])}
        self.script = script or ChatScript()
        self.version = version
        self.report_load_duration = report_load_duration
        self.max_lifetime_s, self.max_requests = max_lifetime_s, max_requests
        self.loaded: dict[str, float] = {}  # name -> expires (time.time())
        self.requests: list[Recorded] = []
        self.streams: list[StreamLog] = []
        self.lock = threading.Lock()

    # -- views for assertions ---------------------------------------------------------------
    def paths(self) -> list[str]:
        with self.lock:
            return [r.path for r in self.requests]

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [r.body for r in self.requests if r.path == path]

    # -- documented answers -----------------------------------------------------------------
    def tag_entry(self, m: FakeModel) -> dict[str, Any]:
        return {
            "name": m.name, "model": m.name, "modified_at": "2025-05-01T10:00:00.000000000Z",
            "size": m.size, "digest": _digest(m.name),
            "details": {"parent_model": "", "format": "gguf", "family": m.family, "families": [m.family],
                        "parameter_size": m.parameter_size, "quantization_level": m.quantization_level},
        }

    def ps_entry(self, m: FakeModel, expires: float) -> dict[str, Any]:
        entry = self.tag_entry(m)
        entry.pop("modified_at")
        expires_at = _dt.datetime.fromtimestamp(expires, _dt.timezone.utc).isoformat()
        entry.update({"expires_at": expires_at, "size_vram": m.size + 512 * 2**20,
                      "context_length": m.num_ctx or m.loaded_context})
        entry["size"] = m.size + 512 * 2**20
        return entry

    def show(self, m: FakeModel) -> dict[str, Any]:
        params = [f"{'num_ctx':<30} {m.num_ctx}"] if m.num_ctx else []
        params += [f"{'stop':<30} \"<|im_start|>\"", f"{'stop':<30} \"<|im_end|>\"",
                   f"{'temperature':<30} 0.6"]
        modelfile = (f"# Modelfile generated by \"ollama show\"\n# FROM {m.name}\n\n"
                     f"FROM {m.blob_path}\nTEMPLATE \"{{{{ .Prompt }}}}\"\n"
                     + "".join(f"PARAMETER {p.split(None, 1)[0]} {p.split(None, 1)[1]}\n" for p in params))
        arch = m.family
        return {
            "modelfile": modelfile,
            "parameters": "\n".join(params),
            "template": "{{ .Prompt }}",
            "details": self.tag_entry(m)["details"],
            "model_info": {
                "general.architecture": arch, "general.file_type": 15,
                "general.parameter_count": m.parameter_count, "general.quantization_version": 2,
                f"{arch}.block_count": 36, f"{arch}.context_length": m.context_trained,
                f"{arch}.embedding_length": 4096, "tokenizer.ggml.model": "gpt2",
            },
            "capabilities": list(m.capabilities),
            "modified_at": "2025-05-01T10:00:00.000000000Z",
        }


def _is_zero(keep_alive: Any) -> bool:
    return keep_alive in (0, 0.0, "0", "0s", "0m")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # idle keep-alive connections end
    server_version = "fake-ollama"
    fake: FakeOllama  # set on the subclass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing ---------------------------------------------------------------------------
    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        return json.loads(raw)

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _line(self, obj: Any) -> None:
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _record(self, body: Any) -> bool:
        fake = self.fake
        with fake.lock:
            if len(fake.requests) >= fake.max_requests:
                return False
            fake.requests.append(Recorded(self.command, self.path, body, time.perf_counter_ns()))
        return True

    def _dispatch(self) -> None:
        try:
            body = self._body() if self.command == "POST" else None
        except (ValueError, json.JSONDecodeError) as exc:
            self._record(None)
            self._error(400, f"invalid request body: {exc}")
            self.close_connection = True
            return
        if not self._record(body):
            self._error(503, "fake-ollama request cap reached")
            self.close_connection = True
            return
        routes = {
            ("GET", "/api/version"): lambda: self._json(200, {"version": self.fake.version}),
            ("GET", "/api/tags"): self._tags,
            ("GET", "/api/ps"): self._ps,
            ("POST", "/api/show"): lambda: self._show(body),
            ("POST", "/api/generate"): lambda: self._generate(body),
            ("POST", "/api/chat"): lambda: self._chat(body),
            ("GET", "/v1/models"): self._v1_models,
        }
        route = routes.get((self.command, self.path.split("?", 1)[0]))
        if route is None:
            self._error(404, f"{self.command} {self.path} not found")
            return
        try:
            route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = _dispatch
    do_POST = _dispatch

    # -- endpoints --------------------------------------------------------------------------
    def _tags(self) -> None:
        fake = self.fake
        self._json(200, {"models": [fake.tag_entry(m) for m in fake.models.values()]})

    def _ps(self) -> None:
        fake = self.fake
        now = time.time()
        with fake.lock:
            loaded = {n: e for n, e in fake.loaded.items() if e > now}
            fake.loaded = loaded
        self._json(200, {"models": [fake.ps_entry(fake.models[n], e) for n, e in loaded.items()]})

    def _v1_models(self) -> None:
        fake = self.fake
        self._json(200, {"object": "list", "data": [
            {"id": n, "object": "model", "created": 1746093600, "owned_by": "library"} for n in fake.models]})

    def _model(self, body: Any) -> FakeModel | None:
        name = body.get("model") if isinstance(body, dict) else None
        model = self.fake.models.get(name) if isinstance(name, str) else None
        if model is None:
            self._error(404, f"model '{name}' not found")
        return model

    def _show(self, body: Any) -> None:
        if (model := self._model(body)) is not None:
            self._json(200, self.fake.show(model))

    def _ensure_loaded(self, model: FakeModel, keep_alive: Any) -> int:
        """Load on demand; returns the load time in ns (0 when already loaded)."""
        fake = self.fake
        seconds = _keep_alive_s(keep_alive)
        with fake.lock:
            was = model.name in fake.loaded and fake.loaded[model.name] > time.time()
        t0 = time.perf_counter_ns()
        if not was:
            time.sleep(fake.script.load_s)
        with fake.lock:
            fake.loaded[model.name] = time.time() + seconds
        return time.perf_counter_ns() - t0

    def _generate(self, body: Any) -> None:
        model = self._model(body)
        if model is None:
            return
        fake = self.fake
        keep_alive = body.get("keep_alive", "5m")
        if not body.get("prompt"):
            t0 = time.perf_counter_ns()
            if _is_zero(keep_alive):
                with fake.lock:
                    fake.loaded.pop(model.name, None)
                self._json(200, {"model": model.name, "created_at": _now_iso(), "response": "",
                                 "done": True, "done_reason": "unload"})
                return
            load_ns = self._ensure_loaded(model, keep_alive)
            answer = {"model": model.name, "created_at": _now_iso(), "response": "", "done": True,
                      "done_reason": "load"}
            if fake.report_load_duration:
                answer.update({"total_duration": time.perf_counter_ns() - t0, "load_duration": load_ns})
            self._json(200, answer)
            return
        self._stream(model, body, "/api/generate")

    def _chat(self, body: Any) -> None:
        model = self._model(body)
        if model is None:
            return
        if not isinstance(body.get("messages"), list):
            self._error(400, "messages must be a list")
            return
        self._stream(model, body, "/api/chat")

    def _stream(self, model: FakeModel, body: dict, path: str) -> None:
        fake, script = self.fake, self.fake.script
        received = time.perf_counter_ns()
        log = StreamLog(path=path, model=model.name, received_ns=received)
        with fake.lock:
            fake.streams.append(log)
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        limit = options.get("num_predict")
        limit = MAX_TOKENS if not isinstance(limit, int) or limit < 0 else min(limit, MAX_TOKENS)
        if path == "/api/chat":
            prompt_chars = sum(len(str(m.get("content") or "")) for m in body["messages"] if isinstance(m, dict))
        else:
            prompt_chars = len(str(body.get("prompt") or ""))
        prompt_tokens = max(1, -(-prompt_chars // 4))
        load_ns = self._ensure_loaded(model, body.get("keep_alive", "5m"))
        self._start_stream()
        t_prefill = time.perf_counter_ns()
        time.sleep(script.prefill_s)
        prefill_ns = time.perf_counter_ns() - t_prefill

        def piece(kind: str, text: str) -> dict:
            base = {"model": model.name, "created_at": _now_iso()}
            if path == "/api/chat":
                message = {"role": "assistant", "content": text if kind == "content" else ""}
                if kind == "thinking":
                    message["thinking"] = text
                return {**base, "message": message, "done": False}
            return {**base, "response": text if kind == "content" else "",
                    **({"thinking": text} if kind == "thinking" else {}), "done": False}

        plan = [("thinking", f"think{i} ") for i in range(script.thinking_tokens)]
        plan += [("content", f"word{i} ") for i in range(script.content_tokens)]
        reason = "stop"
        if len(plan) > limit:
            plan, reason = plan[:limit], "length"
        sent = 0
        for kind, text in plan:
            if sent and script.gap_s:
                time.sleep(script.gap_s)
            if script.error_after is not None and sent >= script.error_after:
                break
            self._line(piece(kind, text))
            log.token_ns.append(time.perf_counter_ns())
            sent += 1
        if script.error_after is not None and sent >= script.error_after:
            log.error = "an error was encountered while running the model"
            self._line({"error": log.error})
            self._end_stream()
            return
        if script.tool_calls and path == "/api/chat" and reason == "stop":
            if sent and script.gap_s:
                time.sleep(script.gap_s)
            calls = [{"function": {"name": c["name"], "arguments": c.get("arguments", {})}}
                     for c in script.tool_calls]
            self._line({"model": model.name, "created_at": _now_iso(),
                        "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False})
            log.token_ns.append(time.perf_counter_ns())
            sent += 1
        first = log.token_ns[0] if log.token_ns else t_prefill + prefill_ns
        last = log.token_ns[-1] if log.token_ns else first
        final: dict[str, Any] = {
            "model": model.name, "created_at": _now_iso(), "done": True, "done_reason": reason,
            "total_duration": time.perf_counter_ns() - received,
            "load_duration": load_ns,
            "eval_count": sent,
            "eval_duration": last - first,
        }
        if path == "/api/chat":
            final["message"] = {"role": "assistant", "content": ""}
        else:
            final["response"] = ""
        if not script.omit_prompt_eval:
            final["prompt_eval_count"] = prompt_tokens
            final["prompt_eval_duration"] = prefill_ns
        log.final = final
        self._line(final)
        self._end_stream()


def _keep_alive_s(value: Any) -> float:
    """Ollama's keep_alive: seconds as a number, or a duration string ("5m", "30m", "1h"); a
    negative value keeps the model loaded indefinitely."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 10**9 if value < 0 else float(value)
    if isinstance(value, str):
        text = value.strip()
        for suffix, mult in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)):
            if text.endswith(suffix):
                try:
                    number = float(text[: -len(suffix)])
                except ValueError:
                    break
                return 10**9 if number < 0 else number * mult
    return 300.0


FakeOllama.handler = _Handler
