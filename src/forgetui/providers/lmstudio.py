"""LM Studio: its own REST API for model facts and lifecycle, and ``/api/v0`` chat for its stats.

What this relies on (LM Studio's docs, repository lmstudio-ai/docs, folder ``1_developer/2_rest``;
published at https://lmstudio.ai/docs/developer/rest):

* ``GET /api/v1/models`` (``list.md``, LM Studio 0.4.0+): ``{"models": [...]}``, each entry with
  ``type`` ("llm" | "embedding"), ``key`` (the id the OpenAI endpoints use), ``publisher``,
  ``display_name``, ``architecture``, ``quantization {name, bits_per_weight}``, ``size_bytes``,
  ``params_string`` ("7B"), ``loaded_instances [{id, config {context_length, ...}}]``,
  ``max_context_length``, ``format`` ("gguf" | "mlx"), ``capabilities``.
* ``POST /api/v1/models/load`` (``load.md``): body ``{"model": key, "config": {...}}``; answer
  ``{"model_instance_id", "config", "load_time_seconds"}``.
* ``POST /api/v1/models/unload`` (``unload.md``): body ``{"instance_id"}``; answer ``{"instance_id"}``.
* ``GET /api/v0/models`` and ``GET /api/v0/models/{model}`` (``endpoints.md``, "REST API v0",
  deprecated, LM Studio 0.3.6+): ``{"object": "list", "data": [...]}``, each entry with ``id``,
  ``type`` ("llm" | "vlm" | "embeddings"), ``publisher``, ``arch``, ``compatibility_type``,
  ``quantization`` (a string), ``state`` ("loaded" | "not-loaded"), ``max_context_length``.
  Not on that page but sent by LM Studio and read by several clients: ``loaded_context_length``
  on loaded entries; used when present.
* ``POST /api/v0/chat/completions`` (``endpoints.md``): the OpenAI chat format plus ``stats
  {tokens_per_second, time_to_first_token (s), generation_time (s), stop_reason}``, ``model_info
  {arch, quant, format, context_length}`` and ``runtime {name, version}``. The page shows them on
  a non-streamed answer. Streams carry ``usage`` only when ``stream_options.include_usage`` is
  true (API changelog, LM Studio 0.3.18), which the stream client sends; whether a stream carries
  ``stats`` depends on the version (lmstudio-ai/lmstudio-bug-tracker#676 reports 0.3.x streams
  without them). Where they are missing, ``finalize`` changes nothing and the run keeps the
  client's own measurements.
* Unknown endpoints answer **HTTP 200** with ``{"error": "Unexpected endpoint or method. (GET
  /x)"}`` (lmstudio-ai/lmstudio-bug-tracker#618, #1323), so an LM Studio without the v1 API answers
  ``/api/v1/models`` with 200 too: every answer here is judged by its shape, never by status alone.

Behaviour:

* v1 is preferred whenever ``/api/v1/models`` answers in its documented shape; otherwise v0 is
  used. With v0 only, the lifecycle is read-only: ``loaded_models`` still answers (v0 reports each
  model's ``state``), ``load`` returns None and ``unload`` False, and once that is known the
  instance's ``controls_lifecycle`` reads False. On a v1 server the first listing also asks
  ``/api/v0/models`` once, to know whether the v0 chat endpoint (the one with ``stats``) exists.
* Where neither native listing answers (say a proxy that passes only ``/v1``), models come from
  the OpenAI ``/v1/models`` list without facts, chats stay on ``/v1/chat/completions`` and there
  is no lifecycle: the server is still reachable, just without LM Studio's extras.
* Embedding models (v1 ``type`` "embedding", v0 "embeddings") cannot answer chat requests and are
  left out of ``list_models``; ``loaded_models`` includes them, since they take memory.
* ``version``: LM Studio documents no endpoint that tells its own version, so it is None. The
  ``runtime`` object of the last finalized stream (inference engine name and version) is kept in
  ``self.runtime`` and in ``server_info().details``.
* ``parameters`` stays None: the server gives only a rounded label (``params_string``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import httpx

from ..config import ProviderConfig
from ..engine.client import ChatRequest, StreamResult
from .base import Dialect, ModelInfo, ServerInfo, root_url

V1_MODELS = "/api/v1/models"
V1_LOAD = "/api/v1/models/load"
V1_UNLOAD = "/api/v1/models/unload"
V0_MODELS = "/api/v0/models"
V0_CHAT = "/api/v0/chat/completions"

_EMBEDDING_TYPES = frozenset({"embedding", "embeddings"})
#: Speculative-decoding counters LM Studio adds to ``stats`` (API changelog, 0.3.10).
_DRAFT_KEYS = ("draft_model", "total_draft_tokens_count", "accepted_draft_tokens_count",
               "rejected_draft_tokens_count", "ignored_draft_tokens_count")


class LMStudioAPIError(httpx.HTTPError):
    """LM Studio refused a REST call (an error status, or an error object in a 200 answer).

    A subclass of ``httpx.HTTPError`` so callers that guard lifecycle calls against network
    errors (``engine.servers``) catch it too."""


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def _error_text(data: Any) -> str | None:
    """The error message of an LM Studio error body, or None when the body is not one."""
    if not isinstance(data, dict) or "error" not in data:
        return None
    err = data["error"]
    if isinstance(err, dict):
        return str(err.get("message") or err)[:300]
    return str(err)[:300]


def _v1_entries(data: Any) -> list[dict[str, Any]] | None:
    """The entries of a ``GET /api/v1/models`` answer, or None when it is not one.

    The documented shape: ``{"models": [...]}`` whose entries all carry a string ``key`` and a
    ``loaded_instances`` list. An empty list passes (an LM Studio with no model downloaded)."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        return None
    entries = data["models"]
    for m in entries:
        if not (isinstance(m, dict) and isinstance(m.get("key"), str)
                and isinstance(m.get("loaded_instances"), list)):
            return None
    return entries


