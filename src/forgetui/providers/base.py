"""What every server dialect adapter provides, and the generic OpenAI-compatible behaviour.

A dialect knows one kind of server: how to find out what it serves (models, context, quantization,
version), how to shape a request so the measurement is fair (cache off, output length forced), how
to read the server's own truth after a stream (native timings and token counts), and, where the
server allows it, how to load and unload models. The engine calls only the methods below; it never
branches on the kind itself.

Adapters never import textual or rich. Every network call goes through the shared ``httpx``
client handed in, so timeouts and connection limits are the run's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import httpx

from ..config import ProviderConfig
from ..engine.client import ChatRequest, StreamResult


@dataclass
class ModelInfo:
    """One model a server can serve, with whatever facts the server (or its GGUF file) tells."""

    id: str
    state: str | None = None  # "loaded", "not-loaded", or None when the server does not say
    context_length: int | None = None  # the context the server runs it with (or max, if not loaded)
    quantization: str | None = None  # e.g. "Q4_K_M", "Q4_1", "bf16"
    parameters: int | None = None  # parameter count
    parameters_label: str | None = None  # the server's own label, e.g. "8B", "135M"
    size_bytes: int | None = None  # weights file size
    architecture: str | None = None
    path: str | None = None  # the GGUF file on this machine, when known
    details: dict[str, Any] = field(default_factory=dict)  # raw facts worth keeping

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ServerInfo:
    """The result of asking a server about itself."""

    kind: str
    reachable: bool
    version: str | None = None
    error: str | None = None
    models: list[ModelInfo] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # e.g. llama.cpp /props, server header

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["models"] = [m.as_dict() for m in self.models]
        return out


async def try_get_json(http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> Any:
    """GET and parse JSON; None for anything but a 200 with JSON (probes must never raise)."""
    try:
        resp = await http.get(url, headers=headers or {})
        return resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def template_thinking_off(request: ChatRequest) -> ChatRequest:
    """``chat_template_kwargs.enable_thinking = false`` merged into ``extra_body`` (other template
    kwargs the provider sets are kept): the per-request switch of llama.cpp's server, vLLM and
    SGLang, passed to the model's chat template (Qwen3 and other hybrid thinking models)."""
    kwargs = request.extra_body.get("chat_template_kwargs")
    kwargs = {**kwargs, "enable_thinking": False} if isinstance(kwargs, dict) else {"enable_thinking": False}
    return replace(request, extra_body={**request.extra_body, "chat_template_kwargs": kwargs})


def root_url(base_url: str) -> str:
    """The server root for native endpoints: ``http://h:p/v1`` -> ``http://h:p``."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


class Dialect:
    """Generic OpenAI-compatible server (also hosted APIs): no lifecycle, no native stats."""

    kind: ClassVar[str] = "openai"
    #: True when the server can load and unload models on request.
    controls_lifecycle: ClassVar[bool] = False

    def __init__(self, provider: ProviderConfig, http: httpx.AsyncClient) -> None:
        self.provider = provider
        self.http = http
        self.base_url = provider.base_url.rstrip("/")
        self.root = root_url(self.base_url)

    # -- helpers ---------------------------------------------------------------------------
    def headers(self) -> dict[str, str]:
        key = self.provider.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def get_json(self, url: str, **kw: Any) -> Any:
        """GET and parse JSON; raises httpx.HTTPStatusError on a non-2xx answer."""
        resp = await self.http.get(url, headers=self.headers(), **kw)
        resp.raise_for_status()
        return resp.json()

    async def post_json(self, url: str, body: dict[str, Any], **kw: Any) -> Any:
        resp = await self.http.post(url, json=body, headers=self.headers(), **kw)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    # -- discovery -------------------------------------------------------------------------
    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        """True when the server at ``base_url`` is this kind (documented endpoints, never ports)."""
        return False

    async def list_models(self) -> list[ModelInfo]:
        """``GET /v1/models``."""
        data = await self.get_json(self.base_url + "/models")
        return [ModelInfo(id=str(m["id"])) for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]

    async def version(self) -> str | None:
        return None

    async def server_info(self) -> ServerInfo:
        """Reachability, version and models; never raises for a server that is down."""
        try:
            models = await self.list_models()
            version = await self.version()
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            return ServerInfo(kind=self.kind, reachable=False, error=f"{type(exc).__name__}: {exc}")
        return ServerInfo(kind=self.kind, reachable=True, version=version, models=models)

    def context_warning(self, model: ModelInfo, needed_tokens: int) -> str | None:
        """A sentence when ``model`` runs with less context than a request needs, else None."""
        if model.context_length and model.context_length < needed_tokens:
            return (f"{model.id} runs with a {model.context_length}-token context but up to "
                    f"{needed_tokens} tokens are needed: the server may cut or refuse the prompt.")
        return None

    # -- requests --------------------------------------------------------------------------
    def prepare(self, request: ChatRequest, purpose: str) -> ChatRequest:
        """Shape a request for this server. ``purpose`` is "speed" (cache off, length forced where
        the server allows) or "case". Returns the request to send (may be the same object)."""
        return request

    async def finalize(self, request: ChatRequest, result: StreamResult) -> None:
        """After a stream: turn native stats into ``result.acc.usage`` / ``result.acc.timings``."""

    #: The switch ``no_thinking`` uses, in words (recorded as ``case.recovery.switch``).
    thinking_switch: ClassVar[str | None] = "reasoning_effort=low"

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """The request (before ``prepare``) with the model's thinking switched off by this server's
        documented switch, or None when it documents none (the caller then uses a prompt tag).

        Generic OpenAI-style (hosted) APIs: ``reasoning_effort: "low"``, the lowest value every
        OpenAI reasoning model accepts ("minimal" is gpt-5 only, "none" gpt-5.1 and later; the
        o-series take low/medium/high). It lowers thinking rather than removing it."""
        return replace(request, extra_body={**request.extra_body, "reasoning_effort": "low"})

    # -- lifecycle -------------------------------------------------------------------------
    async def loaded_models(self) -> list[str] | None:
        """Ids of the models in memory now, or None when the server cannot say."""
        return None

    async def load(self, model_id: str) -> float | None:
        """Load a model; returns the load time in seconds (None when not supported)."""
        return None

    async def unload(self, model_id: str) -> bool:
        """Unload a model; False when not supported."""
        return False
