"""The LM Studio dialect against the fake LM Studio (tests/fake_lmstudio.py).

What the dialect and these tests rely on, from LM Studio's docs (repository lmstudio-ai/docs,
folder ``1_developer/2_rest``; https://lmstudio.ai/docs/developer/rest):

* ``list.md``: ``GET /api/v1/models`` -> ``models[]`` with ``key``, ``type`` (llm | embedding),
  ``architecture``, ``quantization {name, bits_per_weight}``, ``size_bytes``, ``params_string``,
  ``loaded_instances [{id, config {context_length}}]``, ``max_context_length``, ``format``.
* ``load.md`` / ``unload.md``: ``POST /api/v1/models/load {model}`` -> ``load_time_seconds``;
  ``POST /api/v1/models/unload {instance_id}``.
* ``endpoints.md`` (REST API v0, deprecated): ``GET /api/v0/models`` -> ``data[]`` with ``id``,
  ``type`` (llm | vlm | embeddings), ``arch``, ``quantization``, ``state`` (loaded | not-loaded),
  ``max_context_length``; ``POST /api/v0/chat/completions`` adds ``stats {tokens_per_second,
  time_to_first_token, generation_time, stop_reason}``, ``model_info`` and ``runtime``.
* API changelog (0.3.18): streams carry ``usage`` when ``stream_options.include_usage`` is true.
* lmstudio-ai/lmstudio-bug-tracker#618, #1323: unknown endpoints answer HTTP 200 with
  ``{"error": "Unexpected endpoint or method. ..."}`` -- which is how a v0-only LM Studio (0.3.x)
  answers ``/api/v1/models``; #676: some 0.3.x streams carry no ``stats``.
"""

from __future__ import annotations

from typing import Callable, Iterator

import httpx
import pytest

from forgetui.config import ProviderConfig
from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient
from forgetui.engine.speed import request_record
from forgetui.providers.lmstudio import LMStudioAPIError, LMStudioDialect
from tests.fake_lmstudio import ChatScript, FakeLMStudio
from tests.fakeserver import Script
from tests.conftest import closed_url

pytestmark = pytest.mark.timeout(30)

LLAMA = "meta-llama-3.1-8b-instruct"
GEMMA = "gemma-3-270m-it-qat"
VLM = "qwen2-vl-7b-instruct"
EMBED = "text-embedding-nomic-embed-text-v1.5"


@pytest.fixture
def lmstudio() -> Iterator[Callable[..., FakeLMStudio]]:
    servers: list[FakeLMStudio] = []

    def start(**kw) -> FakeLMStudio:
        kw.setdefault("max_lifetime_s", 30)
        server = FakeLMStudio(**kw).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def dialect(base_url: str, http: httpx.AsyncClient) -> LMStudioDialect:
    return LMStudioDialect(ProviderConfig(name="lms", base_url=base_url, kind="lmstudio"), http)


# -- detection ----------------------------------------------------------------------------------
async def test_probe_detects_lmstudio_v1_and_v0_only(lmstudio, http) -> None:
    v1 = lmstudio()
    v0 = lmstudio(v0_only=True)
    assert await LMStudioDialect.probe(v1.base_url, http)
    assert await LMStudioDialect.probe(v1.root, http)  # base URL given without /v1
    assert await LMStudioDialect.probe(v0.base_url, http)
    assert v1.paths() == ["/api/v1/models", "/api/v1/models"]  # v1 answered: v0 not asked
    assert v0.paths() == ["/api/v1/models", "/api/v0/models"]


async def test_detection_picks_lmstudio_although_it_answers_every_path_with_200(lmstudio, http) -> None:
    # Dialects probed before LM Studio must judge bodies, not the status: the fake answers their
    # paths (/api/version, /props, ...) with 200 and an "Unexpected endpoint" error, as LM Studio does.
    from forgetui.providers import detect_kind

    assert await detect_kind(lmstudio().base_url, http) == "lmstudio"
    assert await detect_kind(lmstudio(v0_only=True).base_url, http) == "lmstudio"


