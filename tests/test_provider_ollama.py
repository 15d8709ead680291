"""The Ollama dialect against the loopback fake Ollama (tests/fake_ollama.py).

What the tests rely on from Ollama's documentation (ollama/ollama docs/api.md unless noted):

* ``GET /api/version`` -> ``{"version": "..."}`` (docs.ollama.com/api-reference/get-version): the
  probe; a plain OpenAI server (tests.fakeserver.FakeServer) has no such endpoint.
* ``/api/tags`` (name, size, details.quantization_level/parameter_size/family), ``/api/ps``
  (loaded models, size_vram, and context_length per docs.ollama.com/api/ps), ``/api/show``
  (modelfile ``FROM``, ``parameters`` text with ``num_ctx``, ``model_info`` GGUF keys).
* ``/api/chat`` NDJSON stream with ``message.content``/``message.thinking``/``message.tool_calls``
  and a final ``done: true`` line with ``done_reason`` and nanosecond durations
  ("All durations are returned in nanoseconds"); ``options.num_predict``/``temperature``/``seed``.
* Mid-stream errors are a ``{"error": "..."}`` line with the status unchanged
  (docs.ollama.com/api/errors).
* ``/api/generate`` with no prompt loads a model; with ``keep_alive: 0`` unloads it.

Every test is bounded: the fakes stop themselves, the client has short timeouts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from forgetui.config import ProviderConfig
from forgetui.engine.client import ChatRequest, ClientLimits, StreamClient
from forgetui.engine.speed import request_record
from forgetui.providers.base import ModelInfo
from forgetui.providers.ollama import OllamaDialect, context_warning, native_messages, parse_parameters
from tests.fake_ollama import ChatScript, FakeModel, FakeOllama
from tests.conftest import closed_url

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def ollama() -> Iterator[Callable[..., FakeOllama]]:
    started: list[FakeOllama] = []

    def start(*args, **kw) -> FakeOllama:
        kw.setdefault("max_lifetime_s", 30)
        server = FakeOllama(*args, **kw).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def dialect(base_url: str, http: httpx.AsyncClient, **kw) -> OllamaDialect:
    return OllamaDialect(ProviderConfig(name="o", base_url=base_url, kind="ollama", **kw), http)


def chat_request(base_url: str, model: str = "qwen3:8b", max_tokens: int = 64, **kw) -> ChatRequest:
    return ChatRequest(base_url=base_url, model=model, max_tokens=max_tokens,
                       messages=[{"role": "user", "content": "[abc123] tell me a story, please"}], **kw)


async def run_stream(d: OllamaDialect, request: ChatRequest, purpose: str = "speed"):
    prepared = d.prepare(request, purpose)
    async with StreamClient(ClientLimits(idle_timeout_s=5, request_timeout_s=20, retries=0)) as client:
        result = await client.chat_stream(prepared)
    await d.finalize(prepared, result)
    return prepared, result


# -- discovery -------------------------------------------------------------------------------
async def test_probe_is_true_for_ollama_and_false_for_a_plain_openai_server(ollama, fake, http) -> None:
    server = ollama()
    assert await OllamaDialect.probe(server.base_url, http)  # .../v1 -> root /api/version
    assert await OllamaDialect.probe(server.root, http)
    assert server.paths() == ["/api/version", "/api/version"]
    openai = fake()
    assert not await OllamaDialect.probe(openai.base_url, http)
    assert not await OllamaDialect.probe(closed_url(), http)


async def test_version_and_server_info(ollama, http) -> None:
    server = ollama(version="0.9.1")
    d = dialect(server.base_url, http)
    assert await d.version() == "0.9.1"
    info = await d.server_info()
    assert info.reachable and info.kind == "ollama" and info.version == "0.9.1"
    assert [m.id for m in info.models] == ["qwen3:8b"]
    assert info.details["root"] == server.root and info.details["loaded"] == []


async def test_list_models_merges_tags_ps_and_show(ollama, http, tmp_path: Path) -> None:
    blob = tmp_path / "sha256-0123"
    blob.write_bytes(b"GGUF")
    server = ollama([
        FakeModel("qwen3:8b", num_ctx=8192, blob_path=str(blob)),
        FakeModel("llama3.2:1b", family="llama", parameter_size="1.2B", parameter_count=1_235_814_432,
                  quantization_level="Q8_0", size=1_321_098_329, context_trained=131072),
    ])
    d = dialect(server.base_url, http)
    await d.load("qwen3:8b")
    models = {m.id: m for m in await d.list_models()}
    assert set(models) == {"qwen3:8b", "llama3.2:1b"}

    q = models["qwen3:8b"]
    assert q.state == "loaded"
    assert q.context_length == 8192  # what /api/ps says it runs with (= its num_ctx)
    assert q.details["num_ctx"] == 8192 and q.details["context_trained"] == 40960
    assert q.details["context_loaded"] == 8192 and q.details["context_source"] == "loaded"
    assert q.quantization == "Q4_K_M" and q.parameters_label == "8.2B"
    assert q.parameters == 8_190_735_360 and q.size_bytes == 5_225_376_047
    assert q.architecture == "qwen3" and q.path == str(blob)
    assert q.details["size_vram"] > 0 and q.details["parameters"]["stop"] == ["<|im_start|>", "<|im_end|>"]

    ll = models["llama3.2:1b"]
    assert ll.state == "not-loaded" and ll.path is None  # FROM path does not exist here
    assert ll.context_length == 131072 and ll.details["context_source"] == "trained"
    assert ll.details["num_ctx"] is None and ll.details["context_loaded"] is None
    assert ll.quantization == "Q8_0" and ll.parameters == 1_235_814_432 and ll.architecture == "llama"
    # one /api/show per model, no more
    assert sorted(b["model"] for b in server.bodies("/api/show")) == ["llama3.2:1b", "qwen3:8b"]


async def test_not_loaded_model_reports_its_configured_num_ctx(ollama, http) -> None:
    server = ollama([FakeModel("qwen3:8b", num_ctx=16384)])
    (m,) = await dialect(server.base_url, http).list_models()
    assert m.state == "not-loaded" and m.context_length == 16384 and m.details["context_source"] == "num_ctx"


# -- requests ----------------------------------------------------------------------------------
def test_prepare_targets_native_chat_at_the_root(http) -> None:
    d = dialect("http://127.0.0.1:11434/v1", http)
    req = chat_request("http://127.0.0.1:11434/v1", max_tokens=99, temperature=0.0, api_key="k",
                       extra_body={"top_k": 1, "keep_alive": "10m", "options": {"num_ctx": 8192},
                                   "max_tokens": 5, "num_predict": 7, "ignore_eos": True, "model": "x"})
    out = d.prepare(req, "speed")
    assert out is not req and out.native_body is not None
    assert out.base_url == "http://127.0.0.1:11434" and out.path == "/api/chat" and out.wire == "ndjson"
    assert out.api_key == "k" and out.model == "qwen3:8b" and out.max_tokens == 99
    body = out.native_body
    assert body["model"] == "qwen3:8b" and body["stream"] is True and body["messages"] == req.messages
    assert body["keep_alive"] == "10m"
    assert body["options"] == {"temperature": 0.0, "seed": 0, "top_k": 1, "num_ctx": 8192, "num_predict": 99}
    assert "ignore_eos" not in body and "ignore_eos" not in body["options"]
    assert d.ignored_extra_keys == {"max_tokens", "ignore_eos"}
    case = d.prepare(chat_request("http://h:1/v1", temperature=0.7), "case").native_body
    assert case["options"] == {"temperature": 0.7, "num_predict": 64} and "keep_alive" not in case


def test_native_messages_and_parameters() -> None:
    msgs = native_messages([
        {"role": "user", "content": [{"type": "text", "text": "look: "},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "name": "f", "content": "2", "tool_call_id": "c1"},
    ])
    assert msgs[0] == {"role": "user", "content": "look: ", "images": ["QUJD"]}
    assert msgs[1]["content"] == "" and msgs[1]["tool_calls"] == [{"function": {"name": "f", "arguments": {"a": 1}}}]
    assert msgs[2]["tool_name"] == "f"
    assert parse_parameters('num_ctx    4096\nstop   "<a>"\nstop "<b>"\ntemperature 0.6') == {
        "num_ctx": 4096, "stop": ["<a>", "<b>"], "temperature": 0.6}


async def test_stream_through_the_real_client_gives_server_timings(ollama, http) -> None:
    server = ollama(script=ChatScript(thinking_tokens=3, content_tokens=8, gap_s=0.01, prefill_s=0.04))
    d = dialect(server.base_url, http)
    request = chat_request(server.base_url, max_tokens=64)
    prepared, result = await run_stream(d, request)
    acc = result.acc
    assert result.outcome == "finished" and result.ok, result.error
    assert acc.content == "".join(f"word{i} " for i in range(8))
    assert acc.reasoning == "think0 think1 think2 "
    assert acc.finish_reason == "stop"
    (log,) = server.streams
    final = log.final
    assert acc.usage == {"prompt_tokens": final["prompt_eval_count"], "completion_tokens": 11}
    t = acc.timings
    assert t["source"] == "ollama" and t["prompt_n"] == final["prompt_eval_count"] > 0
    assert t["prompt_ms"] == final["prompt_eval_duration"] / 1e6 and t["prompt_ms"] >= 40
    assert t["predicted_n"] == 11 and t["predicted_ms"] == final["eval_duration"] / 1e6
    assert t["load_ms"] == final["load_duration"] / 1e6
    # what went over the wire
    (sent,) = server.bodies("/api/chat")
    assert sent["options"] == {"temperature": 0.0, "seed": 0, "num_predict": 64} and sent["stream"] is True
    rec = request_record(prepared, result, None)
    assert rec["prefill_source"] == "server" and rec["token_source"] == "usage"
    assert rec["prefill_tps"] == pytest.approx(t["prompt_n"] / (t["prompt_ms"] / 1000))
    assert rec["decode_tps"] and rec["decode_tps"] > 0 and rec["events"] == 11
    # the server's own decode rate and ours agree (same lines, loopback)
    server_rate = (11 - 1) / ((log.token_ns[-1] - log.token_ns[0]) / 1e9)
    assert rec["decode_tps"] == pytest.approx(server_rate, rel=0.2)


async def test_num_predict_cap_finishes_with_length(ollama, http) -> None:
    server = ollama(script=ChatScript(content_tokens=20, gap_s=0.0, prefill_s=0.0))
    _, result = await run_stream(dialect(server.base_url, http), chat_request(server.base_url, max_tokens=5))
    assert result.ok and result.acc.finish_reason == "length" and result.acc.usage["completion_tokens"] == 5


async def test_tool_calls_come_through(ollama, http) -> None:
    server = ollama(script=ChatScript(content_tokens=0, gap_s=0.0, prefill_s=0.0,
                                      tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}]))
    _, result = await run_stream(dialect(server.base_url, http), chat_request(server.base_url), "case")
    (call,) = result.acc.tool_calls
    assert result.ok and call.name == "get_weather" and call.as_dict()["arguments_parsed"] == {"city": "Paris"}


async def test_cached_prompt_without_prompt_eval_claims_no_prefill(ollama, http) -> None:
    server = ollama(script=ChatScript(content_tokens=4, gap_s=0.005, prefill_s=0.0, omit_prompt_eval=True))
    prepared, result = await run_stream(dialect(server.base_url, http), chat_request(server.base_url))
    assert result.ok
    assert "prompt_n" not in result.acc.timings and "prompt_ms" not in result.acc.timings
    assert result.acc.timings["predicted_n"] == 4
    rec = request_record(prepared, result, None)
    assert rec["prefill_source"] is None and rec["prefill_tps"] is None


async def test_error_line_mid_stream_is_a_server_error(ollama, http) -> None:
    server = ollama(script=ChatScript(content_tokens=10, gap_s=0.0, prefill_s=0.0, error_after=3))
    _, result = await run_stream(dialect(server.base_url, http), chat_request(server.base_url))
    assert result.outcome == "server_error" and not result.ok
    assert "an error was encountered while running the model" in result.error
    assert result.acc.content == "word0 word1 word2 " and result.acc.timings is None


# -- lifecycle ---------------------------------------------------------------------------------
async def test_load_and_unload_change_ps(ollama, http) -> None:
    server = ollama(script=ChatScript(load_s=0.05))
    d = dialect(server.base_url, http)
    assert await d.loaded_models() == []
    seconds = await d.load("qwen3:8b")
    assert seconds > 0 and seconds == d.last_load["server_s"]  # the server's load_duration
    assert 0.05 <= d.last_load["server_s"] <= d.last_load["wall_s"]
    assert await d.loaded_models() == ["qwen3:8b"]
    assert server.bodies("/api/generate")[-1] == {"model": "qwen3:8b", "keep_alive": "30m"}
    assert await d.unload("qwen3:8b") is True
    assert await d.loaded_models() == []
    assert server.bodies("/api/generate")[-1] == {"model": "qwen3:8b", "keep_alive": 0}


async def test_load_without_load_duration_returns_wall_time(ollama, http) -> None:
    server = ollama(script=ChatScript(load_s=0.03), report_load_duration=False)
    d = dialect(server.base_url, http)
    seconds = await d.load("qwen3:8b")
    assert d.last_load["server_s"] is None and seconds == d.last_load["wall_s"] >= 0.03


async def test_load_of_an_unknown_model_raises(ollama, http) -> None:
    server = ollama()
    with pytest.raises(httpx.HTTPStatusError):
        await dialect(server.base_url, http).load("nope:1b")


async def test_unreachable_server_is_reported_not_raised(http) -> None:
    d = dialect(closed_url(), http)
    info = await d.server_info()
    assert info.reachable is False and info.error and "Connect" in info.error
    assert await d.loaded_models() is None


# -- context ---------------------------------------------------------------------------------
def test_context_warning() -> None:
    configured = ModelInfo(id="m", context_length=4096,
                           details={"num_ctx": 4096, "context_trained": 40960, "context_loaded": None})
    assert context_warning(configured, 3000) is None
    text = context_warning(configured, 6000)
    assert text and "4096" in text and "6000" in text and "num_ctx" in text
    loaded = ModelInfo(id="m", details={"num_ctx": None, "context_loaded": 8192, "context_trained": 40960})
    assert context_warning(loaded, 8000) is None and "loaded" in context_warning(loaded, 9000)
    small = ModelInfo(id="m", details={"num_ctx": 65536, "context_trained": 32768})
    assert "trained" in context_warning(small, 40000)
    unknown = ModelInfo(id="m", details={"num_ctx": None, "context_loaded": None, "context_trained": 40960})
    assert context_warning(unknown, 1000) is None
    assert "default" in context_warning(unknown, 10000)


# -- the fake itself ---------------------------------------------------------------------------
def test_fake_stops_itself_after_its_lifetime() -> None:
    server = FakeOllama(max_lifetime_s=0.2).start()
    try:
        assert httpx.get(server.root + "/v1/models", timeout=2).json()["data"][0]["id"] == "qwen3:8b"
        deadline = time.monotonic() + 5
        while server.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.running
    finally:
        server.stop()
