"""vLLM and SGLang OpenAI-compatible servers: recognition, model facts, forced output length.

vLLM (vllm-project/vllm; docs "OpenAI-Compatible Server", docs.vllm.ai):

* ``GET /version`` answers ``{"version": "<vllm version>"}`` (``entrypoints/openai/basic/api_router.py``).
* ``GET /v1/models`` entries are ``ModelCard``s with ``root``, ``parent`` and ``max_model_len``
  (the context the engine serves; LoRA adapters carry ``parent`` instead).
* Extra sampling parameters accepted in the chat body ("Extra Parameters for Chat API"):
  ``ignore_eos`` and ``min_tokens`` (``SamplingParams``: "Minimum number of tokens to generate per
  output sequence before EOS or stop_token_ids can be generated").
* Reasoning streams as ``delta.reasoning`` (renamed from ``reasoning_content``); the accumulator
  reads both, so nothing here depends on the name.

SGLang (sgl-project/sglang, ``python/sglang/srt/entrypoints/http_server.py``):

* ``GET /get_model_info`` answers ``model_path``, ``tokenizer_path``, ``is_generation``...
* ``GET /get_server_info`` answers the server arguments (``context_length``, ``quantization``,
  ``dtype``, ``tp_size``...), scheduler facts (``max_total_num_tokens``, ``max_req_input_len``) and
  ``version``; ``/server_info`` is the newer name of the same endpoint.
* ``GET /v1/models`` also carries ``max_model_len`` (the model config's context length). So does
  vLLM's, which is why the vLLM probe also checks that ``/get_model_info`` is absent.
* The OpenAI chat request (``entrypoints/openai/protocol.py``, ``ChatCompletionRequest``) takes
  ``ignore_eos`` and ``min_tokens``; ``to_sampling_params`` passes the latter on as the native
  ``min_new_tokens``.

Neither server loads or unloads models on request: no lifecycle.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import httpx

from ..engine.client import ChatRequest
from .base import Dialect, ModelInfo, root_url, template_thinking_off, try_get_json

_ERRORS = (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError)


def _entries(data: Any) -> list[dict[str, Any]]:
    items = data.get("data") if isinstance(data, dict) else None
    return [m for m in items if isinstance(m, dict) and m.get("id")] if isinstance(items, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _local(path: Any) -> str | None:
    return path if isinstance(path, str) and path and os.path.exists(path) else None


def _force_length(request: ChatRequest, purpose: str) -> ChatRequest:
    """Speed requests: generate exactly ``max_tokens`` (EOS ignored, and no stop before the
    minimum); explicit provider ``extra_body`` values win. Cases go out unchanged."""
    if purpose != "speed":
        return request
    extra = {"ignore_eos": True, "min_tokens": request.max_tokens, **request.extra_body}
    return replace(request, extra_body=extra)


class VLLMDialect(Dialect):
    """vLLM's OpenAI server: version, served context length, forced output length."""

    kind = "vllm"

    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        """``/version`` with a version string and ``/v1/models`` entries with ``max_model_len``,
        and not SGLang (whose ``/v1/models`` has ``max_model_len`` too)."""
        root = root_url(base_url)
        version = await try_get_json(http, root + "/version")
        if not isinstance(version, dict) or not isinstance(version.get("version"), str):
            return False
        models = await try_get_json(http, root + "/v1/models")
        if not any(_int(m.get("max_model_len")) for m in _entries(models)):
            return False
        sglang = await try_get_json(http, root + "/get_model_info")
        return not (isinstance(sglang, dict) and "model_path" in sglang)

    async def version(self) -> str | None:
        data = await try_get_json(self.http, self.root + "/version", self.headers())
        version = data.get("version") if isinstance(data, dict) else None
        return str(version) if version else None

    async def list_models(self) -> list[ModelInfo]:
        data = await self.get_json(self.base_url + "/models")
        out = []
        for m in _entries(data):
            details = {k: m[k] for k in ("root", "parent", "owned_by") if m.get(k) is not None}
            out.append(ModelInfo(
                id=str(m["id"]),
                state="loaded",  # vLLM serves exactly what it started with
                context_length=_int(m.get("max_model_len")),
                path=_local(m.get("root")),
                details=details,
            ))
        return out

    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """Speed: ``min_tokens = max_tokens`` and ``ignore_eos: true`` (vLLM extra sampling
        parameters), so every speed request decodes exactly ``max_tokens`` tokens."""
        return _force_length(request, purpose)

    thinking_switch = "chat_template_kwargs.enable_thinking=false"

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """``chat_template_kwargs: {"enable_thinking": false}`` (vLLM "Reasoning Outputs": the
        switch for Qwen3-style hybrid models; the template decides what it means)."""
        return template_thinking_off(request)


class SGLangDialect(Dialect):
    """SGLang's server: native model and server info, forced output length."""

    kind = "sglang"

    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        data = await try_get_json(http, root_url(base_url) + "/get_model_info")
        return isinstance(data, dict) and isinstance(data.get("model_path"), str)

    async def _server_info_raw(self) -> dict[str, Any] | None:
        for path in ("/get_server_info", "/server_info"):
            data = await try_get_json(self.http, self.root + path, self.headers())
            if isinstance(data, dict):
                return data
        return None

    async def version(self) -> str | None:
        info = await self._server_info_raw()
        version = info.get("version") if info else None
        return str(version) if version else None

    async def list_models(self) -> list[ModelInfo]:
        data = await self.get_json(self.base_url + "/models")
        model = await try_get_json(self.http, self.root + "/get_model_info", self.headers())
        model = model if isinstance(model, dict) else {}
        server = await self._server_info_raw() or {}
        facts: dict[str, Any] = {}
        for key in ("model_path", "tokenizer_path", "is_generation", "weight_version"):
            if model.get(key) is not None:
                facts[key] = model[key]
        for key in ("served_model_name", "dtype", "kv_cache_dtype", "tp_size", "dp_size",
                    "max_total_num_tokens", "max_req_input_len", "chunked_prefill_size",
                    "version"):
            if server.get(key) is not None and not isinstance(server[key], (dict, list)):
                facts[key] = server[key]
        quantization = server.get("quantization")
        out = []
        for m in _entries(data):
            details = {k: m[k] for k in ("root", "parent", "owned_by") if m.get(k) is not None}
            details.update(facts)
            out.append(ModelInfo(
                id=str(m["id"]),
                state="loaded",
                context_length=_int(m.get("max_model_len")) or _int(server.get("context_length")),
                quantization=str(quantization) if quantization else None,
                path=_local(model.get("model_path")),
                details=details,
            ))
        return out

    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """Speed: ``ignore_eos: true`` and ``min_tokens = max_tokens`` (SGLang's OpenAI chat
        request; it becomes the native ``min_new_tokens``)."""
        return _force_length(request, purpose)

    thinking_switch = "chat_template_kwargs.enable_thinking=false"

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """``chat_template_kwargs: {"enable_thinking": false}`` (SGLang "Reasoning Parser" and
        "Thinking budget": the chat-template hint Qwen3-style models read)."""
        return template_thinking_off(request)
