"""Server dialects: one small adapter per kind of server, picked by the provider's ``kind`` or
detected by probing each kind's documented endpoints (never by port)."""

from __future__ import annotations

import httpx

from ..config import ProviderConfig
from .base import Dialect, ModelInfo, ServerInfo, root_url
from .llamacpp import LlamaCppDialect
from .llamacpp_python import LlamaCppPythonDialect
from .lmstudio import LMStudioDialect
from .ollama import OllamaDialect
from .vllm import SGLangDialect, VLLMDialect

#: Probe order: the most specific fingerprints first; plain OpenAI last.
DETECTION_ORDER: tuple[type[Dialect], ...] = (
    OllamaDialect,
    LMStudioDialect,
    LlamaCppDialect,
    LlamaCppPythonDialect,
    VLLMDialect,
    SGLangDialect,
)

DIALECTS: dict[str, type[Dialect]] = {cls.kind: cls for cls in (*DETECTION_ORDER, Dialect)}


async def detect_kind(base_url: str, http: httpx.AsyncClient) -> str:
    """The first kind whose documented endpoints answer; "openai" when none does."""
    for cls in DETECTION_ORDER:
        try:
            if await cls.probe(base_url, http):
                return cls.kind
        except httpx.HTTPError:
            continue
    return "openai"


async def dialect_for(provider: ProviderConfig, http: httpx.AsyncClient) -> tuple[Dialect, bool]:
    """The adapter for a provider and whether its kind was detected (True) or configured."""
    if provider.kind is not None:
        return DIALECTS[provider.kind](provider, http), False
    kind = await detect_kind(provider.base_url, http)
    return DIALECTS[kind](provider, http), True


__all__ = [
    "DIALECTS",
    "DETECTION_ORDER",
    "Dialect",
    "ModelInfo",
    "ServerInfo",
    "detect_kind",
    "dialect_for",
    "root_url",
]