async def test_probe_is_false_for_a_plain_openai_server_and_an_unreachable_one(fake, http) -> None:
    server = fake({"m": Script()})
    assert not await LMStudioDialect.probe(server.base_url, http)
    assert [log.path for log in server.logs] == ["/api/v1/models", "/api/v0/models"]
    assert not await LMStudioDialect.probe(closed_url(), http)


async def test_probe_rejects_an_error_body_answered_with_200(lmstudio, http) -> None:
    # A v0-only server with no models: /api/v1 is an "unexpected endpoint" (200 + error), and an
    # empty v0 list is too generic to call it LM Studio.
    server = lmstudio(models=[], v0_only=True)
    assert not await LMStudioDialect.probe(server.base_url, http)


# -- model facts --------------------------------------------------------------------------------
async def test_list_models_v1_facts(lmstudio, http) -> None:
    server = lmstudio(loaded={GEMMA: 8192, EMBED: 2048})
    d = dialect(server.base_url, http)
    models = {m.id: m for m in await d.list_models()}
    assert set(models) == {LLAMA, GEMMA, VLM}  # the embedding model is left out
    gemma, llama = models[GEMMA], models[LLAMA]
    assert gemma.state == "loaded" and gemma.context_length == 8192  # the loaded context
    assert llama.state == "not-loaded" and llama.context_length == 131072  # the max
    assert gemma.quantization == "Q4_0" and gemma.parameters_label == "270M"
    assert gemma.size_bytes == 241_410_208 and gemma.architecture == "gemma3"
    assert gemma.parameters is None  # only a rounded label is given
    assert gemma.details["type"] == "llm" and gemma.details["api"] == "v1"
    assert gemma.details["max_context_length"] == 32768 and gemma.details["bits_per_weight"] == 4
    assert gemma.details["instances"] == [{"id": GEMMA, "config": {"context_length": 8192}}]
    assert models[VLM].details["format"] == "mlx" and models[VLM].details["capabilities"]["vision"]
    assert d.api == "v1" and d.has_v0 is True
    assert server.paths() == ["/api/v1/models", "/api/v0/models"]  # v0 asked once, for its chat
    await d.list_models()
    assert server.paths()[2:] == ["/api/v1/models"]


async def test_list_models_v0_only_facts(lmstudio, http) -> None:
    server = lmstudio(v0_only=True, loaded={GEMMA: 8192, EMBED: 2048})
    d = dialect(server.base_url, http)
    models = {m.id: m for m in await d.list_models()}
    assert set(models) == {LLAMA, GEMMA, VLM}
    gemma, llama, vlm = models[GEMMA], models[LLAMA], models[VLM]
    assert gemma.state == "loaded" and gemma.context_length == 8192  # loaded_context_length
    assert llama.state == "not-loaded" and llama.context_length == 131072
    assert gemma.quantization == "Q4_0" and gemma.architecture == "gemma3"
    assert gemma.size_bytes is None and gemma.parameters_label is None  # v0 does not tell
    assert vlm.details["type"] == "vlm" and vlm.details["format"] == "mlx" and vlm.quantization == "4bit"
    assert gemma.details["api"] == "v0" and d.api == "v0"
    assert d.controls_lifecycle is False and LMStudioDialect.controls_lifecycle is True


async def test_server_info_reports_the_api_and_no_version(lmstudio, http) -> None:
    v1 = await dialect(lmstudio().base_url, http).server_info()
    assert v1.reachable and v1.kind == "lmstudio" and v1.version is None
    assert v1.details["api"] == "v1" and [m.id for m in v1.models] == [LLAMA, GEMMA, VLM]
    d0 = dialect(lmstudio(v0_only=True).base_url, http)
    v0 = await d0.server_info()
    assert v0.reachable and v0.details["api"] == "v0" and v0.details["lifecycle"] == "none (v0 only)"
    assert v1.details["chat_endpoint"] == v0.details["chat_endpoint"] == "/api/v0/chat/completions"


