"""Loopback fakes of the native (non-OpenAI) endpoints of llama-server, llama-swap, vLLM and SGLang.

They answer metadata only; streaming chat is ``tests.fakeserver.FakeServer``'s job (it can add
llama.cpp ``timings`` with ``Script(timings=True)``). Tests compose the two: a dialect reads facts
from a ``NativeFake`` and its prepared requests are streamed to a ``FakeServer``.

Shapes follow the servers' own documentation and source:

* ``llamacpp``: ggml-org/llama.cpp ``tools/server/README.md``: ``GET /health`` ``{"status": "ok"}``;
  ``GET /props`` with ``default_generation_settings.n_ctx``, ``total_slots``, ``model_path``,
  ``chat_template``, ``build_info``; ``GET /v1/models`` (also ``/models``) with one entry whose
  ``meta`` holds ``n_vocab``, ``n_ctx_train``, ``n_embd``, ``n_params``, ``size``.
* ``llama-router``: same README, "Using multiple models": ``GET /models`` entries with ``path``
  and ``status {value, args}``; ``POST /models/load`` / ``POST /models/unload`` ``{"model": id}``
  answer ``{"success": true}``; GET ``/props?model=`` picks a model (without it this fake answers
  400, as the README documents for ``/metrics`` in router mode).
* ``llama-swap``: mostlygeek/llama-swap README and ``proxy/proxymanager.go``: ``GET /running`` ->
  ``{"running": [{"model", "state", ...}]}``, ``GET /unload`` (all, plain "OK"),
  ``/upstream/<model>/...`` (starts the model, then proxies), ``GET /health`` "OK";
  ``proxy/proxymanager_api.go``: ``POST /api/models/unload/<model>``, ``GET /api/version``.
* ``vllm``: vllm-project/vllm ``GET /version`` -> ``{"version"}``; ``GET /v1/models`` ``ModelCard``
  entries with ``root``, ``parent``, ``max_model_len``; ``GET /health`` (empty 200).
* ``sglang``: sgl-project/sglang ``srt/entrypoints/http_server.py``: ``GET /get_model_info``
  (``model_path``, ``tokenizer_path``, ``is_generation``...), ``GET /get_server_info`` (server
  args, scheduler info, ``version``), ``GET /v1/models`` (with ``max_model_len``), ``GET /health``.

Standard library only; 127.0.0.1 on an ephemeral port; a daemon thread; stops itself after
``max_lifetime_s`` so a forgotten fake cannot outlive a test run.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

HOST = "127.0.0.1"
KINDS = ("llamacpp", "llama-router", "llama-swap", "vllm", "sglang")
CHAT_TEMPLATE = "{%- for message in messages %}" + "{{- message['content'] }}" * 200 + "{%- endfor %}"


@dataclass
class GGUFModel:
    """The facts one llama-server tells about its model."""

    id: str = "Qwen3-0.6B-Q4_K_M.gguf"
    model_path: str = "/models/Qwen3-0.6B-Q4_K_M.gguf"
    n_ctx: int = 8192
    n_ctx_train: int = 40960
    n_params: int = 596_049_920
    size: int = 484_220_928
    n_vocab: int = 151_936
    n_embd: int = 1024
    total_slots: int = 1
    chat_template: str = CHAT_TEMPLATE

    def v1_entry(self) -> dict[str, Any]:
        return {"id": self.id, "object": "model", "created": 1735142223, "owned_by": "llamacpp",
                "meta": {"vocab_type": 2, "n_vocab": self.n_vocab, "n_ctx_train": self.n_ctx_train,
                         "n_embd": self.n_embd, "n_params": self.n_params, "size": self.size}}

    def props(self, build_info: str) -> dict[str, Any]:
        return {
            "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": self.n_ctx,
                                            "speculative": False, "is_processing": False,
                                            "params": {"n_predict": -1, "ignore_eos": False}},
            "total_slots": self.total_slots,
            "model_path": self.model_path,
            "chat_template": self.chat_template,
            "chat_template_caps": {},
            "modalities": {"vision": False},
            "build_info": build_info,
            "is_sleeping": False,
        }


@dataclass
class Hit:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class NativeFake:
    """One fake native server of ``kind`` (see ``KINDS``).

    ``models``: for llama-server kinds, GGUF facts per model (router and llama-swap serve several);
    ``loaded``: the models running at start (router, llama-swap). vLLM/SGLang serve ``served``.
    """

    kind: str
    #: router: how long a model stays "loading" after POST /models/load.
    load_delay_s: float = 0.0
    models: list[GGUFModel] = field(default_factory=lambda: [GGUFModel()])
    loaded: list[str] = field(default_factory=list)
    build_info: str = "b6500-1a2b3c4d"
    swap_version: str = "v170"
    served: str = "Qwen/Qwen3-0.6B"
    served_root: str = "/models/Qwen3-0.6B"
    max_model_len: int | None = 32768
    vllm_version: str = "0.11.0"
    sglang_version: str = "0.5.3"
    #: Extra GET routes answered with fixed JSON (e.g. a newer SGLang that also has /version).
    extra_routes: dict[str, Any] = field(default_factory=dict)
    max_lifetime_s: float = 60.0
    hits: list[Hit] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.running: list[str] = list(self.loaded)
        self.failing: set[str] = set()  # router: models whose load fails
        self._loading: dict[str, float] = {}  # router: model -> monotonic time it becomes loaded

    # -- life ------------------------------------------------------------------------------
    def start(self) -> NativeFake:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stall per answer
            wbufsize = -1  # headers and body leave in one write (flushed after each request)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                url = urlsplit(self.path)
                hit = Hit(method, unquote(url.path), parse_qs(url.query), body)
                with fake._lock:
                    fake.hits.append(hit)
                    status, payload = fake._route(hit)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                ctype = "text/plain" if isinstance(payload, bytes) else "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        server = ThreadingHTTPServer((HOST, 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True, name=f"fake-native-{self.kind}").start()
        cap = threading.Timer(self.max_lifetime_s, self.stop)
        cap.daemon = True
        cap.start()
        return self

    def stop(self) -> None:
        if self._server is None or self._stopped.is_set():
            return
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> NativeFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://{HOST}:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def paths(self, method: str | None = None) -> list[str]:
        return [h.path for h in self.hits if method is None or h.method == method]

    # -- routing ---------------------------------------------------------------------------
    def _model(self, model_id: str) -> GGUFModel | None:
        return next((m for m in self.models if m.id == model_id), None)

    def _route(self, hit: Hit) -> tuple[int, Any]:
        if hit.method == "GET" and hit.path in self.extra_routes:
            return 200, self.extra_routes[hit.path]
        handler = {
            "llamacpp": self._llamacpp,
            "llama-router": self._router,
            "llama-swap": self._swap,
            "vllm": self._vllm,
            "sglang": self._sglang,
        }[self.kind]
        answer = handler(hit)
        if answer is None:
            return 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
        return answer

    def _llamacpp(self, hit: Hit) -> tuple[int, Any] | None:
        model = self.models[0]
        if hit.method != "GET":
            return None
        if hit.path in ("/health", "/v1/health"):
            return 200, {"status": "ok"}
        if hit.path == "/props":
            return 200, model.props(self.build_info)
        if hit.path in ("/v1/models", "/models"):
            return 200, {"object": "list", "data": [model.v1_entry()]}
        return None

    def _router(self, hit: Hit) -> tuple[int, Any] | None:
        now = time.monotonic()
        for model_id, ready_at in list(self._loading.items()):
            if now >= ready_at:
                del self._loading[model_id]
                if model_id not in self.failing:
                    self.running.append(model_id)
        if hit.method == "GET" and hit.path == "/health":
            return 200, {"status": "ok"}
        if hit.method == "GET" and hit.path == "/models":
            return 200, {"data": [self._router_entry(m) for m in self.models]}
        if hit.method == "GET" and hit.path == "/v1/models":
            data = []
            for m in self.models:
                entry = {"id": m.id, "object": "model", "owned_by": "llamacpp"}
                if m.id in self.running:
                    entry["meta"] = m.v1_entry()["meta"]
                data.append(entry)
            return 200, {"object": "list", "data": data}
        if hit.method == "GET" and hit.path == "/props":
            model_id = (hit.query.get("model") or [None])[0]
            model = self._model(model_id) if model_id else None
            if model is None:
                return 400, {"error": {"code": 400, "message": "model name is missing from the request",
                                       "type": "invalid_request_error"}}
            return 200, model.props(self.build_info)
        if hit.method == "POST" and hit.path in ("/models/load", "/models/unload"):
            model_id = hit.body.get("model") if isinstance(hit.body, dict) else None
            if not self._model(str(model_id)):
                return 400, {"error": {"code": 400, "message": "model not found", "type": "invalid_request_error"}}
            if hit.path.endswith("/load") and model_id not in self.running:
                self._loading[model_id] = now + self.load_delay_s
            elif hit.path.endswith("/unload") and model_id in self.running:
                self.running.remove(model_id)
            return 200, {"success": True}
        return None

    def _router_entry(self, m: GGUFModel) -> dict[str, Any]:
        if m.id in self.running:
            status: dict[str, Any] = {"value": "loaded", "args": ["llama-server", "-ctx", str(m.n_ctx)]}
        elif m.id in self._loading:
            status = {"value": "loading", "args": ["llama-server", "-ctx", str(m.n_ctx)]}
        elif m.id in self.failing:
            status = {"value": "unloaded", "args": ["llama-server"], "failed": True, "exit_code": 1}
        else:
            status = {"value": "unloaded"}
        return {"id": m.id, "path": m.model_path, "status": status,
                "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]}}

    def _swap(self, hit: Hit) -> tuple[int, Any] | None:
        if hit.method == "GET" and hit.path == "/health":
            return 200, b"OK"
        if hit.method == "GET" and hit.path == "/running":
            return 200, {"running": [{"model": m, "state": "ready", "cmd": "llama-server --port ${PORT}",
                                      "proxy": "http://127.0.0.1:5800", "ttl": 0, "name": "",
                                      "description": ""} for m in self.running]}
        if hit.method == "GET" and hit.path == "/v1/models":
            return 200, {"object": "list", "data": [
                {"id": m.id, "object": "model", "created": 1735142223, "owned_by": "llama-swap"}
                for m in sorted(self.models, key=lambda m: m.id)]}
        if hit.method == "GET" and hit.path == "/unload":
            self.running.clear()
            return 200, b"OK"
        if hit.method == "GET" and hit.path == "/api/version":
            return 200, {"version": self.swap_version, "commit": "abcd1234", "build_date": "unknown"}
        if hit.method == "POST" and hit.path.startswith("/api/models/unload/"):
            model_id = hit.path[len("/api/models/unload/"):]
            if not self._model(model_id):
                return 404, b"Model not found"
            if model_id in self.running:
                self.running.remove(model_id)
            return 200, b"OK"
        if hit.path.startswith("/upstream/"):
            rest = hit.path[len("/upstream/"):]
            model = next((m for m in self.models if rest == m.id or rest.startswith(m.id + "/")), None)
            if model is None:
                return 400, b"model id required in path"
            if model.id not in self.running:  # swap: one model at a time, like a default config
                self.running[:] = [model.id]
            sub = rest[len(model.id):] or "/"
            if sub == "/health":
                return 200, {"status": "ok"}
            if sub == "/props":
                return 200, model.props(self.build_info)
            if sub in ("/v1/models", "/models"):
                return 200, {"object": "list", "data": [model.v1_entry()]}
            return None
        return None

    def _vllm(self, hit: Hit) -> tuple[int, Any] | None:
        if hit.method != "GET":
            return None
        if hit.path == "/health":
            return 200, b""
        if hit.path == "/version":
            return 200, {"version": self.vllm_version}
        if hit.path == "/v1/models":
            card: dict[str, Any] = {"id": self.served, "object": "model", "created": 1735142223,
                                    "owned_by": "vllm", "root": self.served_root, "parent": None,
                                    "permission": []}
            if self.max_model_len is not None:
                card["max_model_len"] = self.max_model_len
            return 200, {"object": "list", "data": [card]}
        return None

    def _sglang(self, hit: Hit) -> tuple[int, Any] | None:
        if hit.method != "GET":
            return None
        if hit.path == "/health":
            return 200, b""
        if hit.path == "/get_model_info":
            return 200, {"model_path": self.served_root, "tokenizer_path": self.served_root,
                         "is_generation": True, "preferred_sampling_params": None,
                         "weight_version": "default"}
        if hit.path in ("/get_server_info", "/server_info"):
            return 200, {"model_path": self.served_root, "served_model_name": self.served,
                         "context_length": None, "quantization": "fp8", "dtype": "auto",
                         "kv_cache_dtype": "auto", "tp_size": 1, "dp_size": 1,
                         "chunked_prefill_size": 8192, "max_total_num_tokens": 500_000,
                         "max_req_input_len": 32762, "internal_states": [{"avg_spec_accept_length": None}],
                         "version": self.sglang_version}
        if hit.path == "/v1/models":
            card: dict[str, Any] = {"id": self.served, "object": "model", "created": 1735142223,
                                    "owned_by": "sglang", "root": self.served, "parent": None}
            if self.max_model_len is not None:
                card["max_model_len"] = self.max_model_len
            return 200, {"object": "list", "data": [card]}
        return None

