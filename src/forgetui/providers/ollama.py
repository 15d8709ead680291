"""Ollama: discovery, native ``/api/chat`` streaming with the server's own durations, lifecycle.

What this adapter relies on, and where it is documented:

* ``GET /api/version`` answers ``{"version": "0.12.6"}`` (docs.ollama.com/api-reference/get-version;
  the OpenAPI schema ``VersionResponse`` has one string property ``version``). It is the probe:
  a server is Ollama when that endpoint answers JSON with a ``version`` string. Ports are never
  used to guess.
* ``GET /api/tags`` lists local models: ``name`` (``model:tag``, the id the OpenAI-compatible
  ``/v1`` endpoint also uses), ``size`` (bytes), ``digest``, ``modified_at`` and ``details``
  (``format``, ``family``, ``families``, ``parameter_size`` such as "8.0B",
  ``quantization_level`` such as "Q4_0") (ollama/ollama docs/api.md, "List Local Models").
* ``GET /api/ps`` lists the models in memory with the same fields plus ``expires_at`` and
  ``size_vram`` (docs/api.md, "List Running Models"); newer servers add ``context_length``, the
  context the loaded model actually runs with (docs.ollama.com/api/ps, OpenAPI ``PsResponse``).
* ``POST /api/show {"model": name}`` returns ``modelfile`` (with a ``FROM /path/to/blob`` line),
  ``parameters`` (one ``name value`` pair a line, e.g. ``num_ctx 4096``), ``details`` and
  ``model_info`` with GGUF keys such as ``general.architecture``, ``general.parameter_count`` and
  ``<arch>.context_length`` (docs/api.md, "Show Model Information").
* ``POST /api/chat`` streams one JSON object a line (``application/x-ndjson``): ``message``
  (``role``, ``content``, and on thinking models ``thinking``; ``tool_calls`` as
  ``[{"function": {"name", "arguments": {object}}}]``), ``done``; the last line has
  ``done: true``, ``done_reason`` and ``total_duration``, ``load_duration``,
  ``prompt_eval_count``, ``prompt_eval_duration``, ``eval_count``, ``eval_duration``. "All
  durations are returned in nanoseconds." Request ``options`` are the Modelfile parameters
  (``num_predict``, ``temperature``, ``seed``, ``num_ctx`` ...), ``keep_alive`` says how long the
  model stays loaded (default ``5m``) (docs/api.md, "Generate a chat completion", "Conventions";
  thinking: ollama.com/blog/thinking and docs.ollama.com/capabilities/thinking).
* An error after the stream started arrives as a line ``{"error": "..."}`` with the HTTP status
  unchanged (docs.ollama.com/api/errors, "Errors that occur while streaming"); the shared
  accumulator turns it into ``server_error``.
* ``POST /api/generate {"model": m}`` with no prompt loads a model; with ``"keep_alive": 0`` it
  unloads it (docs/api.md, "Load a model" / "Unload a model"; the answer is one JSON object with
  ``done: true`` and ``done_reason`` "load"/"unload").

Ollama has no ``ignore_eos``: a speed request asks for ``num_predict = max_tokens`` and the model may
still stop early (``done_reason`` "stop" instead of "length"); nothing is invented to hide that.
There is no per-request prompt-cache switch either; the speed benchmark's nonce prefix defeats the
prefix cache. When the server reuses a cached prompt it may report ``prompt_eval_count`` as 0 or
omit it; then no server prefill is claimed.

Never imports textual or rich.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import replace
from typing import Any, ClassVar

import httpx

from ..engine.client import ChatRequest, StreamResult
from .base import Dialect, ModelInfo, ServerInfo, root_url

__all__ = ["OLLAMA_CHAT_FIELDS", "OLLAMA_OPTIONS", "OllamaDialect", "blob_path", "context_warning",
           "native_messages", "parse_parameters"]

#: Request ``options`` Ollama understands (Modelfile parameters, docs/api.md "Generate request (With
#: options)", older names ``tfs_z``/``f16_kv`` included). ``extra_body`` keys named here go into
#: ``options``.
OLLAMA_OPTIONS = frozenset({
    "num_keep", "seed", "num_predict", "top_k", "top_p", "min_p", "tfs_z", "typical_p",
    "repeat_last_n", "temperature", "repeat_penalty", "presence_penalty", "frequency_penalty",
    "mirostat", "mirostat_tau", "mirostat_eta", "penalize_newline", "stop", "numa", "num_ctx",
    "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "vocab_only", "use_mmap",
    "use_mlock", "num_thread",
})
#: Top-level ``/api/chat`` fields an ``extra_body`` may set (besides ``options``, merged).
OLLAMA_CHAT_FIELDS = frozenset({"keep_alive", "think", "format", "tools"})
#: Body fields the adapter owns; an ``extra_body`` cannot replace them.
_OWNED = frozenset({"model", "messages", "stream"})
#: The smallest default context Ollama has shipped (later versions default to 4096 or more);
#: used only to word a warning when the configured context is unknown.
OLLAMA_MIN_DEFAULT_CTX = 2048

_FROM_RE = re.compile(r"^FROM\s+(.+?)\s*$", re.MULTILINE)


class OllamaDialect(Dialect):
    """Ollama's native API next to its OpenAI-compatible ``/v1``."""

    kind: ClassVar[str] = "ollama"
    controls_lifecycle: ClassVar[bool] = True

    def context_warning(self, model: ModelInfo, needed_tokens: int) -> str | None:
        """Ollama cuts prompts silently: see the module-level ``context_warning``."""
        return context_warning(model, needed_tokens)

    #: ``keep_alive`` sent with an explicit load, so a benchmark's model stays in memory.
    LOAD_KEEP_ALIVE: ClassVar[str] = "30m"
    #: At most this many ``/api/show`` calls per listing (one per model), this many at a time.
    MAX_SHOW: ClassVar[int] = 256
    SHOW_CONCURRENCY: ClassVar[int] = 4
    #: Loading a big model can take minutes with no byte on the wire.
    LOAD_TIMEOUT_S: ClassVar[float] = 600.0
    #: After an unload, poll ``/api/ps`` this long for the model to be gone (best effort).
    UNLOAD_WAIT_S: ClassVar[float] = 10.0

    def __init__(self, provider: Any, http: httpx.AsyncClient) -> None:
        super().__init__(provider, http)
        #: ``extra_body`` keys that are neither Ollama options nor chat fields: not sent (Ollama's
        #: native API would ignore them silently); kept here so a caller can tell the user.
        self.ignored_extra_keys: set[str] = set()
        #: The last explicit load: {"model", "wall_s", "server_s"}.
        self.last_load: dict[str, Any] | None = None

    # -- discovery -------------------------------------------------------------------------
    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        """True when ``<root>/api/version`` answers JSON with a ``version`` string."""
        try:
            resp = await http.get(root_url(base_url) + "/api/version")
            if resp.status_code != 200:
                return False
            data = resp.json()
        except (httpx.HTTPError, ValueError):
            return False
        return isinstance(data, dict) and isinstance(data.get("version"), str)

    async def version(self) -> str | None:
        data = await self.get_json(self.root + "/api/version")
        value = data.get("version") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    async def server_info(self) -> ServerInfo:
        """Version, then models; a server that is down gives ``reachable=False``, never raises."""
        try:
            version = await self.version()
            models = await self.list_models()
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            return ServerInfo(kind=self.kind, reachable=False, error=f"{type(exc).__name__}: {exc}")
        loaded = [m.id for m in models if m.state == "loaded"]
        return ServerInfo(kind=self.kind, reachable=True, version=version, models=models,
                          details={"root": self.root, "api": "ollama-native", "loaded": loaded})

    async def _ps(self) -> list[dict[str, Any]]:
        data = await self.get_json(self.root + "/api/ps")
        models = data.get("models") if isinstance(data, dict) else None
        return [m for m in models or [] if isinstance(m, dict) and _name(m)]

    async def list_models(self) -> list[ModelInfo]:
        """``/api/tags`` merged with ``/api/ps`` and one ``/api/show`` per model (bounded)."""
        tags = await self.get_json(self.root + "/api/tags")
        entries = [m for m in (tags.get("models") or []) if isinstance(m, dict) and _name(m)]
        running = {_name(m): m for m in await self._ps()}
        by_name: dict[str, dict[str, Any]] = {}
        for entry in entries:
            by_name.setdefault(_name(entry), entry)
        for name, entry in running.items():  # loaded but not listed (e.g. cloud models)
            by_name.setdefault(name, entry)
        names = list(by_name)
        shows: dict[str, dict[str, Any] | str] = {}
        sem = asyncio.Semaphore(self.SHOW_CONCURRENCY)

        async def show(name: str) -> None:
            async with sem:
                try:
                    data = await self.post_json(self.root + "/api/show", {"model": name})
                    shows[name] = data if isinstance(data, dict) else "not a JSON object"
                except httpx.HTTPStatusError as exc:
                    shows[name] = f"HTTP {exc.response.status_code}"
                except (httpx.HTTPError, ValueError) as exc:
                    shows[name] = f"{type(exc).__name__}: {exc}"[:200]

        await asyncio.gather(*(show(n) for n in names[: self.MAX_SHOW]))
        return [_model_info(n, by_name[n], running.get(n), shows.get(n)) for n in names]

    # -- requests --------------------------------------------------------------------------
    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """The same request for ``<root>/api/chat`` (NDJSON), so the server's durations come back.

        Body: ``model``, ``messages`` (OpenAI shapes converted where Ollama differs), ``stream``
        true, ``options`` = {``num_predict``: max_tokens, ``temperature``, and ``seed`` 0 when
        ``purpose`` is "speed"}. ``extra_body`` rule: a key in :data:`OLLAMA_OPTIONS` goes into
        ``options``; a dict under ``options`` is merged into ``options``; a key in
        :data:`OLLAMA_CHAT_FIELDS` (``keep_alive``, ``think``, ``format``, ``tools``) is sent at
        the top level; anything else is not sent and is listed in ``ignored_extra_keys``.
        ``extra_body`` values win over the defaults, except ``num_predict``, which is always
        ``max_tokens`` (the measured length), and ``model``/``messages``/``stream``.
        ``keep_alive`` is sent only when configured. Ollama has no ``ignore_eos``; none is sent.
        """
        options: dict[str, Any] = {"temperature": request.temperature}
        if purpose == "speed":
            options["seed"] = 0
        top: dict[str, Any] = {}
        for key, value in request.extra_body.items():
            if key == "options" and isinstance(value, dict):
                options.update(value)
            elif key in OLLAMA_OPTIONS:
                options[key] = value
            elif key in OLLAMA_CHAT_FIELDS:
                top[key] = value
            elif key not in _OWNED:
                self.ignored_extra_keys.add(key)
        options["num_predict"] = request.max_tokens
        body: dict[str, Any] = {
            "model": request.model,
            "messages": native_messages(request.messages),
            "stream": True,
            "options": options,
            **top,
        }
        return replace(request, base_url=root_url(request.base_url), path="/api/chat",
                       wire="ndjson", native_body=body)

    thinking_switch: ClassVar[str | None] = "think=false"

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """``"think": false`` at the top of the native ``/api/chat`` body (``prepare`` sends
        ``extra_body["think"]`` there): Ollama's documented switch for thinking models."""
        return replace(request, extra_body={**request.extra_body, "think": False})

    async def finalize(self, request: ChatRequest, result: StreamResult) -> None:
        """Ollama's final-line counts and durations (ns) -> llama.cpp-style ``timings`` (ms).

        ``prompt_n``/``prompt_ms`` only when ``prompt_eval_count`` is a positive count (a
        cached prompt may report 0 or nothing: then no server prefill is claimed).
        """
        stats = result.acc.native.get("ollama")
        if not isinstance(stats, dict):
            return
        timings: dict[str, Any] = {}

        def ms(key: str) -> float | None:
            value = stats.get(key)
            return value / 1e6 if _number(value) and value >= 0 else None

        prompt_n = stats.get("prompt_eval_count")
        if isinstance(prompt_n, int) and not isinstance(prompt_n, bool) and prompt_n > 0:
            timings["prompt_n"] = prompt_n
            if (prompt_ms := ms("prompt_eval_duration")) is not None:
                timings["prompt_ms"] = prompt_ms
        eval_n = stats.get("eval_count")
        if isinstance(eval_n, int) and not isinstance(eval_n, bool):
            timings["predicted_n"] = eval_n
            if (predicted_ms := ms("eval_duration")) is not None:
                timings["predicted_ms"] = predicted_ms
        if (load_ms := ms("load_duration")) is not None:
            timings["load_ms"] = load_ms
        if timings:
            timings["source"] = "ollama"
            result.acc.timings = timings

    # -- lifecycle -------------------------------------------------------------------------
    async def loaded_models(self) -> list[str] | None:
        """Names from ``/api/ps``; None when the server cannot be asked."""
        try:
            return [_name(m) for m in await self._ps()]
        except (httpx.HTTPError, ValueError, TypeError):
            return None

    async def load(self, model_id: str) -> float:
        """``POST /api/generate {"model", "keep_alive": "30m"}`` (no prompt: load only).

        Returns seconds: the server's ``load_duration`` when the answer has a positive one (the
        model load alone, without HTTP and queueing), else the wall time of the call measured
        with ``time.perf_counter``. Both are kept in ``last_load``. Raises
        ``httpx.HTTPStatusError`` when the server refuses (e.g. 404 for an unknown model).
        """
        t0 = time.perf_counter()
        resp = await self.http.post(
            self.root + "/api/generate",
            json={"model": model_id, "keep_alive": self.LOAD_KEEP_ALIVE},
            headers=self.headers(),
            timeout=httpx.Timeout(self.LOAD_TIMEOUT_S, connect=10.0),
        )
        wall = time.perf_counter() - t0
        resp.raise_for_status()
        answer = _last_json_line(resp.text)
        if isinstance(answer, dict) and answer.get("error"):
            raise httpx.HTTPStatusError(f"load failed: {answer['error']}", request=resp.request,
                                        response=resp)
        load_ns = answer.get("load_duration") if isinstance(answer, dict) else None
        server = load_ns / 1e9 if _number(load_ns) and load_ns > 0 else None
        self.last_load = {"model": model_id, "wall_s": wall, "server_s": server}
        return server if server is not None else wall

    async def unload(self, model_id: str) -> bool:
        """``POST /api/generate {"model", "keep_alive": 0}``; then waits (bounded) until
        ``/api/ps`` no longer lists it. True once the server accepted the unload."""
        resp = await self.http.post(self.root + "/api/generate",
                                    json={"model": model_id, "keep_alive": 0},
                                    headers=self.headers())
        resp.raise_for_status()
        deadline = time.monotonic() + self.UNLOAD_WAIT_S
        while time.monotonic() < deadline:
            loaded = await self.loaded_models()
            if loaded is None or model_id not in loaded:
                break
            await asyncio.sleep(0.1)
        return True


