"""The llama.cpp dialect against loopback fakes of llama-server, its router mode and llama-swap.

Endpoint shapes come from ggml-org/llama.cpp ``tools/server/README.md`` (``/props``, ``/v1/models``
``meta``, ``timings``, ``cache_prompt`` / ``ignore_eos``, router-mode ``/models``) and from
mostlygeek/llama-swap (README, ``proxy/proxymanager.go``: ``/running``, ``/unload``,
``/upstream/:model_id``; ``proxy/proxymanager_api.go``: ``/api/models/unload/<model>``); see
``tests/fake_native.py``. Streaming goes to ``tests.fakeserver.FakeServer``.
"""

from __future__ import annotations

import httpx
import pytest

from forgetui.config import ProviderConfig
from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient, StreamResult
from forgetui.engine.speed import request_record
from forgetui.providers.llamacpp import (
    CHAT_TEMPLATE_CHARS,
    LlamaCppDialect,
    ModelLoadError,
    quantization_from_name,
)
from tests.fake_native import KINDS, GGUFModel
from tests.fakeserver import Script
from tests.conftest import closed_url

pytestmark = pytest.mark.timeout(30)


def dialect(base_url: str, http: httpx.AsyncClient) -> LlamaCppDialect:
    return LlamaCppDialect(ProviderConfig(name="ll", base_url=base_url, kind="llamacpp"), http)


def chat(base_url: str, max_tokens: int = 24, **extra) -> ChatRequest:
    return ChatRequest(base_url=base_url, model="m", max_tokens=max_tokens, extra_body=dict(extra),
                       messages=[{"role": "user", "content": "[a1b2c3] Write a long story about a lighthouse."}])


async def stream(request: ChatRequest) -> StreamResult:
    async with StreamClient(ClientLimits(idle_timeout_s=5, request_timeout_s=20, retries=0)) as client:
        return await client.chat_stream(request)


# -- probe ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
async def test_probe_is_true_only_for_llama_server_kinds(native, http, kind: str) -> None:
    fake = native(kind)
    expected = kind in ("llamacpp", "llama-router", "llama-swap")
    assert await LlamaCppDialect.probe(fake.base_url, http) is expected
    assert await LlamaCppDialect.probe(fake.root, http) is expected  # with or without /v1


async def test_probe_is_false_for_a_plain_openai_server_and_for_nothing(fake, http) -> None:
    server = fake({"m": Script()})
    assert await LlamaCppDialect.probe(server.base_url, http) is False
    assert await LlamaCppDialect.probe(closed_url(), http) is False


# -- model facts ---------------------------------------------------------------------------

async def test_single_server_facts_from_props_and_models_meta(native, http, tmp_path) -> None:
    gguf = tmp_path / "Qwen3-0.6B-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    fake = native("llamacpp", models=[GGUFModel(model_path=str(gguf))])
    d = dialect(fake.base_url, http)
    info = await d.server_info()
    assert info.reachable and info.kind == "llamacpp" and info.version == "b6500-1a2b3c4d"
    assert info.details["mode"] == "single" and info.details["total_slots"] == 1
    [m] = info.models
    assert m.id == "Qwen3-0.6B-Q4_K_M.gguf" and m.state == "loaded"
    assert m.context_length == 8192  # runtime n_ctx, not the training context
    assert m.details["n_ctx_train"] == 40960 and m.details["n_vocab"] == 151_936
    assert m.parameters == 596_049_920 and m.size_bytes == 484_220_928
    assert m.quantization == "Q4_K_M"
    assert m.path == str(gguf)  # the file exists on this machine
    assert len(m.details["chat_template"]) == CHAT_TEMPLATE_CHARS < m.details["chat_template_chars"]
    assert m.details["chat_template_truncated"] is True
    assert d.controls_lifecycle is False


