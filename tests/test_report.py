"""`forgetui report`: build_report's numbers, the Markdown/JSON/CSV goldens, and the CLI.

Golden files: tests/data/report/run.json is a fixed, hand-made run (two models plus one that was
never run; categories, hard cases, a truncated answer, a tool-call count mismatch, a request
failure, a judge failure, skipped cases, speed sections, tokens and cost, a recovery). The tests
render it and compare with tests/data/report/report.{md,json,csv}. After an intended change to
the report, rewrite the goldens with

    FORGETUI_UPDATE_GOLDEN=1 uv run pytest tests/test_report.py

and review the diff of tests/data/report/ before committing it.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forgetui.cli import main
from forgetui.paths import locations
from forgetui.report.build import build_report
from forgetui.report.csvout import COLUMNS, render_csv
from forgetui.report.markdown import render_markdown
from forgetui.report.stats import interval_text, rate_text, wilson_interval
from forgetui.report_cmd import render

DATA = Path(__file__).parent / "data" / "report"
SRC = Path(__file__).resolve().parents[1] / "src"
RUN_ID = "20250301-120000-nightly-ab12"


def _fixture() -> dict:
    return json.loads((DATA / "run.json").read_text())


def _case(cid: str, status: str, category: str = "math", hard: bool = False, reason: str = "r") -> dict:
    return {"case_id": cid, "category": category, "hard": hard, "status": status, "reason": reason}


def _doc(run_id: str, revision: str | None, cases: list[dict], sampling: dict | None = None) -> dict:
    return {"run_id": run_id, "name": run_id, "status": "complete",
            "fingerprint": {"case_set_revision": revision,
                            "sampling": sampling or {"temperature": 0.0, "max_tokens": 1024}},
            "models": [{"model": "p/m", "error": None, "speed": None, "cases": cases}]}


@pytest.mark.parametrize("fmt", ["md", "json", "csv"])
def test_golden(fmt: str) -> None:
    text = render(build_report([_fixture()]), fmt)
    golden = DATA / f"report.{fmt}"
    if os.environ.get("FORGETUI_UPDATE_GOLDEN") == "1":
        golden.write_bytes(text.encode())
    assert text == golden.read_bytes().decode(), f"{golden} differs; see this module's docstring"


def test_rates_and_intervals_equal_stats_hand_checked() -> None:
    report = build_report([_fixture()])
    qwen, deepseek, offline = report["models"]
    # qwen: 5 pass, 3 fail (truncated, wrong answer, tool-call mismatch); error, judge failure and
    # skipped not counted.
    assert (qwen["pass"], qwen["fail"], qwen["graded"], qwen["errors"], qwen["skipped"]) == (5, 3, 8, 2, 1)
    assert qwen["rate_text"] == rate_text(5, 8) == "62% (5/8)"
    assert qwen["interval_text"] == interval_text(5, 8) == "[31%, 86%]"
    assert qwen["interval"] == [round(x, 4) for x in wilson_interval(5, 8)]
    # Hand-computed Wilson for 5/8: centre (0.625 + 1.9208/8) / (1 + 3.8415/8) = 0.5844; half 0.2788.
    assert qwen["interval"] == pytest.approx([0.3057, 0.8632], abs=1e-4)
    assert qwen["hard"]["rate_text"] == "33% (1/3)"  # CZ01 fail, M02 pass, TZ06 fail
    tooluse = {c["category"]: c for c in qwen["categories"]}["tooluse"]
    assert (tooluse["rate_text"], tooluse["errors"]) == ("0% (0/1)", 1)
    assert tooluse["interval_text"] == interval_text(0, 1) == "[0%, 79%]"
    # Speed: medians over the clean measured requests (the failed 999 tok/s one and warm-ups excluded).
    assert (qwen["decode_tps"], qwen["ttft_s"], qwen["speed_requests"]) == (51.0, 0.705, 4)
    assert qwen["recoveries"] == 1 and qwen["cost_usd"] is None
    assert (deepseek["rate_text"], deepseek["cost_usd"]) == ("78% (7/9)", 0.021)
    assert offline["rate_text"] == "-" and offline["error"] == "model not listed by the server"
    assert report["chart"]["pareto_front"] == ["rig/qwen3-8b", "cloud/deepseek-pro"]


def test_failures_and_errors_are_listed_apart_with_their_reasons() -> None:
    report = build_report([_fixture()])
    lines = [f["line"] for f in report["failures"]]
    assert "rig/qwen3-8b [coding] CZ01-prime-census: TRUNCATED at 32768 tokens (32768 reasoning tokens); " \
           "no code in response" in lines
    assert "cloud/deepseek-pro [tooluse] TZ06-three-parallel-one-turn: 1 calls, expected 3" in lines
    kinds = {(e["model"], e["case_id"]): e["kind"] for e in report["errors"]}
    assert kinds[("rig/qwen3-8b", "T02-weather")] == "request"
    assert kinds[("rig/qwen3-8b", "I01-paraphrase")] == "judge"
    assert kinds[("cloud/deepseek-pro", "I02-three-bullets")] == "skipped"
    assert kinds[("cloud/offline-model", None)] == "model"
    failed_ids = {f["case_id"] for f in report["failures"]}
    assert not failed_ids & {"T02-weather", "I01-paraphrase", "C04-sandboxed-io"}


def test_errors_do_not_count_in_pass_rates() -> None:
    cases = [_case("a", "pass"), _case("b", "pass"), _case("c", "pass"), _case("d", "fail"),
             _case("e", "error", reason="request failed: http_error 500"),
             _case("f", "error", reason="judge failed (timeout)")]
    model = build_report([_doc("r1", "rev1", cases)])["models"][0]
    assert model["rate_text"] == "75% (3/4)"
    assert model["interval_text"] == interval_text(3, 4)
    assert model["errors"] == 2
    md = render_markdown(build_report([_doc("r1", "rev1", cases)]))
    assert "| p/m | 75% (3/4) |" in md
    assert "pass / (pass + fail)" in md


def test_warning_when_case_set_revisions_or_sampling_differ() -> None:
    same = build_report([_doc("r1", "rev1", [_case("a", "pass")]), _doc("r2", "rev1", [_case("a", "fail")])])
    assert same["warnings"] == []
    # The same model in two runs gets the run id in its label.
    assert [m["model"] for m in same["models"]] == ["p/m @ r1", "p/m @ r2"]
    revs = build_report([_doc("r1", "rev1", [_case("a", "pass")]), _doc("r2", "rev2", [_case("a", "pass")])])
    assert len(revs["warnings"]) == 1 and "different case-set revisions (r1: rev1, r2: rev2)" in revs["warnings"][0]
    assert "> **Warning:** the runs have different case-set revisions" in render_markdown(revs)
    hot = _doc("r2", "rev1", [], sampling={"temperature": 0.7, "max_tokens": 1024})
    sampling = build_report([_doc("r1", "rev1", []), hot])
    assert sampling["warnings"] == [("the runs have different sampling settings (r1: temperature 0.0, "
                                     "max_tokens 1024; r2: temperature 0.7, max_tokens 1024)")]


def test_csv_has_a_model_row_then_one_row_per_category() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(build_report([_fixture()])))))
    assert list(rows[0]) == COLUMNS
    qwen = [r for r in rows if r["model"] == "rig/qwen3-8b"]
    assert [(r["row"], r["category"]) for r in qwen] == [("model", ""), ("category", "coding"), ("category", "math"),
                                                         ("category", "tooluse"), ("category", "instructions")]
    assert (qwen[0]["pass_rate_text"], qwen[0]["cost_usd"], qwen[0]["decode_tps"]) == ("62% (5/8)", "", "51.0")


def _store_fixture(home: Path) -> None:
    run_dir = locations().runs_dir / RUN_ID
    run_dir.mkdir(parents=True)
    shutil.copy(DATA / "run.json", run_dir / "run.json")


def test_cli_stdout_and_output_file(home, capsys, tmp_path) -> None:
    _store_fixture(home)
    assert main(["report", RUN_ID]) == 0
    assert capsys.readouterr().out == (DATA / "report.md").read_text()
    target = tmp_path / "out.json"
    assert main(["report", RUN_ID, "--format", "json", "-o", str(target)]) == 0
    assert json.loads(target.read_text()) == json.loads((DATA / "report.json").read_text())
    assert capsys.readouterr().out == ""
    assert main(["report", RUN_ID, "--format", "csv"]) == 0
    assert capsys.readouterr().out == (DATA / "report.csv").read_bytes().decode()


def test_cli_unknown_run_id_exits_4_and_bad_format_exits_2(home, capsys) -> None:
    _store_fixture(home)
    assert main(["report", RUN_ID, "no-such-run"]) == 4
    assert "no run named no-such-run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", RUN_ID, "--format", "pdf"])
    assert exc.value.code == 2
    from forgetui.errors import ConfigError

    with pytest.raises(ConfigError):
        render(build_report([_fixture()]), "pdf")


def test_build_report_does_not_change_its_input() -> None:
    doc = _fixture()
    before = copy.deepcopy(doc)
    build_report([doc])
    assert doc == before


def test_report_modules_never_import_textual_or_rich() -> None:
    code = (
        "import sys, forgetui.report.build, forgetui.report.markdown, forgetui.report.csvout, forgetui.report_cmd; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