def _v0_entries(data: Any) -> list[dict[str, Any]] | None:
    """The entries of a ``GET /api/v0/models`` answer, or None when it is not one: a ``data``
    list whose entries all carry a string ``id`` and a string ``state``."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    entries = data["data"]
    for m in entries:
        if not (isinstance(m, dict) and isinstance(m.get("id"), str) and isinstance(m.get("state"), str)):
            return None
    return entries


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _model_from_v1(m: dict[str, Any]) -> ModelInfo:
    instances = [i for i in m["loaded_instances"] if isinstance(i, dict)]
    configs = [i.get("config") if isinstance(i.get("config"), dict) else {} for i in instances]
    loaded_ctx = next((_int(c.get("context_length")) for c in configs if _int(c.get("context_length"))), None)
    quant = m.get("quantization")
    qname = quant.get("name") if isinstance(quant, dict) else quant
    details: dict[str, Any] = {
        "api": "v1",
        "type": m.get("type"),
        "publisher": m.get("publisher"),
        "display_name": m.get("display_name"),
        "format": m.get("format"),
        "max_context_length": _int(m.get("max_context_length")),
        "bits_per_weight": quant.get("bits_per_weight") if isinstance(quant, dict) else None,
        "capabilities": m.get("capabilities"),
        "instances": [{"id": i.get("id"), "config": c} for i, c in zip(instances, configs)],
    }
    return ModelInfo(
        id=m["key"],
        state="loaded" if instances else "not-loaded",
        context_length=loaded_ctx if instances else _int(m.get("max_context_length")),
        quantization=str(qname) if qname else None,
        parameters_label=str(m["params_string"]) if m.get("params_string") else None,
        size_bytes=_int(m.get("size_bytes")),
        architecture=str(m["architecture"]) if m.get("architecture") else None,
        details={k: v for k, v in details.items() if v is not None},
    )


def _model_from_v0(m: dict[str, Any]) -> ModelInfo:
    loaded = m["state"] == "loaded"
    max_ctx = _int(m.get("max_context_length"))
    loaded_ctx = _int(m.get("loaded_context_length"))
    details: dict[str, Any] = {
        "api": "v0",
        "type": m.get("type"),
        "publisher": m.get("publisher"),
        "format": m.get("compatibility_type"),
        "max_context_length": max_ctx,
        "loaded_context_length": loaded_ctx,
        "capabilities": m.get("capabilities"),
    }
    return ModelInfo(
        id=m["id"],
        state=m["state"],
        # Loaded without a reported context: the running context is unknown (it is not the max).
        context_length=loaded_ctx if loaded else max_ctx,
        quantization=str(m["quantization"]) if m.get("quantization") else None,
        architecture=str(m["arch"]) if m.get("arch") else None,
        details={k: v for k, v in details.items() if v is not None},
    )


class LMStudioDialect(Dialect):
    """LM Studio's server (see the module docstring for the endpoints and their sources)."""

    kind = "lmstudio"
    controls_lifecycle = True
    #: Loading a large model takes minutes; the shared client's read timeout is for streams.
    load_timeout_s: float = 900.0

    def __init__(self, provider: ProviderConfig, http: httpx.AsyncClient) -> None:
        super().__init__(provider, http)
        #: "v1" or "v0": the REST API the last listing came from; "openai" when neither answered
        #: and only ``/v1/models`` did; None before the first listing.
        self.api: str | None = None
        #: Whether ``/api/v0`` answers (it carries the chat ``stats``); None until asked.
        self.has_v0: bool | None = None
        #: ``runtime`` of the last finalized stream (inference engine name and version).
        self.runtime: dict[str, Any] | None = None
        #: Facts of the last ``load``: instance id, config, server and wall-clock times, source.
        self.last_load: dict[str, Any] | None = None

    # -- REST helpers ------------------------------------------------------------------------
    async def _get(self, path: str) -> tuple[int, Any]:
        """GET a native endpoint: (status, parsed JSON or None). Raises only on transport errors."""
        resp = await self.http.get(self.root + path, headers=self.headers())
        return resp.status_code, _json(resp)

    async def _post(self, path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """POST to a native endpoint; the answer must be a JSON object without an error."""
        kw: dict[str, Any] = {}
        if timeout is not None:
            kw["timeout"] = httpx.Timeout(timeout, connect=10.0)
        resp = await self.http.post(self.root + path, json=body, headers=self.headers(), **kw)
        data = _json(resp)
        message = _error_text(data)
        if resp.status_code >= 400 or message is not None or not isinstance(data, dict):
            raise LMStudioAPIError(
                f"POST {path}: HTTP {resp.status_code}: {message or resp.text[:200] or '(empty body)'}")
        return data

    async def _v1_models(self) -> list[dict[str, Any]] | None:
        """The v1 listing, or None when this server has no v1 API."""
        status, data = await self._get(V1_MODELS)
        entries = _v1_entries(data) if status == 200 else None
        if entries is not None:
            self.api = "v1"
            self.__dict__.pop("controls_lifecycle", None)  # back to the class's True
        return entries

    async def _v0_models(self) -> list[dict[str, Any]] | None:
        """The v0 listing, or None when this server has no v0 API."""
        status, data = await self._get(V0_MODELS)
        entries = _v0_entries(data) if status == 200 else None
        self.has_v0 = entries is not None
        return entries

    async def _listing(self) -> tuple[str, list[dict[str, Any]]] | None:
        """("v1" | "v0", entries): v1 when it answers in its shape, else v0; None when neither
        does. Also learns once whether v0 (the chat endpoint with stats) exists next to v1."""
        entries = await self._v1_models()
        if entries is not None:
            if self.has_v0 is None:
                await self._v0_models()
            return "v1", entries
        entries = await self._v0_models()
        if entries is None:
            return None
        self.api = "v0"
        self.controls_lifecycle = False  # type: ignore[misc]  # known now: this server has no v1
        return "v0", entries

    # -- discovery ---------------------------------------------------------------------------
    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        """True when ``/api/v1/models`` or ``/api/v0/models`` answers in LM Studio's shape.

        v0 must list at least one model: an empty ``data`` list is too generic a fingerprint.
        Never raises. A server that requires an API token answers 401 here and is not detected
        (the probe has no key); configure ``kind = "lmstudio"`` for it."""
        root = root_url(base_url)
        try:
            resp = await http.get(root + V1_MODELS)
            if resp.status_code == 200 and _v1_entries(_json(resp)) is not None:
                return True
            resp = await http.get(root + V0_MODELS)
        except httpx.HTTPError:
            return False
        entries = _v0_entries(_json(resp)) if resp.status_code == 200 else None
        return bool(entries)

    async def list_models(self) -> list[ModelInfo]:
        """Chat-capable models (LLMs and, on v0, VLMs) with LM Studio's facts; embeddings left out.

        Where neither native listing answers (a proxy that passes only ``/v1``), the plain
        OpenAI ``/v1/models`` list, without facts; ``api`` is then "openai"."""
        listing = await self._listing()
        if listing is None:
            models = await super().list_models()
            self.api = "openai"
            self.controls_lifecycle = False  # type: ignore[misc]
            return models
        api, entries = listing
        build = _model_from_v1 if api == "v1" else _model_from_v0
        return [build(m) for m in entries if str(m.get("type") or "") not in _EMBEDDING_TYPES]

    async def version(self) -> str | None:
        """LM Studio documents no version endpoint: None (see ``server_info().details``)."""
        return None

    async def server_info(self) -> ServerInfo:
        info = await super().server_info()
        if info.reachable:
            info.details["api"] = self.api
            info.details["lifecycle"] = {"v1": "v1 load/unload", "v0": "none (v0 only)"}.get(
                str(self.api), "none (no LM Studio REST API answered)")
            info.details["chat_endpoint"] = self.prepare_path()
            if self.runtime:
                info.details["runtime"] = self.runtime
        return info

    # -- requests ----------------------------------------------------------------------------
    def prepare_path(self) -> str:
        """The endpoint chats go to: ``/api/v0/chat/completions`` unless v0 is known to be absent."""
        return V0_CHAT if self.has_v0 is not False else "/v1/chat/completions"

    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """Speed requests go to ``/api/v0/chat/completions``: same OpenAI body and SSE chunks,
        plus LM Studio's ``stats``. They stay on the OpenAI endpoint where a listing showed that
        ``/api/v0`` does not answer (no stats then), and so do other purposes ("case"): graded
        cases need no stats, and tool calls and reasoning fields are documented for the OpenAI
        endpoint. Nothing else changes: LM Studio documents no switch to turn its prompt cache
        off or to force the output length."""
        if purpose != "speed" or self.has_v0 is False:
            return request
        return dataclasses.replace(request, base_url=self.root, path=V0_CHAT, native_body=None)

    thinking_switch = None

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """None: LM Studio documents a reasoning switch only for its native ``/api/v1/chat``
        (``reasoning``) and ``/v1/responses`` (``reasoning.effort``, gpt-oss), not for the
        ``/v1/chat/completions`` endpoint cases use, so the prompt tag is used instead."""
        return None

    async def finalize(self, request: ChatRequest, result: StreamResult) -> None:
        """Turn LM Studio's ``stats`` into llama.cpp-style ``timings``.

        ``prompt_n`` / ``predicted_n`` are ``usage.prompt_tokens`` / ``usage.completion_tokens``
        (left out when the stream had no usage), ``prompt_ms`` is ``time_to_first_token`` and
        ``predicted_ms`` ``generation_time``, both in ms. Caveats: ``time_to_first_token`` is
        LM Studio's own prompt-to-first-token time (prompt processing plus the first token; with
        JIT loading maybe the load as well), and LM Studio reports no cached-token count, so a
        reused prompt prefix makes the derived prefill rate too high. ``tokens_per_second`` and
        ``stop_reason`` are kept raw; LM Studio does not define ``tokens_per_second`` exactly.
        """
        acc = result.acc
        runtime = acc.native.get("runtime")
        if isinstance(runtime, dict):
            self.runtime = runtime
        stats = acc.native.get("stats")
        if not isinstance(stats, dict):
            return
        timings: dict[str, Any] = dict(acc.timings or {})
        timings["source"] = "lmstudio"
        usage = acc.usage if isinstance(acc.usage, dict) else {}
        if _int(usage.get("prompt_tokens")) is not None:
            timings["prompt_n"] = usage["prompt_tokens"]
        if _int(usage.get("completion_tokens")) is not None:
            timings["predicted_n"] = usage["completion_tokens"]
        ttft = _num(stats.get("time_to_first_token", stats.get("time_to_first_token_seconds")))
        if ttft is not None:
            timings["prompt_ms"] = ttft * 1000
        gen = _num(stats.get("generation_time"))
        if gen is not None:
            timings["predicted_ms"] = gen * 1000
        tps = _num(stats.get("tokens_per_second"))
        if tps is not None:
            timings["tokens_per_second"] = tps
        if stats.get("stop_reason") is not None:
            timings["stop_reason"] = stats["stop_reason"]
        for key in _DRAFT_KEYS:
            if key in stats:
                timings[key] = stats[key]
        acc.timings = timings

    # -- lifecycle ---------------------------------------------------------------------------
    async def loaded_models(self) -> list[str] | None:
        """Keys of the models in memory (embeddings included), each once however many instances
        it has; on v0, the ids whose ``state`` is "loaded". None when the server cannot be asked."""
        try:
            listing = await self._listing()
        except httpx.HTTPError:
            return None
        if listing is None:
            return None
        api, entries = listing
        if api == "v1":
            return [m["key"] for m in entries if m["loaded_instances"]]
        return [m["id"] for m in entries if m["state"] == "loaded"]

    async def load(self, model_id: str, config: dict[str, Any] | None = None) -> float | None:
        """Load ``model_id`` (a key) with ``POST /api/v1/models/load``; returns seconds.

        The time is the server's ``load_time_seconds`` when it gives one, else the wall time of
        the call measured here (it then includes the HTTP round trip); ``self.last_load`` says
        which (``source`` "server" or "measured"). A model that already has an instance is not
        loaded again (LM Studio would add a second instance): 0.0, ``source`` "already-loaded".
        None on a server without the v1 API. Raises ``LMStudioAPIError`` when LM Studio refuses.
        """
        entries = await self._v1_models()
        if entries is None:
            return None
        current = next((m for m in entries if m["key"] == model_id or any(
            isinstance(i, dict) and i.get("id") == model_id for i in m["loaded_instances"])), None)
        if current is not None and current["loaded_instances"]:
            self.last_load = {"model": model_id, "source": "already-loaded", "seconds": 0.0,
                              "instances": [i.get("id") for i in current["loaded_instances"]
                                            if isinstance(i, dict)]}
            return 0.0
        body: dict[str, Any] = {"model": model_id}
        if config:
            body["config"] = config
        t0 = time.perf_counter()
        data = await self._post(V1_LOAD, body, timeout=self.load_timeout_s)
        wall = time.perf_counter() - t0
        server_s = _num(data.get("load_time_seconds"))
        seconds = server_s if server_s is not None else wall
        self.last_load = {"model": model_id, "model_instance_id": data.get("model_instance_id"),
                          "config": data.get("config"), "load_time_seconds": server_s,
                          "wall_s": wall, "seconds": seconds,
                          "source": "server" if server_s is not None else "measured"}
        return seconds

    async def unload(self, model_id: str) -> bool:
        """Unload every instance of ``model_id`` (a key, or one instance id) with
        ``POST /api/v1/models/unload``. True when something was unloaded; False when nothing of
        that id is loaded, or on a server without the v1 API."""
        entries = await self._v1_models()
        if entries is None:
            return False
        ids: list[str] = []
        for m in entries:
            for inst in m["loaded_instances"]:
                iid = inst.get("id") if isinstance(inst, dict) else None
                if isinstance(iid, str) and (m["key"] == model_id or iid == model_id):
                    ids.append(iid)
        for iid in ids:
            await self._post(V1_UNLOAD, {"instance_id": iid}, timeout=self.load_timeout_s)
        return bool(ids)


__all__ = ["LMStudioAPIError", "LMStudioDialect"]
