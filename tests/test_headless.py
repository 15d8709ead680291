"""End to end: `forgetui --run` against the loopback fake server, faults, secrets, kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forgetui.cli import main
from forgetui.store import read_records
from tests.conftest import profile_text, closed_url
from tests.fakeserver import Script

SRC = Path(__file__).resolve().parents[1] / "src"


def run_dirs(home: Path) -> list[Path]:
    return sorted((home / "data" / "runs").iterdir())


def test_full_run_with_faults_completes_and_records_every_request(fake, home, write_profile, capsys, tmp_path) -> None:
    server = fake({
        "good": Script(content_tokens=12, gap_s=0.002),
        "flaky": Script(content_tokens=12, gap_s=0.002,
                        faults={1: "drop", 2: "429", 4: "500", 5: "500", 6: "500", 7: "malformed", 8: "stall"},
                        stall_s=5),
    })
    path = write_profile(profile_text(server.base_url, ["fake/good", "fake/flaky"], repeats=3,
                                      prompts='["short", "medium"]',
                                      limits="idle_timeout_s = 0.5\nrequest_timeout_s = 20\nretries = 2\n"))
    out_json = tmp_path / "out.json"
    code = main(["--run", str(path), "--json-out", str(out_json)])
    out, err = capsys.readouterr()
    assert code == 1  # some requests failed, the run still completed
    assert out.strip().splitlines()[-1].startswith("Results saved: ")
    run_dir = run_dirs(home)[0]
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "complete" and doc["schema_version"] == 1
    assert json.loads(out_json.read_text())["models"] == doc["models"]
    good, flaky = doc["models"]
    assert all(r["ok"] for p in good["speed"]["prompts"] for r in p["requests"])
    outcomes = [r["outcome"] for p in flaky["speed"]["prompts"] for r in p["requests"]]
    # request 1 dropped; 2 got 429 and was retried as request 3; 4-6 are three 500s (one request);
    # 7 malformed (finished but untrusted); 8 stalled; then two clean ones.
    assert outcomes == ["truncated", "finished", "http_error", "finished", "idle_timeout", "finished"]
    flaky_reqs = [r for p in flaky["speed"]["prompts"] for r in p["requests"]]
    assert [r["ok"] for r in flaky_reqs] == [False, True, False, False, False, True]
    assert flaky["speed"]["prompts"][0]["summary"]["flags"] == ["2 failed"]
    assert "truncated: connection dropped mid-stream" in err
    records = read_records(run_dir / "records.jsonl").records
    assert len(records) == 12 and [r["seq"] for r in records] == list(range(12))
    assert doc["totals"] == {**doc["totals"], "requests": 12, "ok": 8, "errors": 4}
    assert "flaky" in out and "good" in out


def test_clean_run_exits_zero_and_reports_speed(fake, home, write_profile, capsys) -> None:
    server = fake(default=Script(ttft_s=0.03, content_tokens=16, gap_s=0.003))
    path = write_profile(profile_text(server.base_url, ["fake/a"], warmup=1, repeats=2))
    assert main(["run", str(path)]) == 0
    doc = json.loads((run_dirs(home)[0] / "run.json").read_text())
    prompt = doc["models"][0]["speed"]["prompts"][0]
    assert prompt["name"] == "short" and prompt["prompt_chars"] > 40
    assert len(prompt["requests"]) == 2 and len(prompt["warmup"]) == 1
    assert prompt["summary"]["ttft_s"]["median"] == pytest.approx(0.03, abs=0.02)
    server_facts = doc["fingerprint"]["servers"]["fake"]
    assert server_facts["reachable"] and server_facts["kind"] == "openai" and server_facts["kind_detected"]
    bodies = [log.body for log in server.logs if log.path.endswith("/chat/completions")]
    nonces = [b["messages"][0]["content"].split("]")[0] for b in bodies]
    assert len(set(nonces)) == len(nonces) == 3  # every prompt unique: no prefix cache can serve it
    assert all(b["temperature"] == 0 and b["max_tokens"] == 16 for b in bodies)


def test_unreachable_provider_exits_with_connection_code(home, write_profile, capsys) -> None:
    path = write_profile(profile_text(closed_url(), ["fake/a"]))
    assert main(["--run", str(path)]) == 3
    out, err = capsys.readouterr()
    assert "unreachable" in err and "Results saved:" in out


def test_api_key_never_reaches_disk(fake, home, write_profile, tmp_path, monkeypatch, capsys) -> None:
    secret = "sk-test-DO-NOT-STORE-4f9a8c7e"
    monkeypatch.setenv("FORGETUI_TEST_KEY", secret)
    server = fake(default=Script(content_tokens=4, faults={2: "500"}))
    path = write_profile(profile_text(server.base_url, ["fake/a"], provider_extra='api_key_env = "FORGETUI_TEST_KEY"'))
    out_json = tmp_path / "out.json"
    main(["--run", str(path), "--json-out", str(out_json)])
    out, err = capsys.readouterr()
    assert server.logs[-1].headers["authorization"] == f"Bearer {secret}"  # the key was used
    files = [p for p in home.rglob("*") if p.is_file()] + [out_json]
    assert len(files) >= 3
    for file in files:
        data = file.read_bytes()
        assert secret.encode() not in data, file
        assert b"Bearer" not in data and b"authorization" not in data.lower(), file
    assert secret not in out + err


def test_bad_profile_is_a_usage_error_naming_the_line(home, write_profile, capsys) -> None:
    path = write_profile(profile_text("http://127.0.0.1:9/v1", ["fake/a"]).replace("repeats = 2", "repeets = 2"))
    assert main(["--run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and "unknown key 'speed.repeets'" in err


def _spawn_run(path: Path, home: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "FORGETUI_HOME": str(home), "PYTHONPATH": f"{SRC}{os.pathsep}{SRC.parent}"}
    return subprocess.Popen([sys.executable, "-m", "forgetui", "--run", str(path), *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_records(home: Path, count: int, proc: subprocess.Popen, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        dirs = run_dirs(home) if (home / "data" / "runs").exists() else []
        if dirs and (dirs[0] / "records.jsonl").exists():
            lines = (dirs[0] / "records.jsonl").read_bytes().count(b"\n")
            if lines >= count:
                return dirs[0]
        time.sleep(0.02)
    raise AssertionError("run made no progress")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_run_resumes_without_losing_or_repeating_records(fake, home, write_profile, sig) -> None:
    server = fake(default=Script(ttft_s=0.01, content_tokens=20, gap_s=0.01))
    path = write_profile(profile_text(server.base_url, ["fake/a", "fake/b"], warmup=1, repeats=3,
                                      prompts='["short", "medium"]'))
    proc = _spawn_run(path, home)
    run_dir = _wait_for_records(home, 5, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    before = read_records(run_dir / "records.jsonl").records
    doc = json.loads((run_dir / "run.json").read_text())
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert doc["status"] == "interrupted"
        assert f"--resume {run_dir.name}" in out and "Results saved:" in out
    else:
        assert proc.returncode == -signal.SIGKILL
        assert doc["status"] == "running"  # nobody could say otherwise; records are the truth
    assert 5 <= len(before) < 16

    resumed = _spawn_run(path, home, "--resume", run_dir.name)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert "Resuming run" in err
    after = read_records(run_dir / "records.jsonl").records
    assert after[: len(before)] == before  # nothing lost or rewritten
    counted = [r["key"] for r in after if r["counted"]]
    assert len(counted) == len(set(counted)) == 2 * 2 * 3  # each measurement exactly once
    assert [r["seq"] for r in after] == list(range(len(after)))
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "complete" and len(doc["resumes"]) == 1
    assert all(len(p["requests"]) == 3 for m in doc["models"] for p in m["speed"]["prompts"])


def test_resume_refuses_a_changed_profile_and_a_locked_run(fake, home, write_profile, capsys) -> None:
    from forgetui.paths import locations
    from forgetui.store import RunStore

    server = fake(default=Script(content_tokens=4))
    path = write_profile(profile_text(server.base_url, ["fake/a"]))
    assert main(["--run", str(path)]) == 0
    run_id = run_dirs(home)[0].name
    changed = write_profile(profile_text(server.base_url, ["fake/a"], max_tokens=99), "changed.toml")
    assert main(["--run", str(changed), "--resume", run_id]) == 2
    assert "differs from the one run" in capsys.readouterr().err
    with RunStore(locations().runs_dir).open(run_id):
        assert main(["--run", str(path), "--resume", run_id]) == 4
    assert "is being written by PID" in capsys.readouterr().err
    assert main(["--run", str(path), "--resume", "no-such-run"]) == 4


def test_engine_never_imports_textual_or_rich() -> None:
    code = (
        "import sys, forgetui.engine.runner, forgetui.engine.client, forgetui.store, forgetui.headless, "
        "forgetui.report.summary, forgetui.cli, forgetui.config, forgetui.profile; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prefill_estimate_recovers_the_scripted_prefill_rate(fake, home, write_profile, capsys) -> None:
    # The fake server's TTFT grows by prompt_tokens / 2000 s: the client-side estimate (TTFT minus
    # the measured 1-token baseline) must find that rate without any server timings.
    server = fake(default=Script(ttft_s=0.02, prefill_tps=2000, content_tokens=8, gap_s=0.002))
    text = profile_text(server.base_url, ["fake/a"], prompts='["medium", "long"]', repeats=3)
    path = write_profile(text.replace("prefill_baseline = false", "prefill_baseline = true"))
    assert main(["--run", str(path)]) == 0
    doc = json.loads((run_dirs(home)[0] / "run.json").read_text())
    speed = doc["models"][0]["speed"]
    assert speed["baseline"]["ttft_s"] is not None and len(speed["baseline"]["requests"]) == 3
    long = speed["prompts"][1]["summary"]
    assert long["prefill_source"] == "estimate"
    assert long["prefill_tps"]["median"] == pytest.approx(2000, rel=0.15)
    assert "est" in capsys.readouterr().out
