"""A loopback fake LM Studio server for tests: its REST API v1 and v0 and its OpenAI endpoints.

Standard library only. Listens on 127.0.0.1 only, on a free port, in a daemon thread; stops by
itself after ``max_lifetime_s`` and refuses requests past ``max_requests`` (and bodies over 1 MiB).
Every request is recorded in ``requests`` with the ``perf_counter_ns`` at which its body was read.

The shapes follow LM Studio's docs (repository lmstudio-ai/docs, folder ``1_developer/2_rest``,
published at https://lmstudio.ai/docs/developer/rest):

* ``GET /api/v1/models`` (``list.md``): ``{"models": [{type, publisher, key, display_name,
  architecture, quantization {name, bits_per_weight}, size_bytes, params_string,
  loaded_instances [{id, config {context_length, ...}}], max_context_length, format,
  capabilities}]}``; embedding entries lack ``architecture`` and ``capabilities``.
* ``POST /api/v1/models/load`` (``load.md``): ``{"model", "config"}`` -> ``{"model_instance_id",
  "config", "load_time_seconds"}``. A second load of a loaded model adds an instance
  ``KEY:2`` (LM Studio's naming of extra instances).
* ``POST /api/v1/models/unload`` (``unload.md``): ``{"instance_id"}`` -> ``{"instance_id"}``.
* Errors of the v1 API: ``{"error": {"type", "message"}}`` with the types of
  ``streaming-events.md`` ("model_not_found", "invalid_request"); the HTTP status for them is not
  documented, 404/400 here.
* ``GET /api/v0/models``, ``GET /api/v0/models/{model}`` (``endpoints.md``): ``{"object": "list",
  "data": [{id, object, type ("llm" | "vlm" | "embeddings"), publisher, arch, compatibility_type,
  quantization, state ("loaded" | "not-loaded"), max_context_length}]}``; loaded entries also carry
  ``loaded_context_length`` (not on that page; LM Studio sends it, several clients read it).
* ``POST /api/v0/chat/completions`` (``endpoints.md``): OpenAI chat chunks; the stream ends with a
  chunk with ``choices: []`` carrying ``usage`` (only when ``stream_options.include_usage`` is true,
  as since LM Studio 0.3.18, API changelog) and ``stats {tokens_per_second, time_to_first_token,
  generation_time, stop_reason}``, ``model_info`` and ``runtime``. The stats are measured on this
  server's own clock: ``time_to_first_token`` = body read -> first token chunk sent,
  ``generation_time`` = first -> last token chunk, ``tokens_per_second`` = completion tokens /
  generation_time (the docs' second example, 9 / 0.156, fits this; LM Studio does not define it).
  ``stop_reason`` is "eosFound" or "maxPredictedTokensReached" as in the docs' examples.
* ``GET /v1/models`` and ``POST /v1/chat/completions``: the OpenAI endpoints, without ``stats``.
* Any other endpoint: **HTTP 200** with ``{"error": "Unexpected endpoint or method. (GET /x)"}``,
  as LM Studio answers (lmstudio-ai/lmstudio-bug-tracker#618, #1323).

``v0_only=True`` makes it an LM Studio 0.3.x: every ``/api/v1/...`` path is an unexpected endpoint.
Chat for a model that is not loaded loads it first (LM Studio's just-in-time loading).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackFake

MAX_BODY = 1 << 20


@dataclass
class FakeModel:
    """One downloaded model."""

    key: str
    type: str = "llm"  # "llm", "vlm" (v0 type of a vision model) or "embedding"
    publisher: str = "lmstudio-community"
    architecture: str | None = "llama"
    quantization: str | None = "Q4_K_M"
    bits_per_weight: float | None = 4.5
    size_bytes: int = 4_920_000_000
    params_string: str | None = "8B"
    max_context_length: int = 131072
    format: str = "gguf"
    default_context_length: int = 4096  # what a load without config gets

    @property
    def embedding(self) -> bool:
        return self.type == "embedding"


@dataclass
class ChatScript:
    """How chat requests are answered (all models alike)."""

    ttft_s: float = 0.03  # body read -> first token chunk
    gaps_s: float | list[float] = 0.005  # before each later token chunk; a list is used in order
    content_tokens: int = 8  # capped by max_tokens -> finish "length"
    usage: str = "requested"  # "requested" (stream_options.include_usage), "always" or "never"
    stats: bool = True  # the final chunk carries stats/model_info/runtime (False: 0.3.x streams)

    def gap(self, i: int) -> float:
        if isinstance(self.gaps_s, list):
            return self.gaps_s[min(i, len(self.gaps_s) - 1)] if self.gaps_s else 0.0
        return self.gaps_s


@dataclass
class Logged:
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    received_ns: int
    status: int = 0
    stats: dict[str, Any] | None = None  # the stats a chat answer carried


@dataclass
class _Instance:
    id: str
    config: dict[str, Any] = field(default_factory=dict)


def default_models() -> list[FakeModel]:
    return [
        FakeModel("meta-llama-3.1-8b-instruct"),
        FakeModel("gemma-3-270m-it-qat", architecture="gemma3", quantization="Q4_0", bits_per_weight=4,
                  size_bytes=241_410_208, params_string="270M", max_context_length=32768),
        FakeModel("qwen2-vl-7b-instruct", type="vlm", publisher="mlx-community", architecture="qwen2_vl",
                  quantization="4bit", bits_per_weight=4, format="mlx", size_bytes=4_400_000_000,
                  params_string="7B", max_context_length=32768),
        FakeModel("text-embedding-nomic-embed-text-v1.5", type="embedding", publisher="nomic-ai",
                  architecture="nomic-bert", quantization="F16", bits_per_weight=16,
                  size_bytes=274_290_560, params_string=None, max_context_length=2048),
    ]


class FakeLMStudio(LoopbackFake):
    thread_name = "fake-lmstudio"

    """The fake server. ``loaded`` maps keys to the context length they are loaded with."""

    def __init__(self, models: list[FakeModel] | None = None, *, loaded: dict[str, int] | None = None,
                 v0_only: bool = False, chat: ChatScript | None = None, load_delay_s: float = 0.02,
                 report_load_time: bool = True, max_lifetime_s: float = 60.0,
                 max_requests: int = 1000) -> None:
        self.models = {m.key: m for m in (models if models is not None else default_models())}
        self.instances: dict[str, list[_Instance]] = {k: [] for k in self.models}
        for key, ctx in (loaded or {}).items():
            self.instances[key].append(_Instance(key, {"context_length": ctx}))
        self.v0_only = v0_only
        self.chat = chat or ChatScript()
        self.load_delay_s = load_delay_s
        self.report_load_time = report_load_time
        self.max_lifetime_s = max_lifetime_s
        self.max_requests = max_requests
        self.requests: list[Logged] = []
        self.lock = threading.Lock()

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]

    # -- state ----------------------------------------------------------------------------------
    def loaded_keys(self) -> list[str]:
        with self.lock:
            return [k for k, v in self.instances.items() if v]

    def _load(self, key: str, config: dict[str, Any] | None) -> tuple[_Instance, float]:
        model = self.models[key]
        t0 = time.perf_counter()
        time.sleep(self.load_delay_s)
        cfg: dict[str, Any] = {"context_length": model.default_context_length}
        if not model.embedding:
            cfg.update({"eval_batch_size": 512, "flash_attention": False, "num_experts": 0,
                        "offload_kv_cache_to_gpu": True})
        cfg.update({k: v for k, v in (config or {}).items() if k in cfg or k == "context_length"})
        with self.lock:
            have = self.instances[key]
            inst = _Instance(key if not have else f"{key}:{len(have) + 1}", cfg)
            have.append(inst)
        return inst, time.perf_counter() - t0

    # -- shapes ---------------------------------------------------------------------------------
    def v1_entry(self, m: FakeModel) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "embedding" if m.embedding else "llm",
            "publisher": m.publisher,
            "key": m.key,
            "display_name": m.key.replace("-", " ").title(),
            "architecture": m.architecture,
            "quantization": {"name": m.quantization, "bits_per_weight": m.bits_per_weight},
            "size_bytes": m.size_bytes,
            "params_string": m.params_string,
            "loaded_instances": [{"id": i.id, "config": dict(i.config)} for i in self.instances[m.key]],
            "max_context_length": m.max_context_length,
            "format": m.format,
        }
        if m.embedding:
            del entry["architecture"]
        else:
            entry["capabilities"] = {"vision": m.type == "vlm", "trained_for_tool_use": False}
            entry["description"] = None
        return entry

    def v0_entry(self, m: FakeModel) -> dict[str, Any]:
        insts = self.instances[m.key]
        entry: dict[str, Any] = {
            "id": m.key, "object": "model", "type": "embeddings" if m.embedding else m.type,
            "publisher": m.publisher, "arch": m.architecture, "compatibility_type": m.format,
            "quantization": m.quantization, "state": "loaded" if insts else "not-loaded",
            "max_context_length": m.max_context_length,
        }
        if insts:
            entry["loaded_context_length"] = insts[0].config.get("context_length")
        return entry




def _unexpected(method: str, path: str) -> tuple[int, dict[str, Any]]:
    return 200, {"error": f"Unexpected endpoint or method. ({method} {path})"}


def _v1_error(status: int, etype: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"type": etype, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLMStudio
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections end by themselves
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    # -- plumbing --------------------------------------------------------------------------------
    def _read(self) -> tuple[Logged | None, Any]:
        length = self.headers.get("Content-Length", "0")
        n = int(length) if length.isdigit() else -1
        if n < 0 or n > MAX_BODY:
            self._send(413, {"error": "body too large"})
            self.close_connection = True
            return None, None
        raw = self.rfile.read(n) if n else b""
        received = time.perf_counter_ns()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = urllib.parse.urlsplit(self.path).path
        log = Logged(self.command, path, body, {k.lower(): v for k, v in self.headers.items()}, received)
        fake = self.fake
        with fake.lock:
            over = len(fake.requests) >= fake.max_requests
            if not over:
                fake.requests.append(log)
        if over:
            self._send(503, {"error": "fake LM Studio: request cap reached"})
            self.close_connection = True
            return None, None
        return log, body

    def _send(self, status: int, obj: Any, log: Logged | None = None) -> None:
        data = json.dumps(obj).encode()
        if log is not None:
            log.status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        log, body = self._read()
        if log is None:
            return
        try:
            if log.method == "POST" and log.path in ("/api/v0/chat/completions", "/v1/chat/completions"):
                self._chat(log, body, native=log.path.startswith("/api/v0"))
                return
            status, obj = self._route(log, body)
            self._send(status, obj, log)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- routes ----------------------------------------------------------------------------------
    def _route(self, log: Logged, body: Any) -> tuple[int, Any]:
        fake, method, path = self.fake, log.method, log.path
        if path.startswith("/api/v1/") and fake.v0_only:
            return _unexpected(method, path)
        if (method, path) == ("GET", "/api/v1/models"):
            with fake.lock:
                return 200, {"models": [fake.v1_entry(m) for m in fake.models.values()]}
        if (method, path) == ("POST", "/api/v1/models/load"):
            key = body.get("model") if isinstance(body, dict) else None
            if not isinstance(key, str):
                return _v1_error(400, "invalid_request", '"model" is required')
            if key not in fake.models:
                return _v1_error(404, "model_not_found", f"Model {key!r} not found")
            inst, seconds = fake._load(key, body.get("config"))
            out: dict[str, Any] = {"model_instance_id": inst.id, "config": dict(inst.config)}
            if fake.report_load_time:
                out["load_time_seconds"] = round(seconds, 3)
            return 200, out
        if (method, path) == ("POST", "/api/v1/models/unload"):
            iid = body.get("instance_id") if isinstance(body, dict) else None
            if not isinstance(iid, str):
                return _v1_error(400, "invalid_request", '"instance_id" is required')
            with fake.lock:
                for insts in fake.instances.values():
                    for inst in insts:
                        if inst.id == iid:
                            insts.remove(inst)
                            return 200, {"instance_id": iid}
            return _v1_error(404, "model_not_found", f"No loaded instance {iid!r}")
        if (method, path) == ("GET", "/api/v0/models"):
            with fake.lock:
                return 200, {"object": "list", "data": [fake.v0_entry(m) for m in fake.models.values()]}
        if method == "GET" and path.startswith("/api/v0/models/"):
            key = urllib.parse.unquote(path[len("/api/v0/models/"):])
            if key not in fake.models:
                return 404, {"error": f"Model {key!r} not found"}
            with fake.lock:
                return 200, fake.v0_entry(fake.models[key])
        if (method, path) == ("GET", "/v1/models"):
            data = [{"id": k, "object": "model", "owned_by": m.publisher} for k, m in fake.models.items()]
            return 200, {"object": "list", "data": data}
        return _unexpected(method, path)

    # -- chat ------------------------------------------------------------------------------------
    def _chat(self, log: Logged, body: Any, native: bool) -> None:
        fake, script = self.fake, self.fake.chat
        model_id = body.get("model") if isinstance(body, dict) else None
        key = model_id.split(":")[0] if isinstance(model_id, str) and model_id not in fake.models else model_id
        if not isinstance(key, str) or key not in fake.models:
            self._send(404, {"error": {"message": f"Model {model_id!r} not found", "type": "invalid_request_error"}}, log)
            return
        if fake.models[key].embedding:
            self._send(400, {"error": {"message": f"{key!r} is not an LLM", "type": "invalid_request_error"}}, log)
            return
        if not fake.instances[key]:
            fake._load(key, None)  # just-in-time loading: the time counts into the first token
        prompt = max(1, sum(len(str(m.get("content") or "")) for m in body.get("messages") or []
                            if isinstance(m, dict)) // 4)
        cap = body.get("max_tokens")
        n = script.content_tokens if not isinstance(cap, int) or cap < 0 else min(script.content_tokens, cap)
        finish = "length" if n < script.content_tokens else "stop"
        created = int(time.time())
        base = {"id": f"chatcmpl-fake{len(fake.requests)}", "object": "chat.completion.chunk",
                "created": created, "model": model_id, "system_fingerprint": model_id}
        inst = fake.instances[key][0] if fake.instances[key] else None
        m = fake.models[key]
        model_info = {"arch": m.architecture, "quant": m.quantization, "format": m.format,
                      "context_length": (inst.config.get("context_length") if inst else m.default_context_length)}
        runtime = {"name": "llama.cpp-linux-x86_64-fake", "version": "1.3.0", "supported_formats": ["gguf"]}

        if not body.get("stream"):
            self._wait_until(log.received_ns + int(script.ttft_s * 1e9))
            first = time.perf_counter_ns()
            for i in range(1, n):
                time.sleep(script.gap(i - 1))
            stats = self._stats(log.received_ns, first, time.perf_counter_ns(), n, finish)
            out = {**base, "object": "chat.completion",
                   "choices": [{"index": 0, "logprobs": None, "finish_reason": finish,
                                "message": {"role": "assistant", "content": "".join(f"w{i} " for i in range(n))}}],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}}
            if native:
                out.update(stats=stats, model_info=model_info, runtime=runtime)
                log.stats = stats
            self._send(200, out, log)
            return

        log.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(obj: Any) -> int:
            raw = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()
            return time.perf_counter_ns()

        def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}

        self._wait_until(log.received_ns + int(script.ttft_s * 1e9))
        first = last = None
        for i in range(n):
            if last is not None:
                self._wait_until(last + int(script.gap(i - 1) * 1e9))
            delta = {"role": "assistant", "content": f"w{i} "} if i == 0 else {"content": f"w{i} "}
            last = event(chunk(delta))
            first = first or last
        event(chunk({}, finish))
        opts = body.get("stream_options")
        wants_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        final: dict[str, Any] = {**base, "choices": []}
        if script.usage == "always" or (script.usage == "requested" and wants_usage):
            final["usage"] = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if native and script.stats:
            now = time.perf_counter_ns()
            log.stats = self._stats(log.received_ns, first or now, last or now, n, finish)
            final.update(stats=log.stats, model_info=model_info, runtime=runtime)
        if len(final) > len(base) + 1:
            event(final)
        event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _stats(received_ns: int, first_ns: int, last_ns: int, n: int, finish: str) -> dict[str, Any]:
        gen = round((last_ns - first_ns) / 1e9, 3)  # LM Studio reports milliseconds
        return {"tokens_per_second": n / gen if gen > 0 else 0.0,
                "time_to_first_token": round((first_ns - received_ns) / 1e9, 3),
                "generation_time": gen,
                "stop_reason": "maxPredictedTokensReached" if finish == "length" else "eosFound"}

    @staticmethod
    def _wait_until(deadline_ns: int) -> None:
        delay = (deadline_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)


FakeLMStudio.handler = _Handler
