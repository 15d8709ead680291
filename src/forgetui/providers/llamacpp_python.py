"""llama-cpp-python's server (``python -m llama_cpp.server``): what the embedded demo runs.

It speaks the OpenAI endpoints only, and its streams carry no ``usage`` (checked against 0.3.36:
``stream_options.include_usage`` is accepted and ignored). Token counts therefore come from its
own tokenizer endpoint, ``POST /extras/tokenize/count`` (listed in its ``/openapi.json``), run
over the streamed text after the request: exact for the text, without special tokens such as the
end-of-sequence token, and recorded as ``token_source = "tokenizer"``. Prompt tokens are counted
over the message text without the chat template; the prefill estimate subtracts a baseline counted
the same way, so the template's fixed overhead cancels out.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..engine.client import ChatRequest, StreamResult
from .base import Dialect, ModelInfo, root_url


class LlamaCppPythonDialect(Dialect):
    kind = "llamacpp-python"

    @classmethod
    async def probe(cls, base_url: str, http: httpx.AsyncClient) -> bool:
        try:
            resp = await http.get(root_url(base_url) + "/openapi.json")
            paths = resp.json().get("paths", {}) if resp.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, AttributeError):
            return False
        return "/extras/tokenize/count" in paths and "/v1/chat/completions" in paths

    thinking_switch = None

    def no_thinking(self, request: ChatRequest) -> ChatRequest | None:
        """None: llama-cpp-python's server takes ``chat_template_kwargs`` only when the model is
        loaded, not per request, so the prompt tag is used instead."""
        return None

    async def version(self) -> str | None:
        try:
            data = await self.get_json(self.root + "/openapi.json")
        except (httpx.HTTPError, ValueError):
            return None
        info = data.get("info", {}) if isinstance(data, dict) else {}
        return str(info.get("version")) if info.get("version") else None

    async def list_models(self) -> list[ModelInfo]:
        data = await self.get_json(self.base_url + "/models")
        return [
            ModelInfo(id=str(m["id"]), state="loaded", details={"owned_by": m.get("owned_by")})
            for m in data.get("data", []) if isinstance(m, dict) and m.get("id")
        ]

    async def count_tokens(self, text: str) -> int | None:
        """The server's own tokenizer count for ``text`` (None when the endpoint fails)."""
        try:
            data = await self.post_json(self.root + "/extras/tokenize/count", {"input": text})
        except (httpx.HTTPError, ValueError):
            return None
        count = data.get("count") if isinstance(data, dict) else None
        return count if isinstance(count, int) else None

    async def finalize(self, request: ChatRequest, result: StreamResult) -> None:
        acc = result.acc
        if acc.usage or not (acc.content or acc.reasoning):
            return
        completion = await self.count_tokens(acc.reasoning + acc.content)
        if completion is None:
            return
        prompt_text = "\n".join(str(m.get("content") or "") for m in request.messages)
        usage: dict[str, Any] = {"completion_tokens": completion, "source": "tokenizer"}
        prompt = await self.count_tokens(prompt_text)
        if prompt is not None:
            usage["prompt_tokens"] = prompt
        acc.usage = usage