async def test_unreachable_server_is_reported_not_raised(http) -> None:
    d = dialect(closed_url(), http)
    info = await d.server_info()
    assert info.reachable is False and info.error and "ConnectError" in info.error
    assert await d.loaded_models() is None


async def test_without_the_native_api_it_falls_back_to_the_openai_endpoints(fake, http) -> None:
    # kind = "lmstudio" configured for a server (or proxy) that answers only the OpenAI paths.
    server = fake({"m": Script(content_tokens=3)})
    d = dialect(server.base_url, http)
    info = await d.server_info()
    assert info.reachable and [m.id for m in info.models] == ["m"] and info.details["api"] == "openai"
    assert info.details["chat_endpoint"] == "/v1/chat/completions"
    assert d.controls_lifecycle is False and await d.loaded_models() is None
    request = chat(server.base_url, model="m")
    assert d.prepare(request, "speed") is request  # stays on the OpenAI endpoint


async def test_v1_server_without_v0_keeps_chats_on_the_openai_endpoint(lmstudio, http) -> None:
    server = lmstudio()
    d = dialect(server.base_url, http)
    real_get = d._get

    async def get_without_v0(path: str):
        if path.startswith("/api/v0/"):  # a future LM Studio that dropped the deprecated v0 API
            return 200, {"error": f"Unexpected endpoint or method. (GET {path})"}
        return await real_get(path)

    d._get = get_without_v0  # type: ignore[method-assign]
    assert {m.id for m in await d.list_models()} == {LLAMA, GEMMA, VLM}
    assert d.api == "v1" and d.has_v0 is False and d.controls_lifecycle is True
    request = chat(server.base_url)
    assert d.prepare(request, "speed") is request


# -- requests -----------------------------------------------------------------------------------
def chat(base_url: str, model: str = LLAMA, max_tokens: int = 64) -> ChatRequest:
    return ChatRequest(base_url=base_url, model=model, max_tokens=max_tokens,
                       messages=[{"role": "user", "content": "Tell me about the sea, briefly. " * 8}])


def test_prepare_sends_to_the_v0_chat_endpoint_and_keeps_the_openai_body() -> None:
    d = LMStudioDialect(ProviderConfig(name="x", base_url="http://127.0.0.1:1234/v1"), None)  # type: ignore[arg-type]
    request = chat("http://127.0.0.1:1234/v1")
    prepared = d.prepare(request, "speed")
    assert prepared is not request and request.path == "/chat/completions"  # original untouched
    assert prepared.base_url == "http://127.0.0.1:1234" and prepared.path == "/api/v0/chat/completions"
    assert prepared.native_body is None and prepared.wire == "sse"
    assert prepared.body(True) == request.body(True)
    assert d.prepare(request, "case") is request  # graded cases stay on the OpenAI endpoint


async def run_stream(server: FakeLMStudio, http: httpx.AsyncClient, **kw):
    d = dialect(server.base_url, http)
    request = d.prepare(chat(server.base_url, **kw), "speed")
    async with StreamClient(ClientLimits(idle_timeout_s=5, request_timeout_s=15, retries=0)) as client:
        result = await client.chat_stream(request)
    await d.finalize(request, result)
    return d, request, result