def context_warning(model: ModelInfo, needed_tokens: int) -> str | None:
    """A sentence for the user when ``model`` will run with less context than ``needed_tokens``.

    Ollama truncates a prompt that does not fit its context silently, so a too-small ``num_ctx``
    makes answers (and prefill numbers) quietly wrong. The context used is, in order: the loaded
    model's context (``/api/ps``), the ``num_ctx`` configured in its parameters. When neither is
    known, the server's default applies (set by ``OLLAMA_CONTEXT_LENGTH``; 2048 on older versions):
    a warning is given when ``needed_tokens`` is above the smallest such default. A model whose
    trained context is below ``needed_tokens`` always gets a warning. Otherwise None.
    """
    d = model.details or {}
    trained = d.get("context_trained")
    configured = d.get("context_loaded") or d.get("num_ctx")
    if _number(configured) and configured < needed_tokens:
        where = "is loaded with" if d.get("context_loaded") else "is configured with"
        return (f"{model.id} {where} a {int(configured)}-token context but {needed_tokens} tokens "
                f"are needed: Ollama silently cuts the prompt. Set num_ctx to at least "
                f"{needed_tokens} (e.g. extra_body = {{ num_ctx = {needed_tokens} }}).")
    if _number(trained) and trained < needed_tokens:
        return (f"{model.id} was trained for {int(trained)} tokens of context but {needed_tokens} "
                f"are needed: the prompt will not fit.")
    if not _number(configured) and needed_tokens > OLLAMA_MIN_DEFAULT_CTX:
        return (f"{model.id} has no num_ctx configured, so Ollama uses its default context "
                f"(OLLAMA_CONTEXT_LENGTH; {OLLAMA_MIN_DEFAULT_CTX} on older versions), which may be "
                f"smaller than the {needed_tokens} tokens needed and is cut silently. Set num_ctx "
                f"to at least {needed_tokens}.")
    return None


