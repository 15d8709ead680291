"""summary.json: the small per-run index written with every run.json, and its fallback."""

from __future__ import annotations

import json
import os
from pathlib import Path

from forgetui.store import RunStore, summarize_run
from forgetui.store.summary import speed_headline


def _request(ok: bool, decode: float, ttft: float) -> dict:
    return {"ok": ok, "decode_tps": decode, "ttft_s": ttft, "content": "x" * 5000, "prompt": "p" * 5000}


def _doc(run_id: str, created: str, status: str = "complete") -> dict:
    cases = [
        {"case_id": f"c{i}", "category": "math" if i < 3 else "coding", "status": s, "response": "r" * 4000}
        for i, s in enumerate(["pass", "fail", "error", "pass", "skipped"])
    ]
    return {
        "schema_version": 1,
        "run_id": run_id,
        "name": "bench",
        "status": status,
        "created_at": created,
        "updated_at": created,
        "fingerprint": {"case_set_revision": "abc"},
        "profile": {"name": "bench"},
        "totals": {"requests": 4, "ok": 3, "errors": 1},
        "models": [
            {
                "model": "fake/a",
                "error": None,
                "speed": {
                    "baseline": {"requests": [_request(True, 1.0, 9.0)]},
                    "prompts": [
                        {"name": "short", "requests": [_request(True, 10.0, 0.1), _request(True, 30.0, 0.3)],
                         "warmup": [_request(True, 999.0, 9.0)]},
                        {"name": "long", "requests": [_request(True, 20.0, 0.2), _request(False, 500.0, 5.0)]},
                    ],
                },
                "cases": cases,
                "cases_summary": {
                    "total": 5, "passed": 2,
                    "by_category": {"coding": {"pass": 1, "fail": 0, "error": 0, "skipped": 1},
                                    "math": {"pass": 1, "fail": 1, "error": 1, "skipped": 0}},
                    "ability_score": {"passed": 1, "of": 2},
                    "variants": {"c4": "skipped"},
                },
                "tokens": {"input": 1200, "output": 300, "reasoning": 40},
                "cost_usd": 0.00036,
                "judge_tokens": {"input": None, "output": None, "reasoning": None},
                "judge_cost_usd": None,
            },
            {"model": "down/b", "error": "connect_error: refused", "speed": None, "cases": [],
             "cases_summary": None},
        ],
    }


def test_summarize_run_keeps_only_the_index() -> None:
    summary = summarize_run(_doc("r1", "2025-01-01T00:00:00+00:00"))
    assert summary == {
        "schema_version": 1,
        "run_id": "r1",
        "name": "bench",
        "status": "complete",
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": "2025-01-01T00:00:00+00:00",
        "totals": {"requests": 4, "ok": 3, "errors": 1},
        "targets": ["fake/a", "down/b"],
        "models": [
            {"model": "fake/a", "error": None,
             "cases_summary": {"total": 5, "passed": 2, "failed": 1, "errors": 1, "skipped": 1,
                               "recoveries": 0, "reasks": 0, "ability_score": {"passed": 1, "of": 2}},
             # medians of the clean measured requests only: no warm-up, baseline or failed request
             "speed": {"decode_tps": 20.0, "ttft_s": 0.2, "requests": 3},
             "tokens": {"input": 1200, "output": 300, "reasoning": 40}, "cost_usd": 0.00036,
             "judge_tokens": {"input": None, "output": None, "reasoning": None}, "judge_cost_usd": None},
            {"model": "down/b", "error": "connect_error: refused", "cases_summary": None, "speed": None,
             "tokens": None, "cost_usd": None, "judge_tokens": None, "judge_cost_usd": None},
        ],
    }
    assert len(json.dumps(summary)) < 1000


