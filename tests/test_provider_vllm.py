"""The vLLM and SGLang dialects against loopback fakes of their native endpoints.

Shapes: vLLM ``GET /version`` -> ``{"version"}`` and ``/v1/models`` ``ModelCard`` entries with
``root`` / ``parent`` / ``max_model_len`` (vllm-project/vllm ``entrypoints/openai``), extra chat
parameters ``min_tokens`` / ``ignore_eos`` (docs "OpenAI-Compatible Server", "Extra Parameters");
SGLang ``/get_model_info``, ``/get_server_info``, ``/v1/models`` and the chat request's
``ignore_eos`` / ``min_tokens`` (sgl-project/sglang ``srt/entrypoints/http_server.py``,
``srt/entrypoints/openai/protocol.py``). See ``tests/fake_native.py``.
"""

from __future__ import annotations

import httpx
import pytest

from forgetui.config import ProviderConfig
from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient
from forgetui.engine.speed import request_record
from forgetui.providers.llamacpp import LlamaCppDialect
from forgetui.providers.vllm import SGLangDialect, VLLMDialect
from tests.fake_native import KINDS
from tests.fakeserver import Script
from tests.conftest import closed_url

pytestmark = pytest.mark.timeout(30)


def make(cls, base_url: str, http: httpx.AsyncClient):
    return cls(ProviderConfig(name="p", base_url=base_url, kind=cls.kind), http)


def chat(base_url: str, max_tokens: int = 12, **extra) -> ChatRequest:
    return ChatRequest(base_url=base_url, model="m", max_tokens=max_tokens, extra_body=dict(extra),
                       messages=[{"role": "user", "content": "[0f0f0f] Explain bicycle gears at length."}])


async def stream(request: ChatRequest):
    async with StreamClient(ClientLimits(idle_timeout_s=5, request_timeout_s=20, retries=0)) as client:
        return await client.chat_stream(request)


# -- probe ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, own", [(VLLMDialect, "vllm"), (SGLangDialect, "sglang")])
@pytest.mark.parametrize("kind", KINDS)
async def test_probe_is_true_only_for_its_own_server(native, http, cls, own: str, kind: str) -> None:
    fake = native(kind)
    assert await cls.probe(fake.base_url, http) is (kind == own)


@pytest.mark.parametrize("cls", [VLLMDialect, SGLangDialect, LlamaCppDialect])
async def test_probe_is_false_for_a_plain_openai_server_and_for_nothing(fake, http, cls) -> None:
    server = fake({"m": Script()})
    assert await cls.probe(server.base_url, http) is False
    assert await cls.probe(closed_url(), http) is False


async def test_vllm_probe_needs_max_model_len_too(native, http) -> None:
    """``/version`` alone is not enough: other servers have one."""
    fake = native("vllm", max_model_len=None)
    assert await VLLMDialect.probe(fake.base_url, http) is False


async def test_sglang_with_a_version_route_is_not_taken_for_vllm(native, http) -> None:
    """SGLang's ``/v1/models`` also has ``max_model_len``; a build that also answered
    ``/version`` must still not look like vLLM."""
    fake = native("sglang", extra_routes={"/version": {"version": "0.5.3"}})
    assert await VLLMDialect.probe(fake.base_url, http) is False
    assert await SGLangDialect.probe(fake.base_url, http) is True


# -- model facts ---------------------------------------------------------------------------

async def test_vllm_server_info(native, http, tmp_path) -> None:
    weights = tmp_path / "Qwen3-0.6B"
    weights.mkdir()
    fake = native("vllm", served_root=str(weights))
    d = make(VLLMDialect, fake.base_url, http)
    info = await d.server_info()
    assert info.reachable and info.kind == "vllm" and info.version == "0.11.0"
    [m] = info.models
    assert m.id == "Qwen/Qwen3-0.6B" and m.state == "loaded" and m.context_length == 32768
    assert m.details["root"] == str(weights) and m.details["owned_by"] == "vllm"
    assert m.path == str(weights)


async def test_sglang_server_info(native, http) -> None:
    fake = native("sglang")
    d = make(SGLangDialect, fake.base_url, http)
    info = await d.server_info()
    assert info.reachable and info.kind == "sglang" and info.version == "0.5.3"
    [m] = info.models
    assert m.id == "Qwen/Qwen3-0.6B" and m.context_length == 32768
    assert m.quantization == "fp8"
    assert m.details["model_path"] == "/models/Qwen3-0.6B" and m.details["is_generation"] is True
    assert m.details["max_total_num_tokens"] == 500_000
    assert m.path is None  # /models/Qwen3-0.6B is not on this machine
    assert "internal_states" not in m.details


async def test_sglang_context_falls_back_to_server_info(native, http) -> None:
    fake = native("sglang", max_model_len=None)
    fake.extra_routes["/get_server_info"] = {"context_length": 16384, "version": "0.4.9"}
    [m] = await make(SGLangDialect, fake.base_url, http).list_models()
    assert m.context_length == 16384


@pytest.mark.parametrize("cls", [VLLMDialect, SGLangDialect])
async def test_unreachable_server_is_reported_not_raised(http, cls) -> None:
    info = await make(cls, closed_url(), http).server_info()
    assert info.reachable is False and info.error and info.models == []


# -- requests ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, kind", [(VLLMDialect, "vllm"), (SGLangDialect, "sglang")])
async def test_speed_body_forces_the_output_length(fake, native, http, cls, kind: str) -> None:
    server = fake({"m": Script(content_tokens=30)})
    d = make(cls, native(kind).base_url, http)
    original = chat(server.base_url, max_tokens=12, top_k=20)
    result = await stream(d.prepare(original, "speed"))
    assert result.ok and result.acc.finish_reason == "length"
    body = server.logs[-1].body
    assert body["ignore_eos"] is True and body["min_tokens"] == 12 == body["max_tokens"]
    assert body["top_k"] == 20 and "cache_prompt" not in body
    assert original.extra_body == {"top_k": 20}


@pytest.mark.parametrize("cls", [VLLMDialect, SGLangDialect])
async def test_case_body_is_sent_unchanged(fake, http, cls) -> None:
    server = fake({"m": Script(content_tokens=4)})
    d = make(cls, "http://127.0.0.1:1/v1", http)
    original = chat(server.base_url)
    assert d.prepare(original, "case") is original
    await stream(original)
    body = server.logs[-1].body
    assert "ignore_eos" not in body and "min_tokens" not in body


async def test_vllm_speed_record_uses_usage(fake, native, http) -> None:
    server = fake({"m": Script(content_tokens=30, reasoning_tokens=3, reasoning_field="reasoning")})
    d = make(VLLMDialect, native("vllm").base_url, http)
    request = d.prepare(chat(server.base_url, max_tokens=12), "speed")
    result = await stream(request)
    await d.finalize(request, result)
    rec = request_record(request, result, None)
    assert rec["ok"] and rec["token_source"] == "usage" and rec["completion_tokens"] == 12
    assert rec["reasoning"].split() == ["r0", "r1", "r2"]  # vLLM's newer "reasoning" field


# -- lifecycle -----------------------------------------------------------------------------

@pytest.mark.parametrize("cls, kind", [(VLLMDialect, "vllm"), (SGLangDialect, "sglang")])
async def test_no_lifecycle(native, http, cls, kind: str) -> None:
    d = make(cls, native(kind).base_url, http)
    assert d.controls_lifecycle is False
    assert await d.loaded_models() is None
    assert await d.load("Qwen/Qwen3-0.6B") is None
    assert await d.unload("Qwen/Qwen3-0.6B") is False
