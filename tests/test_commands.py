"""`forgetui status`, `models`, `bench`, and the lifecycle of a run against a server that can load
and unload models (the fake Ollama): isolate, record load time, restore."""

from __future__ import annotations

import json
import time
import textwrap
from pathlib import Path

import pytest

from forgetui.cli import main
from tests.fake_ollama import ChatScript, FakeModel, FakeOllama
from tests.fakeserver import Script
from tests.conftest import closed_url


def write_config(home: Path, text: str) -> Path:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def ollama():
    server = FakeOllama(
        models=[FakeModel("qwen3:8b"), FakeModel("llama3:8b", quantization_level="Q8_0", parameter_size="8.0B",
                                                  parameter_count=8_030_261_248)],
        script=ChatScript(content_tokens=6, gap_s=0.005, prefill_s=0.02, load_s=0.05),
        max_lifetime_s=60,
    ).start()
    yield server
    server.stop()


def test_status_without_providers_says_what_to_do(home, capsys) -> None:
    assert main(["status"]) == 2
    out = capsys.readouterr().out
    assert "forgetui config --init" in out and "runs:" in out and "sandbox:" in out


def test_status_reports_each_provider_kind_and_down_ones(home, fake, ollama, capsys) -> None:
    server = fake({"m": Script()})
    write_config(home, f"""
        [[providers]]
        name = "plain"
        base_url = "{server.base_url}"
        [[providers]]
        name = "oll"
        base_url = "{ollama.base_url}"
        [[providers]]
        name = "gone"
        base_url = "{closed_url()}"
        """)
    assert main(["status"]) == 3  # something needed is missing: a provider is down
    out = capsys.readouterr().out
    assert "plain" in out and "openai (detected)" in out
    assert "ollama 0.12.6 (detected), 2 model(s)" in out
    assert "gone" in out and "DOWN" in out and "fix: start the server" in out


def test_models_lists_facts_from_every_provider(home, ollama, capsys) -> None:
    write_config(home, f"""
        [[providers]]
        name = "oll"
        base_url = "{ollama.base_url}"
        kind = "ollama"
        """)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert "Q4_K_M" in rows["oll/qwen3:8b"] and "8.2B" in rows["oll/qwen3:8b"]
    assert "Q8_0" in rows["oll/llama3:8b"] and "5.2 GB" in rows["oll/qwen3:8b"]


def test_bench_runs_one_configured_model_and_saves_its_profile(home, fake, capsys) -> None:
    server = fake({"small": Script(content_tokens=20, gap_s=0.001)})
    write_config(home, f"""
        [[providers]]
        name = "rig"
        base_url = "{server.base_url}"
        """)
    assert main(["bench", "rig/small", "--quick", "--speed-only"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("Results saved: ")
    assert "rig/small: " in out  # the model facts line
    run_dir = next((home / "data" / "runs").iterdir())
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["profile"]["models"]["targets"] == ["rig/small"]
    assert [p["name"] for p in doc["models"][0]["speed"]["prompts"]] == ["short", "medium"]
    assert (home / "data" / "profiles" / "bench-rig-small-quick.toml").exists()


def test_bench_refuses_unknown_provider(home, capsys) -> None:
    assert main(["bench", "nope/model"]) == 2
    assert "known: none" in capsys.readouterr().err


def test_bench_runs_the_quick_cases_by_default(home, fake, capsys) -> None:
    server = fake({"small": Script(content_text="Final answer: 3", gap_s=0.001)})
    write_config(home, f"""
        [[providers]]
        name = "rig"
        base_url = "{server.base_url}"
        """)
    assert main(["bench", "rig/small", "--quick"]) == 1  # the fake answers every case wrongly
    out = capsys.readouterr().out
    assert "Ability Score: 0/5" in out and "Agent Fitness Score: 0/3" in out and "Variant quick.agent.counts: fail" in out
    assert main(["bench", "rig/small", "--cases", "nosuchset"]) == 2


@pytest.mark.parametrize("restore", [False, True])
def test_run_isolates_the_target_records_load_time_and_restores(home, ollama, write_profile, capsys, restore) -> None:
    ollama.loaded["llama3:8b"] = time.time() + 3600  # another model is in memory before the run
    path = write_profile(textwrap.dedent(f"""\
        name = "iso"
        [[providers]]
        name = "oll"
        base_url = "{ollama.base_url}"
        [models]
        targets = ["oll/qwen3:8b"]
        [speed]
        prompts = ["short"]
        warmup = 0
        repeats = 2
        max_tokens = 6
        prefill_baseline = false
        [lifecycle]
        isolate = true
        restore = {str(restore).lower()}
        """))
    assert main(["--run", str(path)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(next((home / "data" / "runs").iterdir()).joinpath("run.json").read_text())
    model = doc["models"][0]
    life = model["lifecycle"]
    assert doc["fingerprint"]["servers"]["oll"]["kind"] == "ollama"
    assert life["controlled"] and life["unloaded"] == ["llama3:8b"] and life["load_s"] > 0
    assert "loaded in" in out and "after unloading llama3:8b" in out
    requests = model["speed"]["prompts"][0]["requests"]
    assert all(r["ok"] and r["prefill_source"] == "server" for r in requests)
    generate = [b for b in ollama.bodies("/api/generate")]
    assert {"model": "llama3:8b", "keep_alive": 0} in generate
    if restore:
        assert life["restored"] == ["llama3:8b"] and "llama3:8b" in ollama.loaded
        assert "qwen3:8b" not in ollama.loaded  # it was not loaded before the run
    else:
        assert "restored" not in life and "llama3:8b" not in ollama.loaded


def test_context_warning_reaches_the_run(home, write_profile, capsys) -> None:
    server = FakeOllama(models=[FakeModel("tiny:1b", num_ctx=128)], max_lifetime_s=30).start()
    try:
        path = write_profile(textwrap.dedent(f"""\
            name = "ctx"
            [[providers]]
            name = "oll"
            base_url = "{server.base_url}"
            [models]
            targets = ["oll/tiny:1b"]
            [speed]
            prompts = ["long"]
            warmup = 0
            repeats = 1
            max_tokens = 8
            prefill_baseline = false
            """))
        main(["--run", str(path)])
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "128-token context" in err and "silently" in err


def test_status_counts_cases_per_set(home, capsys) -> None:
    main(["status"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("cases:"))
    assert "quick 9" in line and "standard 61" in line
