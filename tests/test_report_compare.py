"""compare_models / pick_models: the pure side-by-side logic behind the TUI's Compare screen."""

from __future__ import annotations

import subprocess
import sys

import pytest

from forgetui.report.compare import compare_models, pick_models


def _req(decode: float, ttft: float, ok: bool = True) -> dict:
    return {"ok": ok, "decode_tps": decode, "ttft_s": ttft}


def _model(label: str, statuses: dict[str, tuple[str, str]], speed: dict[str, list[dict]] | None,
           error: str | None = None) -> dict:
    return {
        "model": label,
        "error": error,
        "cases": [{"case_id": cid, "category": cat, "status": st} for cid, (cat, st) in statuses.items()],
        "speed": None if speed is None else {"prompts": [{"name": n, "requests": r} for n, r in speed.items()]},
    }


def _doc(run_id: str, revision: str | None, *models: dict) -> dict:
    return {"run_id": run_id, "name": run_id, "created_at": "2025-01-01T00:00:00+00:00",
            "fingerprint": {"case_set_revision": revision}, "models": list(models)}


A = _model("p/a", {"m1": ("math", "pass"), "m2": ("math", "fail"), "c1": ("coding", "skipped"),
                   "c2": ("coding", "error"), "only_a": ("math", "pass")},
           {"short": [_req(10, 0.2), _req(30, 0.4), _req(999, 9.0, ok=False)], "long": [_req(20, 1.0)]})
B = _model("p/b", {"m1": ("math", "pass"), "m2": ("math", "pass"), "c1": ("coding", "pass"),
                   "c2": ("coding", "error"), "only_b": ("agent", "fail")},
           {"short": [_req(40, 0.1)], "extra": [_req(5, 5.0)]})


def test_compare_counts_rates_differences_and_speed() -> None:
    result = compare_models(_doc("r1", "rev1", A), "p/a", _doc("r2", "rev1", B), "p/b")
    assert result["warnings"] == [] and not result["revision_mismatch"]
    assert result["a"]["run_id"] == "r1" and result["b"]["model"] == "p/b"
    cats = {c["category"]: c for c in result["categories"]}
    assert list(cats) == ["agent", "coding", "math"]
    assert cats["agent"]["a"] is None and cats["agent"]["b"]["fail"] == 1
    # errors and skipped cases do not count: coding A has nothing graded (an error and a skip)
    assert cats["coding"]["a"] == {"pass": 0, "fail": 0, "error": 1, "skipped": 1, "rate": None}
    assert cats["coding"]["b"]["rate"] == 1.0  # 1 pass, 1 error: the error does not count
    assert cats["math"]["a"]["rate"] == pytest.approx(2 / 3) and cats["math"]["b"]["rate"] == 1.0
    assert result["overall"]["a"]["pass"] == 2 and result["overall"]["b"]["pass"] == 3
    assert result["differing"] == [
        {"case_id": "m2", "category": "math", "a": "fail", "b": "pass"},
        {"case_id": "c1", "category": "coding", "a": "skipped", "b": "pass"},
        {"case_id": "only_a", "category": "math", "a": "pass", "b": None},
        {"case_id": "only_b", "category": "agent", "a": None, "b": "fail"},
    ]
    assert result["common_cases"] == 4
    speed = {row["prompt"]: row for row in result["speed"]}
    assert list(speed) == ["short", "long", "extra", "all"]
    # medians of clean requests only (the failed 999 tok/s request is ignored)
    assert speed["short"]["a_decode_tps"] == 20 and speed["short"]["b_decode_tps"] == 40
    assert speed["short"]["decode_ratio"] == 2.0
    assert speed["short"]["ttft_ratio"] == pytest.approx(0.1 / 0.3)
    assert speed["long"]["b_decode_tps"] is None and speed["long"]["decode_ratio"] is None
    assert speed["extra"]["a_ttft_s"] is None and speed["extra"]["b_ttft_s"] == 5.0
    assert speed["all"]["a_decode_tps"] == 20 and speed["all"]["b_decode_tps"] == 22.5


def test_compare_warns_about_case_sets_missing_and_failed_models() -> None:
    down = _model("p/down", {}, None, error="connect_error: refused")
    result = compare_models(_doc("r1", "rev1", A), "p/a", _doc("r2", "rev2", down), "p/down")
    assert result["revision_mismatch"]
    assert any("different case-set revisions (rev1 vs rev2)" in w for w in result["warnings"])
    assert any("p/down was not benchmarked: connect_error" in w for w in result["warnings"])
    assert [d["b"] for d in result["differing"]] == [None] * 5
    assert result["overall"]["b"] is None
    missing = compare_models(_doc("r1", "rev1", A), "p/a", _doc("r1", "rev1", A), "p/nope")
    assert any("run r1 has no model p/nope" in w for w in missing["warnings"])
    # Two models of one run: same document on both sides.
    same = compare_models(_doc("r", "rev", A, B), "p/a", _doc("r", "rev", A, B), "p/b")
    assert same["warnings"] == [] and len(same["differing"]) == 4


def test_pick_models_prefers_a_shared_label() -> None:
    assert pick_models(_doc("r1", None, A, B), _doc("r2", None, B)) == ("p/b", "p/b")
    assert pick_models(_doc("r1", None, A), _doc("r2", None, B)) == ("p/a", "p/b")
    assert pick_models(_doc("r1", None), _doc("r2", None, B)) == (None, "p/b")


def test_compare_imports_no_ui_library() -> None:
    code = ("import sys, forgetui.report.compare; "
            "bad = [m for m in ('textual', 'rich') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
