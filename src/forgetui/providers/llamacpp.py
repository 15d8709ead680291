"""llama.cpp's ``llama-server``, alone, in router mode, or behind llama-swap.

What the server documents (ggml-org/llama.cpp ``tools/server/README.md``) and what this adapter
uses of it:

* ``GET /props``: ``default_generation_settings`` (``n_ctx``: the context the server runs with),
  ``total_slots``, ``model_path``, ``chat_template``, ``build_info`` ("b<build>-<commit>"). A JSON
  object with ``default_generation_settings`` or ``build_info`` is how a llama-server is recognised.
* ``GET /v1/models``: one entry whose ``meta`` holds ``n_vocab``, ``n_ctx_train``, ``n_embd``,
  ``n_params`` and ``size`` (bytes of the GGUF); ``meta`` can be ``null`` while the model loads.
* Request fields accepted on ``/v1/chat/completions`` (the ``/completion`` options are "also
  supported" there): ``cache_prompt`` (default true: reuse the KV cache of a previous request for
  the common prefix) and ``ignore_eos`` ("Ignore end of stream token and continue generating").
* The last stream chunk carries ``timings`` (``cache_n``, ``prompt_n``, ``prompt_ms``,
  ``predicted_n``, ``predicted_ms``...). The stream accumulator keeps it as ``acc.timings`` and the
  metrics read it directly (``token_counts``, ``server_prefill``), so ``finalize`` has nothing to
  convert. ``cache_n > 0`` is kept as is: it becomes ``cached_tokens`` and the summary flags the
  prompt-cache hit.
* Router mode (``llama-server`` started without a model; README "Using multiple models"):
  ``GET /models`` lists every model with ``status.value`` (``loaded``, ``loading``, ``unloaded``,
  ``sleeping``...), ``POST /models/load`` and ``POST /models/unload`` take ``{"model": id}``; GET
  endpoints such as ``/props`` pick the model with ``?model=`` (and ``autoload=false`` keeps a
  query from loading it).

llama-swap (mostlygeek/llama-swap) is a proxy that starts and stops llama-servers on demand. Its
README lists ``/running`` ("list currently running models", answered as ``{"running": [{"model",
"state", ...}]}`` in ``proxy/proxymanager.go``), ``/unload`` (GET, every model) and
``/upstream/:model_id`` (direct access to one upstream server, started if needed);
``docs/kb/guides/model-runtime/ttl-and-unloading.md`` documents ``POST /api/models/unload/<model>``
for one model. It does not route ``/props``, so it is recognised by ``/running``.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx

from ..engine.client import ChatRequest, StreamResult
from .base import Dialect, ModelInfo, ServerInfo, root_url, template_thinking_off, try_get_json

#: Chat templates can be tens of kilobytes; the start is enough to tell which one it is.
CHAT_TEMPLATE_CHARS = 2000

_QUANT = re.compile(
    r"(?:^|[-_.:/ ])("
    r"I?Q[1-8](?:_[0-9A-Z]+)*"  # Q4_K_M, Q4_1, IQ2_XXS, Q8_0, Q6_K
    r"|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|FP16|F32|FP32"
    r")(?=$|[-_.:/ ])",
    re.IGNORECASE,
)

_ERRORS = (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError)


class ModelLoadError(httpx.HTTPError):
    """The server was asked to load a model and said it could not.

    An ``httpx.HTTPError`` so that callers guarding lifecycle calls against network failures
    (``engine.servers``) record it instead of stopping the run."""


def quantization_from_name(name: str | None) -> str | None:
    """The quantization a GGUF file or model id names (``...-Q4_K_M.gguf``, ``repo:Q8_0``)."""
    if not name:
        return None
    base = name[:-5] if name.lower().endswith(".gguf") else name
    found = _QUANT.findall(base)
    return found[-1].upper() if found else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _local_path(path: Any) -> str | None:
    """``path`` when it names a file on this machine (the server may be elsewhere)."""
    return path if isinstance(path, str) and path and os.path.isfile(path) else None


def _props_facts(props: dict[str, Any]) -> dict[str, Any]:
    """The facts worth keeping from ``GET /props``."""
    out: dict[str, Any] = {}
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict) and _int(settings.get("n_ctx")) is not None:
        out["n_ctx"] = settings["n_ctx"]
    for key in ("total_slots", "model_path", "build_info", "modalities", "is_sleeping"):
        if props.get(key) is not None:
            out[key] = props[key]
    template = props.get("chat_template")
    if isinstance(template, str) and template:
        out["chat_template"] = template[:CHAT_TEMPLATE_CHARS]
        out["chat_template_chars"] = len(template)
        if len(template) > CHAT_TEMPLATE_CHARS:
            out["chat_template_truncated"] = True
    return out


def _model_info(entry: dict[str, Any], props: dict[str, Any] | None, state: str | None) -> ModelInfo:
    """One ``/v1/models`` entry (with its ``meta``) plus the server's ``/props``."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    facts = _props_facts(props or {})
    details: dict[str, Any] = {k: v for k, v in facts.items() if k != "n_ctx"}
    for key in ("n_ctx_train", "n_vocab", "n_embd", "vocab_type"):
        if meta.get(key) is not None:
            details[key] = meta[key]
    if entry.get("owned_by"):
        details["owned_by"] = entry["owned_by"]
    model_id = str(entry["id"])
    model_path = facts.get("model_path")
    return ModelInfo(
        id=model_id,
        state=state,
        context_length=facts.get("n_ctx"),
        quantization=quantization_from_name(os.path.basename(str(model_path)) if model_path else None)
        or quantization_from_name(model_id),
        parameters=_int(meta.get("n_params")),
        size_bytes=_int(meta.get("size")),
        path=_local_path(model_path),
        details=details,
    )