# -- helpers -------------------------------------------------------------------------------
def _name(entry: dict[str, Any]) -> str:
    value = entry.get("name") or entry.get("model")
    return str(value) if value else ""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def parse_parameters(text: Any) -> dict[str, Any]:
    """``/api/show`` ``parameters`` text (``name   value`` lines) -> dict; repeated names (``stop``)
    become lists; numbers become numbers; quoted strings lose their quotes."""
    out: dict[str, Any] = {}
    if not isinstance(text, str):
        return out
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) != 2:
            continue
        key, raw = parts
        value: Any = raw.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = value[1:-1]
        else:
            for conv in (int, float):
                try:
                    value = conv(value)
                    break
                except ValueError:
                    continue
        if key in out:
            prev = out[key]
            out[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            out[key] = value
    return out


def blob_path(modelfile: Any) -> str | None:
    """The ``FROM`` path of a ``/api/show`` modelfile when it is absolute and a file exists there
    on this machine (a remote server's path, or a ``FROM model:tag`` line, gives None)."""
    if not isinstance(modelfile, str):
        return None
    for match in _FROM_RE.finditer(modelfile):
        path = match.group(1).strip().strip('"')
        if os.path.isabs(path) and os.path.isfile(path):
            return path
    return None


def _model_info(name: str, tag: dict[str, Any], ps: dict[str, Any] | None,
                show: dict[str, Any] | str | None) -> ModelInfo:
    details_in = tag.get("details") if isinstance(tag.get("details"), dict) else {}
    show_d = show if isinstance(show, dict) else {}
    if not details_in and isinstance(show_d.get("details"), dict):
        details_in = show_d["details"]
    minfo = show_d.get("model_info") if isinstance(show_d.get("model_info"), dict) else {}
    params = parse_parameters(show_d.get("parameters"))
    arch = minfo.get("general.architecture") or details_in.get("family") or None
    trained = _int(minfo.get(f"{arch}.context_length")) if arch else None
    if trained is None:
        trained = next((_int(v) for k, v in minfo.items() if k.endswith(".context_length")
                        and _int(v) is not None), None)
    num_ctx = _int(params.get("num_ctx"))
    loaded_ctx = _int(ps.get("context_length")) if ps else None
    if loaded_ctx:
        context, source = loaded_ctx, "loaded"
    elif num_ctx:
        context, source = num_ctx, "num_ctx"
    elif trained:
        context, source = trained, "trained"
    else:
        context, source = None, None
    details: dict[str, Any] = {
        "family": details_in.get("family"),
        "families": details_in.get("families"),
        "format": details_in.get("format"),
        "parent_model": details_in.get("parent_model") or None,
        "digest": tag.get("digest"),
        "modified_at": tag.get("modified_at"),
        "num_ctx": num_ctx,
        "context_trained": trained,
        "context_loaded": loaded_ctx,
        "context_source": source,
    }
    if params:
        details["parameters"] = params
    if show_d.get("capabilities"):
        details["capabilities"] = show_d["capabilities"]
    if ps:
        details["size_vram"] = ps.get("size_vram")
        details["expires_at"] = ps.get("expires_at")
        details["size_loaded"] = ps.get("size")
    if isinstance(show, str):
        details["show_error"] = show
    elif show is None:
        details["show_error"] = "not asked (listing capped)"
    size = _int(tag.get("size"))
    return ModelInfo(
        id=name,
        state="loaded" if ps else "not-loaded",
        context_length=context,
        quantization=details_in.get("quantization_level") or None,
        parameters=_int(minfo.get("general.parameter_count")),
        parameters_label=details_in.get("parameter_size") or None,
        size_bytes=size if ps is not tag else None,  # a /api/ps size is memory, not the file
        architecture=str(arch) if arch else None,
        path=blob_path(show_d.get("modelfile")),
        details=details,
    )


def native_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages -> Ollama's: content parts become text plus ``images`` (base64 from
    ``data:`` URLs only), assistant ``tool_calls`` carry ``arguments`` as an object, a tool
    message's ``name`` becomes ``tool_name``. Anything else is passed through unchanged."""
    out: list[dict[str, Any]] = []
    for message in messages:
        msg = dict(message)
        content = msg.get("content")
        if isinstance(content, list):
            texts, images = [], list(msg.get("images") or [])
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    url = (part.get("image_url") or {}).get("url", "")
                    if isinstance(url, str) and url.startswith("data:") and "," in url:
                        images.append(url.split(",", 1)[1])
            msg["content"] = "".join(texts)
            if images:
                msg["images"] = images
        elif content is None:
            msg["content"] = ""
        if isinstance(msg.get("tool_calls"), list):
            calls = []
            for call in msg["tool_calls"]:
                fn = dict(call.get("function") or {}) if isinstance(call, dict) else {}
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        fn["arguments"] = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError:
                        pass  # left as sent; the server decides
                calls.append({"function": {"name": fn.get("name"), "arguments": fn.get("arguments", {})}})
            msg["tool_calls"] = calls
        if msg.get("role") == "tool" and msg.get("name") and "tool_name" not in msg:
            msg["tool_name"] = msg["name"]
        out.append(msg)
    return out


def _last_json_line(text: str) -> Any:
    """One JSON answer, or the last line of an NDJSON one."""
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None