async def test_stream_finalize_gives_server_prefill_and_usage_tokens(lmstudio, http) -> None:
    server = lmstudio(loaded={LLAMA: 4096}, chat=ChatScript(ttft_s=0.06, gaps_s=[0.004, 0.012], content_tokens=10))
    d, request, result = await run_stream(server, http)
    log = server.requests[-1]
    assert log.path == "/api/v0/chat/completions" and log.body["stream"] is True
    assert log.body["stream_options"] == {"include_usage": True}
    assert result.ok, result.error
    t = result.acc.timings
    usage = result.acc.usage
    assert t["source"] == "lmstudio"
    assert t["prompt_n"] == usage["prompt_tokens"] and t["predicted_n"] == usage["completion_tokens"] == 10
    assert t["prompt_ms"] == pytest.approx(log.stats["time_to_first_token"] * 1000)
    assert t["predicted_ms"] == pytest.approx(log.stats["generation_time"] * 1000)
    assert t["tokens_per_second"] == log.stats["tokens_per_second"] and t["stop_reason"] == "eosFound"
    assert 50 <= t["prompt_ms"] <= 500  # the fake's own clock: about the scripted 60 ms
    assert d.runtime and d.runtime["version"] == "1.3.0"
    rec = request_record(request, result, None)
    assert rec["prefill_source"] == "server" and rec["token_source"] == "usage"
    assert rec["prefill_tps"] == pytest.approx(usage["prompt_tokens"] / (t["prompt_ms"] / 1000))
    assert rec["completion_tokens"] == 10 and rec["finish_reason"] == "stop"
    # The client's TTFT and the server's agree to within loopback and scheduling noise.
    assert abs(rec["ttft_s"] - log.stats["time_to_first_token"]) < 0.05
    assert (await d.server_info()).details["runtime"]["name"].startswith("llama.cpp")


async def test_length_capped_stream_reports_lmstudios_stop_reason(lmstudio, http) -> None:
    server = lmstudio(loaded={LLAMA: 4096}, chat=ChatScript(ttft_s=0.01, content_tokens=20))
    _, request, result = await run_stream(server, http, max_tokens=5)
    assert result.acc.finish_reason == "length"
    assert result.acc.timings["stop_reason"] == "maxPredictedTokensReached"
    assert result.acc.timings["predicted_n"] == 5


async def test_finalize_without_usage_leaves_counts_alone(lmstudio, http) -> None:
    server = lmstudio(loaded={LLAMA: 4096}, chat=ChatScript(ttft_s=0.01, usage="never"))
    _, request, result = await run_stream(server, http)
    t = result.acc.timings
    assert result.acc.usage is None and t["source"] == "lmstudio" and t["prompt_ms"] > 0
    assert "prompt_n" not in t and "predicted_n" not in t
    rec = request_record(request, result, None)
    assert rec["prefill_source"] is None and rec["token_source"] == "estimate"


async def test_stream_without_stats_is_left_to_the_clients_numbers(lmstudio, http) -> None:
    server = lmstudio(loaded={LLAMA: 4096}, chat=ChatScript(ttft_s=0.01, stats=False))
    _, request, result = await run_stream(server, http)
    assert result.ok and result.acc.timings is None and result.acc.usage is not None
    rec = request_record(request, result, None)
    assert rec["prefill_source"] is None and rec["token_source"] == "usage"


# -- lifecycle ----------------------------------------------------------------------------------
async def test_load_and_unload_with_v1(lmstudio, http) -> None:
    server = lmstudio(loaded={GEMMA: 8192, EMBED: 2048}, load_delay_s=0.05)
    d = dialect(server.base_url, http)
    assert await d.loaded_models() == [GEMMA, EMBED]  # embeddings take memory too
    seconds = await d.load(LLAMA)
    load_log = next(r for r in server.requests if r.path == "/api/v1/models/load")
    assert load_log.body == {"model": LLAMA}
    assert seconds == d.last_load["load_time_seconds"] and d.last_load["source"] == "server"
    assert 0.05 <= seconds < 5.0 and d.last_load["wall_s"] >= seconds - 0.001
    assert d.last_load["model_instance_id"] == LLAMA and d.last_load["config"]["context_length"] == 4096
    assert set(await d.loaded_models()) == {GEMMA, EMBED, LLAMA}
    assert await d.unload(GEMMA) is True
    unload_log = next(r for r in server.requests if r.path == "/api/v1/models/unload")
    assert unload_log.body == {"instance_id": GEMMA}
    assert server.loaded_keys() == [LLAMA, EMBED]
    assert await d.unload(GEMMA) is False  # nothing of it is loaded any more
    models = {m.id: m for m in await d.list_models()}
    assert models[LLAMA].state == "loaded" and models[LLAMA].context_length == 4096
    assert models[GEMMA].state == "not-loaded"


