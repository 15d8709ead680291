"""Ability cases in a run: asked through the same engine, graded, stored, summarised, resumable."""

from __future__ import annotations

import json
import textwrap

import pytest

from forgetui.cli import main
from forgetui.store import read_records
from tests.fakeserver import Script
from tests.conftest import use_case_dir

SENTINEL = "SENTINEL-cases-run-5d1e0b77"

CASES = textwrap.dedent(f'''\
    [[case]]
    id = "mini.math.sum"
    category = "math"
    tags = ["ability"]
    sets = ["mini"]
    prompt = "MATHQ: what is 40 + 2? End with 'Final answer: N'."
    [case.grader]
    kind = "numeric"
    answer = 42

    [[case]]
    id = "mini.exact.capital"
    category = "reasoning"
    sets = ["mini"]
    prompt = "CAPQ: the capital of France?"
    [case.grader]
    kind = "exact"
    expected = "Paris"

    [[case]]
    id = "mini.code.double"
    category = "coding"
    tags = ["ability"]
    sets = ["mini"]
    prompt = "CODEQ: write double(x) in Python."
    [case.grader]
    kind = "exec"
    language = "python"
    required_name = "double"
    sentinel = "{SENTINEL}"
    test_code = """
    assert double(2) == 4 and double(-3) == -6
    print("{SENTINEL}")
    """

    [[case]]
    id = "mini.long.essay"
    category = "instruct"
    sets = ["mini"]
    max_tokens = 5
    prompt = "LONGQ: write a long essay, then give the final answer 7."
    [case.grader]
    kind = "numeric"
    answer = 7
    ''')

ANSWERS = {
    "MATHQ": "Let me think. 40 + 2 = 42.\n\nFinal answer: 42",
    "CAPQ": "Final answer: Lyon",
    "CODEQ": "Sure! Here is the code:\n\n```python\ndef double(x):\n    return 2 * x\n```\n",
    "LONGQ": "Essays are a wonderful form of writing that let us explore ideas at length",
}


@pytest.fixture
def case_setup(home, tmp_path, fake, write_profile):
    use_case_dir(home, tmp_path / "mycases", {"mini.toml": CASES})
    server = fake({"m": Script(answers=ANSWERS, gap_s=0.001)})
    profile = write_profile(textwrap.dedent(f"""\
        name = "cases"
        [[providers]]
        name = "fake"
        base_url = "{server.base_url}"
        concurrency = 2
        [models]
        targets = ["fake/m"]
        [speed]
        enabled = false
        [cases]
        select = ["mini"]
        [limits]
        idle_timeout_s = 5
        request_timeout_s = 20
        """))
    return profile, server


def _sandbox_ok() -> bool:
    from forgetui.sandbox import Sandbox

    return Sandbox().check().ok


def test_cases_are_asked_graded_and_summarised(case_setup, home, capsys) -> None:
    profile, server = case_setup
    code = main(["--run", str(profile)])
    out, err = capsys.readouterr()
    assert code == 1  # some cases failed
    doc = json.loads(next((home / "data" / "runs").iterdir()).joinpath("run.json").read_text())
    cases = {c["case_id"]: c for c in doc["models"][0]["cases"]}
    assert set(cases) == {"mini.math.sum", "mini.exact.capital", "mini.code.double", "mini.long.essay"}
    assert cases["mini.math.sum"]["status"] == "pass"
    assert cases["mini.exact.capital"]["status"] == "fail" and "Lyon" in cases["mini.exact.capital"]["reason"]
    assert cases["mini.long.essay"]["status"] == "fail"
    assert cases["mini.long.essay"]["reason"].startswith("TRUNCATED at")
    if _sandbox_ok():
        assert cases["mini.code.double"]["status"] == "pass", cases["mini.code.double"]["reason"]
    for case in cases.values():
        for key in ("category", "hard", "prompt", "response", "reasoning", "extracted", "expected",
                    "usage", "response_id", "reason", "ttft_s"):
            assert key in case
    assert cases["mini.math.sum"]["response"].endswith("Final answer: 42")
    summary = doc["models"][0]["cases_summary"]
    assert summary["total"] == 4 and summary["by_category"]["math"]["pass"] == 1
    assert doc["fingerprint"]["case_set_revision"]
    assert "Ability Score: " in out and "FAIL    mini.exact.capital" in out
    assert "case mini.math.sum: pass" in err
    assert out.strip().splitlines()[-1].startswith("Results saved:")


def test_failed_requests_are_errors_not_failures_and_resume_skips_done_cases(case_setup, home, capsys) -> None:
    profile, server = case_setup
    profile.write_text(profile.read_text().replace("request_timeout_s = 20", "request_timeout_s = 20\nretries = 0"))
    server.scripts["m"].faults.update({1: "500"})  # the first request fails, with no retry
    main(["--run", str(profile)])
    run_dir = next((home / "data" / "runs").iterdir())
    doc = json.loads((run_dir / "run.json").read_text())
    statuses = [c["status"] for c in doc["models"][0]["cases"]]
    assert "error" in statuses
    error = next(c for c in doc["models"][0]["cases"] if c["status"] == "error")
    assert error["reason"].startswith("request failed: http_error: HTTP 500")
    before = len(read_records(run_dir / "records.jsonl").records)
    requests_before = len(server.logs)
    assert main(["--run", str(profile), "--resume", run_dir.name]) in (0, 1)
    assert len(read_records(run_dir / "records.jsonl").records) == before  # nothing asked twice
    assert len([log for log in server.logs[requests_before:] if log.path.endswith("/chat/completions")]) == 0


def test_unknown_case_selection_names_the_line(case_setup, home, write_profile, capsys) -> None:
    profile, _ = case_setup
    bad = write_profile(profile.read_text().replace('select = ["mini"]', 'select = ["mini", "nosuchset"]'), "bad.toml")
    assert main(["--run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "'nosuchset'" in err
