"""How long listing stored runs takes: ``RunStore.list_summaries()`` (summary.json) against
``RunStore.list_runs()`` (every full run.json), with many runs whose run.json is large.

Creates N fake runs (default 500) through ``RunHandle.write_run_json`` in a temporary directory,
each run.json about 1 MB (40 measured requests with long prompts and answers, plus cases), then
times each listing twice (the first pass may read from disk, the second from the page cache), and
``list_summaries()`` once more with every summary.json removed (the fallback for older runs).

Run:  uv run python benchmarks/list_runs.py            (about 10 s and 0.5 GB of temporary disk)
      uv run python benchmarks/list_runs.py --runs 100
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from forgetui.store import RunStore


def fake_doc(run_id: str, i: int) -> dict:
    request = {"ok": True, "decode_tps": 50.0 + i % 7, "ttft_s": 0.1, "content": "w " * 6000, "prompt": "p" * 12000}
    cases = [{"case_id": f"case{j}", "category": "math", "status": "pass" if j % 2 else "fail",
              "response": "r" * 2000} for j in range(20)]
    return {
        "schema_version": 1, "run_id": run_id, "name": "bench", "status": "complete",
        "created_at": f"2025-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
        "updated_at": "2025-01-01T00:00:00+00:00",
        "totals": {"requests": 40, "ok": 40, "errors": 0},
        "models": [{
            "model": "fake/m", "error": None,
            "speed": {"prompts": [{"name": "short", "requests": [dict(request) for _ in range(40)]}]},
            "cases": cases,
            "cases_summary": {"total": 20, "passed": 10,
                              "by_category": {"math": {"pass": 10, "fail": 10, "error": 0, "skipped": 0}}},
        }],
    }


def timed(label: str, fn) -> None:
    start = time.perf_counter()
    found = fn()
    print(f"{label:<45} {len(found)} runs in {(time.perf_counter() - start) * 1000:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="forgetui-bench-runs-"))
    try:
        store = RunStore(root)
        for i in range(args.runs):
            run_id = f"run-{i:05d}"
            with store.create(run_id) as handle:
                handle.write_run_json(fake_doc(run_id, i))
        big = sum(p.stat().st_size for p in root.glob("*/run.json"))
        small = sum(p.stat().st_size for p in root.glob("*/summary.json"))
        print(f"{args.runs} runs: run.json {big / 1e6:.0f} MB in all, summary.json {small / 1e3:.0f} KB in all")
        for _ in range(2):
            timed("list_summaries()", store.list_summaries)
            timed("list_runs()", store.list_runs)
        for path in root.glob("*/summary.json"):
            path.unlink()
        timed("list_summaries() without summary.json", store.list_summaries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