async def test_load_passes_config_and_does_not_load_twice(lmstudio, http) -> None:
    server = lmstudio()
    d = dialect(server.base_url, http)
    assert await d.load(GEMMA, {"context_length": 16384}) is not None
    assert server.instances[GEMMA][0].config["context_length"] == 16384
    loads = len(server.paths("POST"))
    assert await d.load(GEMMA) == 0.0 and d.last_load["source"] == "already-loaded"
    assert len(server.paths("POST")) == loads and len(server.instances[GEMMA]) == 1


async def test_load_time_falls_back_to_wall_time_when_the_server_gives_none(lmstudio, http) -> None:
    server = lmstudio(report_load_time=False, load_delay_s=0.05)
    d = dialect(server.base_url, http)
    seconds = await d.load(LLAMA)
    assert d.last_load["source"] == "measured" and d.last_load["load_time_seconds"] is None
    assert 0.05 <= seconds < 2.0 and seconds == d.last_load["wall_s"]


async def test_unload_removes_every_instance_of_a_key_or_one_instance(lmstudio, http) -> None:
    server = lmstudio(loaded={LLAMA: 4096})
    server._load(LLAMA, None)  # a second instance, as LM Studio names it: KEY:2
    assert [i.id for i in server.instances[LLAMA]] == [LLAMA, f"{LLAMA}:2"]
    d = dialect(server.base_url, http)
    assert await d.loaded_models() == [LLAMA]  # one key, however many instances
    assert await d.unload(f"{LLAMA}:2") is True and [i.id for i in server.instances[LLAMA]] == [LLAMA]
    server._load(LLAMA, None)
    assert await d.unload(LLAMA) is True and server.instances[LLAMA] == []


async def test_load_of_an_unknown_model_raises_an_http_error(lmstudio, http) -> None:
    d = dialect(lmstudio().base_url, http)
    with pytest.raises(LMStudioAPIError, match="model_not_found|not found") as info:
        await d.load("no-such-model")
    assert isinstance(info.value, httpx.HTTPError)  # what engine.servers guards lifecycle calls with


async def test_v0_only_lifecycle_is_honest(lmstudio, http) -> None:
    server = lmstudio(v0_only=True, loaded={GEMMA: 8192})
    d = dialect(server.base_url, http)
    assert await d.loaded_models() == [GEMMA]  # v0 still reports each model's state
    assert await d.load(LLAMA) is None
    assert await d.unload(GEMMA) is False
    assert server.loaded_keys() == [GEMMA]
    assert all(r.method == "GET" for r in server.requests)  # nothing was asked to change


async def test_stream_through_v0_only_server(lmstudio, http) -> None:
    server = lmstudio(v0_only=True, chat=ChatScript(ttft_s=0.01, content_tokens=4))
    _, request, result = await run_stream(server, http)  # not loaded: LM Studio loads it just in time
    assert result.ok and result.acc.timings["predicted_n"] == 4
    assert server.loaded_keys() == [LLAMA]
    assert request_record(request, result, None)["prefill_source"] == "server"


def test_fake_records_and_stops_by_itself() -> None:
    server = FakeLMStudio(max_lifetime_s=0.3, max_requests=2).start()
    try:
        with httpx.Client(timeout=2) as client:
            assert client.get(server.root + "/v1/models").json()["data"][0]["id"] == LLAMA
            assert client.get(server.root + "/nope").json() == {
                "error": "Unexpected endpoint or method. (GET /nope)"}
            assert client.get(server.root + "/api/v0/models").status_code == 503  # over the cap
        assert server.paths() == ["/v1/models", "/nope"]
        server._thread.join(3)
        assert not server._thread.is_alive()
    finally:
        server.stop()