class LlamaCppDialect(Dialect):
    """llama-server: native timings, prompt cache off and EOS ignored for speed requests, and model
    load/unload where a router or llama-swap manages the servers.

    ``mode`` is "single" (one llama-server, one model: no lifecycle), "router" (llama-server router
    mode) or "swap" (llama-swap in front); it is found on first use. ``controls_lifecycle`` is set
    on the instance once the mode is known.
    """

    kind = "llamacpp"
    controls_lifecycle = False
    #: Upper bound for one model load (router polling, llama-swap's blocking start).
    load_timeout_s: float = 600.0
    load_poll_s: float = 0.25

    def __init__(self, provider: Any, http: httpx.AsyncClient) -> None:
        super().__init__(provider, http)
        self.mode: str | None = None

    # -- discovery -------------------------------------------------------------------------
    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        root = root_url(base_url)
        props = await try_get_json(http, root + "/props")
        if isinstance(props, dict) and (
            isinstance(props.get("default_generation_settings"), dict) or props.get("build_info")
        ):
            return True
        return await _swap_running(http, root) is not None or await _router_models(http, root) is not None

    async def detect_mode(self) -> str:
        """Which of single / router / swap this server is; remembered after the first answer."""
        if self.mode is None:
            headers = self.headers()
            try:
                await self.http.get(self.root + "/health", headers=headers)
            except httpx.TransportError:
                return "single"  # nothing answers (yet): decide when the server is up
            if await _swap_running(self.http, self.root, headers) is not None:
                self.mode = "swap"
            elif await _router_models(self.http, self.root, headers) is not None:
                self.mode = "router"
            else:
                self.mode = "single"
            self.controls_lifecycle = self.mode != "single"  # type: ignore[misc]
        return self.mode

    async def version(self) -> str | None:
        mode = await self.detect_mode()
        if mode == "swap":
            data = await self._optional(self.root + "/api/version")
            version = data.get("version") if isinstance(data, dict) else None
            return f"llama-swap {version}" if version else "llama-swap"
        props = await self._optional(self.root + "/props")
        if mode == "router" and not (isinstance(props, dict) and props.get("build_info")):
            # The router may want ?model=; a loaded model's server is the same build.
            loaded = await self.loaded_models() or []
            if loaded:
                props = await self._optional(
                    self.root + "/props", params={"model": loaded[0], "autoload": "false"}
                )
        build = props.get("build_info") if isinstance(props, dict) else None
        return str(build) if build else None

    async def list_models(self) -> list[ModelInfo]:
        mode = await self.detect_mode()
        if mode == "swap":
            return await self._swap_models()
        if mode == "router":
            return await self._router_list()
        data = await self.get_json(self.base_url + "/models")
        props = await self._optional(self.root + "/props")
        return [
            _model_info(m, props if isinstance(props, dict) else None, "loaded")
            for m in _entries(data)
        ]

    async def server_info(self) -> ServerInfo:
        info = await super().server_info()
        if not info.reachable:
            return info
        info.details["mode"] = self.mode
        if self.mode == "single":
            props = await self._optional(self.root + "/props")
            if isinstance(props, dict):
                facts = _props_facts(props)
                info.details.update({k: facts[k] for k in ("build_info", "total_slots") if k in facts})
        return info

    # -- requests --------------------------------------------------------------------------
    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """Speed: ``cache_prompt: false`` so no earlier request's KV cache serves the prompt, and
        ``ignore_eos: true`` so ``max_tokens`` (``n_predict``), not the model's end-of-sequence,
        ends the answer (both documented request options, README ``POST /completion``). Values the
        provider's ``extra_body`` sets explicitly win. Cases are sent as they are."""
        if purpose != "speed":
            return request
        extra = {"cache_prompt": False, "ignore_eos": True, **request.extra_body}
        return replace(request, extra_body=extra)

    async def finalize(self, request: ChatRequest, result: StreamResult) -> None:
        """Nothing to convert: ``timings`` (with ``cache_n``) is already on ``result.acc``."""

    thinking_switch = "chat_template_kwargs.enable_thinking=false"

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """``chat_template_kwargs: {"enable_thinking": false}``: llama-server passes a request's
        ``chat_template_kwargs`` to the model's Jinja chat template (``--jinja``)."""
        return template_thinking_off(request)

    # -- lifecycle -------------------------------------------------------------------------
    async def loaded_models(self) -> list[str] | None:
        mode = await self.detect_mode()
        if mode == "swap":
            running = await _swap_running(self.http, self.root, self.headers())
            return None if running is None else [r["model"] for r in running]
        if mode == "router":
            entries = await _router_models(self.http, self.root, self.headers())
            return None if entries is None else [str(e["id"]) for e in entries if _status(e) == "loaded"]
        return None

    async def load(self, model_id: str) -> float | None:
        mode = await self.detect_mode()
        if mode == "swap":
            return await self._swap_load(model_id)
        if mode == "router":
            return await self._router_load(model_id)
        return None

    async def unload(self, model_id: str) -> bool:
        mode = await self.detect_mode()
        if mode == "swap":
            return await self._swap_unload(model_id)
        if mode == "router":
            try:
                data = await self.post_json(self.root + "/models/unload", {"model": model_id})
            except _ERRORS:
                return False
            return not isinstance(data, dict) or data.get("success", True) is not False
        return False

    # -- llama-swap ------------------------------------------------------------------------
    def _upstream(self, model_id: str, path: str) -> str:
        return f"{self.root}/upstream/{quote(model_id, safe='/:')}{path}"

    async def _swap_models(self) -> list[ModelInfo]:
        data = await self.get_json(self.base_url + "/models")
        running = {r["model"] for r in await _swap_running(self.http, self.root, self.headers()) or []}
        out: list[ModelInfo] = []
        for entry in _entries(data):
            model_id = str(entry["id"])
            if model_id not in running:
                info = _model_info(entry, None, "not-loaded")
            else:
                # Only running models are asked: /upstream/<id>/... would start a stopped one.
                upstream = await self._optional(self._upstream(model_id, "/v1/models"))
                inner = _entries(upstream)
                props = await self._optional(self._upstream(model_id, "/props"))
                merged = {**(inner[0] if inner else {}), "id": model_id}
                info = _model_info(merged, props if isinstance(props, dict) else None, "loaded")
            for key in ("name", "description"):
                if entry.get(key):
                    info.details[key] = entry[key]
            out.append(info)
        return out

    async def _swap_load(self, model_id: str) -> float:
        """llama-swap starts a model's server on the first request routed to it and answers once
        the server is ready; ``/upstream/<id>/health`` is the cheapest such request."""
        start = time.perf_counter()
        try:
            resp = await self.http.get(
                self._upstream(model_id, "/health"),
                headers=self.headers(),
                timeout=httpx.Timeout(self.load_timeout_s, connect=10.0),
            )
        except httpx.HTTPError as exc:
            raise ModelLoadError(f"llama-swap could not start {model_id}: {exc}") from exc
        if resp.status_code >= 400:
            raise ModelLoadError(
                f"llama-swap could not start {model_id}: HTTP {resp.status_code} {resp.text[:200]}"
            )
        return time.perf_counter() - start

    async def _swap_unload(self, model_id: str) -> bool:
        try:
            resp = await self.http.post(
                f"{self.root}/api/models/unload/{quote(model_id, safe='/:')}", headers=self.headers()
            )
        except httpx.HTTPError:
            return False
        if resp.status_code < 400:
            return True
        if resp.status_code not in (404, 405):
            return False
        # An unknown model, or an older llama-swap with only GET /unload (every model): use that
        # only when it unloads nothing but the model asked for.
        running = await _swap_running(self.http, self.root, self.headers())
        if running is None:
            return False
        names = {r["model"] for r in running}
        if model_id not in names:
            known = {str(m["id"]) for m in _entries(await self._optional(self.base_url + "/models"))}
            return model_id in known  # known and not running: already unloaded
        if names != {model_id}:
            return False
        try:
            resp = await self.http.get(self.root + "/unload", headers=self.headers())
        except httpx.HTTPError:
            return False
        return resp.status_code < 400

    # -- router mode -----------------------------------------------------------------------
    async def _router_list(self) -> list[ModelInfo]:
        entries = await _router_models(self.http, self.root, self.headers())
        if entries is None:
            raise ValueError("router /models did not answer with a model list")
        listed = {str(m["id"]): m for m in _entries(await self._optional(self.base_url + "/models"))}
        out: list[ModelInfo] = []
        for entry in entries:
            model_id = str(entry["id"])
            status = _status(entry)
            state = "loaded" if status == "loaded" else ("not-loaded" if status in ("unloaded", "sleeping") else None)
            props = None
            if status == "loaded":
                props = await self._optional(
                    f"{self.root}/props", params={"model": model_id, "autoload": "false"}
                )
            merged = {**listed.get(model_id, {}), "id": model_id}
            info = _model_info(merged, props if isinstance(props, dict) else None, state)
            raw_status = entry.get("status") if isinstance(entry.get("status"), dict) else {}
            info.details["status"] = status
            if raw_status.get("args"):
                info.details["args"] = raw_status["args"]
            if raw_status.get("failed"):
                info.details["failed"] = True
            path = entry.get("path")
            if path:
                info.details.setdefault("model_path", path)
                info.path = info.path or _local_path(path)
                info.quantization = info.quantization or quantization_from_name(os.path.basename(str(path)))
            out.append(info)
        return out

    async def _router_load(self, model_id: str) -> float:
        start = time.perf_counter()
        try:
            data = await self.post_json(self.root + "/models/load", {"model": model_id})
        except _ERRORS as exc:
            raise ModelLoadError(f"llama-server router could not load {model_id}: {exc}") from exc
        if isinstance(data, dict) and data.get("success") is False:
            raise ModelLoadError(f"llama-server router refused to load {model_id}: {data}")
        deadline = start + self.load_timeout_s
        seen_loading = False
        while True:
            entries = await _router_models(self.http, self.root, self.headers()) or []
            entry = next((e for e in entries if str(e.get("id")) == model_id), None)
            status = _status(entry) if entry else None
            raw = entry.get("status") if entry and isinstance(entry.get("status"), dict) else {}
            if status == "loaded":
                return time.perf_counter() - start
            seen_loading = seen_loading or status in ("loading", "downloading")
            # "failed" may be left over from an earlier attempt until this one starts loading.
            stale = not seen_loading and time.perf_counter() - start < 2.0
            if raw.get("failed") and status == "unloaded" and not stale:
                raise ModelLoadError(f"llama-server router failed to load {model_id}: {raw}")
            if time.perf_counter() > deadline:
                raise ModelLoadError(f"{model_id} not loaded after {self.load_timeout_s:g} s")
            await asyncio.sleep(self.load_poll_s)

    # -- helpers ---------------------------------------------------------------------------
    async def _optional(self, url: str, **kw: Any) -> Any:
        """GET JSON, or None when the endpoint is missing or broken."""
        try:
            return await self.get_json(url, **kw)
        except _ERRORS:
            return None


async def _swap_running(
    http: httpx.AsyncClient, root: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]] | None:
    """llama-swap's ``GET /running`` entries (``model``, ``state``...), or None if not llama-swap."""
    data = await try_get_json(http, root + "/running", headers)
    if not isinstance(data, dict) or not isinstance(data.get("running"), list):
        return None
    return [r for r in data["running"] if isinstance(r, dict) and isinstance(r.get("model"), str)]


async def _router_models(
    http: httpx.AsyncClient, root: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]] | None:
    """Router-mode ``GET /models`` entries (each with a ``status`` object), or None otherwise.

    A single llama-server also answers ``/models`` (as ``/v1/models``), but without ``status``."""
    data = await try_get_json(http, root + "/models", headers)
    entries = _entries(data)
    if not entries or not all(isinstance(e.get("status"), dict) for e in entries):
        return None
    return entries


def _entries(data: Any) -> list[dict[str, Any]]:
    items = data.get("data") if isinstance(data, dict) else None
    return [m for m in items or [] if isinstance(m, dict) and m.get("id")] if isinstance(items, list) else []


def _status(entry: dict[str, Any] | None) -> str | None:
    status = entry.get("status") if entry else None
    value = status.get("value") if isinstance(status, dict) else None
    return str(value) if value else None