async def test_model_path_that_is_not_on_this_machine_is_kept_only_in_details(native, http) -> None:
    fake = native("llamacpp", models=[GGUFModel(model_path="/nowhere/else/model-f16.gguf")])
    [m] = await dialect(fake.base_url, http).list_models()
    assert m.path is None and m.details["model_path"] == "/nowhere/else/model-f16.gguf"
    assert m.quantization == "F16"


@pytest.mark.parametrize("name, quant", [
    ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
    ("ggml-org/gemma-3-4b-it-GGUF:Q8_0", "Q8_0"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
    ("Kimi-K2-UD-IQ1_S-00001-of-00006.gguf", "IQ1_S"),
    ("qwen2.5-7b-instruct-bf16.gguf", "BF16"),
    ("Qwen3-8B", None),
])
def test_quantization_from_file_name(name: str, quant: str | None) -> None:
    assert quantization_from_name(name) == quant


async def test_unreachable_server_is_reported_not_raised(http) -> None:
    d = dialect(closed_url(), http)
    info = await d.server_info()
    assert info.reachable is False and info.error and info.models == []
    assert d.mode is None  # not decided while nothing answers


# -- requests ------------------------------------------------------------------------------

async def test_speed_body_turns_cache_off_and_ignores_eos(fake, native, http) -> None:
    server = fake({"m": Script(content_tokens=8)})
    d = dialect(native("llamacpp").base_url, http)
    original = chat(server.base_url, seed=7)
    prepared = d.prepare(original, "speed")
    result = await stream(prepared)
    assert result.ok
    body = server.logs[-1].body
    assert body["cache_prompt"] is False and body["ignore_eos"] is True and body["seed"] == 7
    assert body["max_tokens"] == 24
    assert original.extra_body == {"seed": 7}  # the caller's request is not changed


async def test_case_body_is_sent_unchanged(fake, native, http) -> None:
    server = fake({"m": Script(content_tokens=4)})
    d = dialect(native("llamacpp").base_url, http)
    original = chat(server.base_url)
    assert d.prepare(original, "case") is original
    await stream(original)
    body = server.logs[-1].body
    assert "cache_prompt" not in body and "ignore_eos" not in body


async def test_explicit_provider_extra_body_wins(native, http) -> None:
    d = dialect(native("llamacpp").base_url, http)
    prepared = d.prepare(chat("http://127.0.0.1:1/v1", cache_prompt=True), "speed")
    assert prepared.extra_body == {"cache_prompt": True, "ignore_eos": True}


async def test_speed_record_takes_tokens_and_prefill_from_server_timings(fake, native, http) -> None:
    """llama-server's last chunk carries ``timings``; without ``usage`` the record still has the
    server's own counts and prefill rate."""
    server = fake({"m": Script(timings=True, usage="never", content_tokens=40, ttft_s=0.03)})
    d = dialect(native("llamacpp").base_url, http)
    request = d.prepare(chat(server.base_url, max_tokens=16), "speed")
    result = await stream(request)
    await d.finalize(request, result)
    rec = request_record(request, result, None)
    assert rec["ok"] and rec["finish_reason"] == "length" and rec["usage"] is None
    assert rec["token_source"] == "server" and rec["completion_tokens"] == 16
    assert rec["prefill_source"] == "server" and rec["prefill_tps"] > 0
    assert rec["cached_tokens"] == 0


async def test_finalize_keeps_a_cache_hit_visible(native, http) -> None:
    d = dialect(native("llamacpp").base_url, http)
    request = chat("http://127.0.0.1:1/v1")
    result = StreamResult(outcome="finished")
    timings = {"cache_n": 236, "prompt_n": 1, "prompt_ms": 30.9, "predicted_n": 35, "predicted_ms": 661.0}
    result.acc.timings = dict(timings)
    result.acc.finish_reason = "length"
    await d.finalize(request, result)
    assert result.acc.timings == timings
    rec = request_record(request, result, None)
    assert rec["cached_tokens"] == 236 and rec["prompt_tokens"] == 237


# -- lifecycle -----------------------------------------------------------------------------

async def test_single_server_has_no_lifecycle(native, http) -> None:
    d = dialect(native("llamacpp").base_url, http)
    assert await d.loaded_models() is None
    assert await d.load("Qwen3-0.6B-Q4_K_M.gguf") is None
    assert await d.unload("Qwen3-0.6B-Q4_K_M.gguf") is False


def swap_models() -> list[GGUFModel]:
    return [GGUFModel(id="qwen", model_path="/m/qwen-Q4_K_M.gguf", n_ctx=4096),
            GGUFModel(id="llama", model_path="/m/llama-Q8_0.gguf", n_ctx=16384)]


async def test_llama_swap_lists_running_models_with_their_facts(native, http) -> None:
    fake = native("llama-swap", models=swap_models(), loaded=["qwen"])
    d = dialect(fake.base_url, http)
    info = await d.server_info()
    assert info.reachable and info.details["mode"] == "swap" and info.version == "llama-swap v170"
    models = {m.id: m for m in info.models}
    assert models["qwen"].state == "loaded" and models["qwen"].context_length == 4096
    assert models["qwen"].quantization == "Q4_K_M" and models["qwen"].parameters == 596_049_920
    assert models["llama"].state == "not-loaded" and models["llama"].context_length is None
    assert d.controls_lifecycle is True
    # Facts of a stopped model are not fetched: /upstream/<id>/... would start it.
    assert not any(p.startswith("/upstream/llama") for p in fake.paths())
    assert fake.running == ["qwen"]


async def test_llama_swap_load_and_unload(native, http) -> None:
    fake = native("llama-swap", models=swap_models(), loaded=["qwen"])
    d = dialect(fake.base_url, http)
    assert await d.loaded_models() == ["qwen"]
    seconds = await d.load("llama")
    assert isinstance(seconds, float) and seconds >= 0
    assert await d.loaded_models() == ["llama"]
    assert await d.unload("llama") is True
    assert "/api/models/unload/llama" in fake.paths("POST")
    assert await d.loaded_models() == []
    assert await d.unload("no-such-model") is False


async def test_router_mode_lists_statuses_and_loads(native, http) -> None:
    fake = native("llama-router", models=swap_models(), loaded=["qwen"], load_delay_s=0.2)
    d = dialect(fake.base_url, http)
    d.load_poll_s = 0.02
    info = await d.server_info()
    assert info.reachable and info.details["mode"] == "router"
    models = {m.id: m for m in info.models}
    assert models["qwen"].state == "loaded" and models["qwen"].context_length == 4096
    assert models["qwen"].details["args"] == ["llama-server", "-ctx", "4096"]
    assert models["llama"].state == "not-loaded" and models["llama"].quantization == "Q8_0"
    assert info.version == "b6500-1a2b3c4d"  # from the loaded model's /props
    # /props is asked only for the loaded model, and never with autoload.
    queried = [h.query for h in fake.hits if h.path == "/props" and h.query]
    assert queried and all(q == {"model": ["qwen"], "autoload": ["false"]} for q in queried)
    seconds = await d.load("llama")
    assert seconds is not None and seconds >= 0.15  # waited for "loading" to become "loaded"
    assert sorted(await d.loaded_models()) == ["llama", "qwen"]
    assert await d.unload("qwen") is True
    assert await d.loaded_models() == ["llama"]


async def test_router_load_failure_raises(native, http) -> None:
    fake = native("llama-router", models=swap_models(), load_delay_s=0.1)
    fake.failing.add("llama")
    d = dialect(fake.base_url, http)
    d.load_poll_s = 0.02
    with pytest.raises(ModelLoadError, match="llama"):
        await d.load("llama")
    # engine.servers guards lifecycle calls with httpx.HTTPError: a failed load is recorded there.
    assert issubclass(ModelLoadError, httpx.HTTPError)