def test_summarize_run_tolerates_partial_documents() -> None:
    assert summarize_run({})["models"] == [] and summarize_run({})["targets"] == []
    partial = summarize_run({"run_id": "x", "status": "running", "models": [{"model": "m", "speed": {}}]})
    assert partial["models"] == [{"model": "m", "error": None, "cases_summary": None, "speed": None,
                                  "tokens": None, "cost_usd": None, "judge_tokens": None, "judge_cost_usd": None}]
    assert speed_headline({"prompts": [{"requests": [{"ok": False, "decode_tps": 5.0}]}]}) is None


def test_write_run_json_also_writes_summary_json(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    with store.create("r1") as handle:
        handle.write_run_json(_doc("r1", "2025-01-01T00:00:00+00:00", status="running"))
        first = json.loads((handle.path / "summary.json").read_text())
        assert first["status"] == "running"
        handle.write_run_json(_doc("r1", "2025-01-01T00:00:00+00:00", status="complete"))
    on_disk = json.loads((store.run_dir("r1") / "summary.json").read_text())
    assert on_disk == summarize_run(store.load_run("r1"))
    assert on_disk["status"] == "complete"
    assert not [p for p in store.run_dir("r1").iterdir() if ".tmp-" in p.name]
    # A document without run_id still gets the run's id in its summary.
    with store.create("r2") as handle:
        handle.write_run_json({"status": "running"})
    assert json.loads((store.run_dir("r2") / "summary.json").read_text())["run_id"] == "r2"


def test_list_summaries_newest_first_reads_summary_json(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    assert store.list_summaries() == []  # runs_dir not created yet
    for run_id, created in (("old", "2024-01-01T00:00:00+00:00"), ("new", "2025-06-01T00:00:00+00:00"),
                            ("mid", "2024-06-01T00:00:00Z")):
        with store.create(run_id) as handle:
            handle.write_run_json(_doc(run_id, created))
    store.create("empty").close()  # no run.json: not listable
    # The summary is what is read: change it behind the store's back and the listing shows it.
    path = store.run_dir("mid") / "summary.json"
    edited = json.loads(path.read_text()) | {"name": "from-summary"}
    path.write_text(json.dumps(edited))
    listed = store.list_summaries()
    assert [s["run_id"] for s in listed] == ["new", "mid", "old"]
    assert [s["run_id"] for s in listed] == [d["run_id"] for d in store.list_runs()]
    assert listed[1]["name"] == "from-summary"
    assert all("fingerprint" not in s and "rrrr" not in json.dumps(s) for s in listed)  # no raw evidence


def test_list_summaries_falls_back_to_run_json(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    # An older run: run.json only, written without the store (no run_id in it either).
    legacy = store.runs_dir / "legacy"
    legacy.mkdir(parents=True)
    doc = _doc("ignored", "2025-01-01T00:00:00+00:00")
    del doc["run_id"]
    (legacy / "run.json").write_text(json.dumps(doc))
    # A corrupt summary.json: run.json wins.
    with store.create("corrupt") as handle:
        handle.write_run_json(_doc("corrupt", "2024-01-01T00:00:00+00:00"))
    (store.run_dir("corrupt") / "summary.json").write_text('{"run_id": ')
    # A stale summary.json (older than run.json, e.g. run.json rewritten by an older forgetui).
    with store.create("stale") as handle:
        handle.write_run_json(_doc("stale", "2023-01-01T00:00:00+00:00", status="running"))
    stale_run = store.run_dir("stale")
    newer = _doc("stale", "2023-01-01T00:00:00+00:00", status="complete")
    (stale_run / "run.json").write_text(json.dumps(newer))
    os.utime(stale_run / "summary.json", ns=(1_000_000_000, 1_000_000_000))

    listed = store.list_summaries()
    assert [s["run_id"] for s in listed] == ["legacy", "corrupt", "stale"]
    expected = summarize_run(doc)
    expected["run_id"] = "legacy"
    assert listed[0] == expected
    assert listed[1] == summarize_run(store.load_run("corrupt"))
    assert listed[2]["status"] == "complete"
