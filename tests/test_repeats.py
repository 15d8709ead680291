"""Repeats: ``[cases] repeats = k`` asks each case k times; run.json keeps one row per case and adds
pass@1 (with its spread), pass^k and pass@k; resume and recover work per attempt."""

from __future__ import annotations

import json
import textwrap
import tomllib

import pytest

from forgetui.cli import main
from forgetui.engine.cases_run import case_key
from forgetui.engine.repeats import attempt_key, fold_rows, plan_attempts, repeat_stats, repeats_line
from forgetui.judge_cmd import judged_rows
from forgetui.profile import Profile
from forgetui.store import read_records
from tests.fakeserver import Script
from tests.conftest import use_case_dir

CASES = textwrap.dedent('''\
    [[case]]
    id = "rep.math"
    category = "math"
    sets = ["rep"]
    prompt = "MATHQ: what is 40 + 2? End with 'Final answer: N'."
    [case.grader]
    kind = "numeric"
    answer = 42

    [[case]]
    id = "rep.capital"
    category = "reasoning"
    sets = ["rep"]
    prompt = "CAPQ: the capital of France?"
    [case.grader]
    kind = "exact"
    expected = "Paris"
    ''')

RIGHT, WRONG = "Final answer: 42", "Final answer: 41"


def _profile(base_url: str, repeats: int | None) -> str:
    line = f"repeats = {repeats}\n" if repeats is not None else ""
    return textwrap.dedent(f"""\
        name = "rep"
        [[providers]]
        name = "fake"
        base_url = "{base_url}"
        concurrency = 1
        [models]
        targets = ["fake/m"]
        [speed]
        enabled = false
        [cases]
        select = ["rep"]
        """) + line + "[limits]\nidle_timeout_s = 5\nrequest_timeout_s = 20\nretries = 0\n"


@pytest.fixture
def rep_setup(home, tmp_path, fake, write_profile):
    use_case_dir(home, tmp_path / "repcases", {"rep.toml": CASES})

    def make(repeats: int | None, cycle: list[str]):
        server = fake({"m": Script(answers={"CAPQ": "Final answer: Paris"}, answer_cycle={"MATHQ": cycle},
                                   gap_s=0.001)})
        return write_profile(_profile(server.base_url, repeats)), server

    return make


def _run_dir(home):
    return next((home / "data" / "runs").iterdir())


def _chat_prompts(logs) -> list[str]:
    return [json.dumps(log.body.get("messages")) for log in logs if log.path.endswith("/chat/completions")]


# --- the statistics, by hand -----------------------------------------------------------------------

def _rows(*outcomes: str) -> list[dict]:
    """Folded rows: one per string, each character an attempt (p pass, f fail, e error)."""
    names = {"p": "pass", "f": "fail", "e": "error"}
    return [{"case_id": f"c{i}", "repeats": [{"repeat": r, "status": names[ch]} for r, ch in enumerate(s)]}
            for i, s in enumerate(outcomes)]


def test_stats_for_two_of_three_and_three_of_three_by_hand() -> None:
    one = repeat_stats(_rows("pfp"), 3)
    assert one["pass_at_1"]["value"] == pytest.approx(2 / 3)
    assert one["pass_hat_k"]["value"] == 0.0 and one["pass_at_k"]["value"] == 1.0
    assert repeat_stats(_rows("ppp"), 3)["pass_hat_k"]["value"] == 1.0
    both = repeat_stats(_rows("pfp", "ppp"), 3)
    p1 = both["pass_at_1"]
    assert p1["value"] == pytest.approx(5 / 6) and (p1["passed"], p1["attempts"], p1["cases"]) == (5, 6, 2)
    # rates 2/3 and 1: sample variance 1/18, standard error sqrt(1/18 / 2) = 1/6
    assert p1["std_error"] == pytest.approx(1 / 6)
    # Wilson 5/6 at 95 %: centre 0.7032, half-width 0.2667
    assert p1["low"] == pytest.approx(0.4365, abs=1e-3) and p1["high"] == pytest.approx(0.9699, abs=1e-3)
    assert both["pass_hat_k"] == {"value": 0.5, "cases": 2} and both["pass_at_k"] == {"value": 1.0, "cases": 2}
    assert repeats_line(both) == "pass@1 83% [44%, 97%] over 3 attempts; pass^3 50%"


def test_errored_attempts_are_kept_apart() -> None:
    stats = repeat_stats(_rows("pep", "fff"), 3)
    # case 0: 2 graded, both pass (rate 1), not complete for pass^3; case 1: 0/3
    assert stats["pass_at_1"]["value"] == pytest.approx(0.5) and stats["pass_at_1"]["attempts"] == 5
    assert stats["pass_hat_k"] == {"value": 0.0, "cases": 1} and stats["incomplete"] == 1
    assert "1 case(s) without 3 graded attempts" in repeats_line(stats)


def test_keys_plans_and_folding() -> None:
    assert attempt_key("p/m", "x") == case_key("p/m", "x") == "p/m|case|x"
    assert attempt_key("p/m", "x", 2) == "p/m|case|x|r2"

    class C:
        def __init__(self, id):
            self.id = id

    cases = [C("a"), C("b")]
    assert plan_attempts(cases, "p/m", 1, {"p/m|case|a"}) == [cases[1]]  # k = 1: the cases themselves
    plan = plan_attempts(cases, "p/m", 2, {"p/m|case|a|r0"})
    assert [(a.id, a.repeat) for a in plan] == [("a", 1), ("b", 0), ("b", 1)]
    plain = [{"case_id": "a", "status": "pass"}]
    assert fold_rows(plain) is plain  # k = 1 rows pass through untouched
    rows = [{"case_id": "a", "repeat": 1, "status": "fail"}, {"case_id": "b", "repeat": 0, "status": "pass"},
            {"case_id": "a", "repeat": 0, "status": "pass"}]
    folded = fold_rows(rows)
    assert [r["case_id"] for r in folded] == ["a", "b"]
    assert folded[0]["status"] == "pass"  # the first attempt's row, wherever it was stored
    assert [a["status"] for a in folded[0]["repeats"]] == ["pass", "fail"]


def test_judge_picks_every_attempt_by_key() -> None:
    def rec(seq, repeat, status):
        return {"kind": "case_result", "seq": seq, "key": attempt_key("p/m", "j", repeat), "model": "p/m",
                "case": {"case_id": "j", "grader": "judge", "outcome": "finished", "status": status, "repeat": repeat}}

    rows = judged_rows([rec(1, 0, "pass"), rec(2, 1, "fail"), rec(3, 0, "fail")])
    assert sorted((r["key"], r["case"]["status"]) for r in rows) == [("p/m|case|j|r0", "fail"), ("p/m|case|j|r1", "fail")]


# --- the profile -----------------------------------------------------------------------------------

BASE = '''name = "r"
[[providers]]
name = "fake"
base_url = "http://127.0.0.1:9/v1"
[models]
targets = ["fake/m"]
[speed]
enabled = false
[cases]
select = ["mini"]
'''


def test_repeats_one_keeps_the_profile_hash() -> None:
    # Recorded from the code before `repeats` existed: old runs still resume.
    assert Profile.model_validate(tomllib.loads(BASE)).content_hash() == "f9f9e3e4efaf53e6"
    assert Profile.model_validate(tomllib.loads(BASE + "repeats = 1\n")).content_hash() == "f9f9e3e4efaf53e6"
    three = Profile.model_validate(tomllib.loads(BASE + "repeats = 3\n"))
    assert three.cases.repeats == 3 and three.content_hash() != "f9f9e3e4efaf53e6"
    for bad in (0, 21):
        with pytest.raises(ValueError):
            Profile.model_validate(tomllib.loads(BASE + f"repeats = {bad}\n"))


# --- end to end against the fake server ------------------------------------------------------------

def test_k3_run_stores_every_attempt_and_reports_pass_hat_k(rep_setup, home, capsys) -> None:
    profile, server = rep_setup(3, [RIGHT, WRONG, RIGHT])
    # The pass/fail counts follow each case's first attempt (all passed here); the exit code says
    # that some attempt failed.
    assert main(["--run", str(profile)]) == 1
    out = capsys.readouterr().out
    run_dir = _run_dir(home)
    keys = [r["key"] for r in read_records(run_dir / "records.jsonl").records if r.get("kind") == "case_result"]
    assert sorted(keys) == sorted(f"fake/m|case|{c}|r{r}" for c in ("rep.math", "rep.capital") for r in range(3))
    assert len(_chat_prompts(server.logs)) == 6
    doc = json.loads((run_dir / "run.json").read_text())
    model = doc["models"][0]
    cases = {c["case_id"]: c for c in model["cases"]}
    assert len(model["cases"]) == 2  # one row per case
    math = cases["rep.math"]
    assert math["repeat"] == 0 and math["status"] == "pass"  # concurrency 1: attempts in order
    assert [a["status"] for a in math["repeats"]] == ["pass", "fail", "pass"]
    assert all(a["tokens"] for a in math["repeats"])
    s = model["cases_summary"]
    assert (s["total"], s["passed"], s["repeats"]) == (2, 2, 3)  # counts: first attempts
    assert s["pass_at_1"]["value"] == pytest.approx(5 / 6)
    assert s["pass_hat_k"]["value"] == 0.5 and s["pass_at_k"]["value"] == 1.0
    assert doc["totals"]["cases"] == 2
    # tokens count every attempt
    assert model["case_tokens"]["output"] == sum(a["tokens"]["output"]
                                                       for c in model["cases"] for a in c["repeats"])
    assert "  pass@1 83% [44%, 97%] over 3 attempts; pass^3 50%" in out
    # forgetui report shows the same statistics (JSON and Markdown).
    assert main(["report", doc["run_id"], "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["models"][0]["repeats"]["k"] == 3
    assert report["models"][0]["repeats"]["pass_hat_k"]["value"] == 0.5
    assert main(["report", doc["run_id"]]) == 0
    assert "- fake/m: pass@1 83% [44%, 97%] over 3 attempts; pass^3 50%" in capsys.readouterr().out


def test_k1_run_is_unchanged(rep_setup, home, capsys) -> None:
    profile, _ = rep_setup(None, [RIGHT])
    main(["--run", str(profile)])
    out = capsys.readouterr().out
    run_dir = _run_dir(home)
    keys = {r["key"] for r in read_records(run_dir / "records.jsonl").records if r.get("kind") == "case_result"}
    assert keys == {"fake/m|case|rep.math", "fake/m|case|rep.capital"}
    model = json.loads((run_dir / "run.json").read_text())["models"][0]
    assert all("repeat" not in c and "repeats" not in c for c in model["cases"])
    assert not {"repeats", "pass_at_1", "pass_hat_k"} & set(model["cases_summary"])
    assert "pass@1" not in out


def test_resume_sends_only_the_missing_attempts(rep_setup, home, capsys) -> None:
    profile, server = rep_setup(3, [RIGHT, WRONG, RIGHT])
    main(["--run", str(profile)])
    run_dir = _run_dir(home)
    path = run_dir / "records.jsonl"
    lines = path.read_text().splitlines()
    lost = {"fake/m|case|rep.math|r2", "fake/m|case|rep.capital|r1"}  # as if the run died before these
    path.write_text("".join(line + "\n" for line in lines if json.loads(line).get("key") not in lost))
    before = len(server.logs)
    assert main(["--run", str(profile), "--resume", run_dir.name]) in (0, 1)
    prompts = _chat_prompts(server.logs[before:])
    assert len(prompts) == 2 and sum("MATHQ" in p for p in prompts) == 1 and sum("CAPQ" in p for p in prompts) == 1
    doc = json.loads((run_dir / "run.json").read_text())
    assert all(len(c["repeats"]) == 3 for c in doc["models"][0]["cases"])


def test_recover_reasks_only_the_failed_attempt(rep_setup, home, capsys) -> None:
    profile, server = rep_setup(3, [RIGHT, WRONG, RIGHT])
    server.scripts["m"].faults.update({2: "500"})  # math attempt r1 fails at the server
    assert main(["--run", str(profile)]) == 1
    run_dir = _run_dir(home)
    doc = json.loads((run_dir / "run.json").read_text())
    math = next(c for c in doc["models"][0]["cases"] if c["case_id"] == "rep.math")
    assert [a["status"] for a in math["repeats"]] == ["pass", "error", "fail"]
    before = len(server.logs)
    main(["recover", run_dir.name])
    prompts = _chat_prompts(server.logs[before:])
    assert len(prompts) == 1 and "MATHQ" in prompts[0]
    doc = json.loads((run_dir / "run.json").read_text())
    math = next(c for c in doc["models"][0]["cases"] if c["case_id"] == "rep.math")
    assert [a["status"] for a in math["repeats"]] == ["pass", "pass", "fail"]  # the third answer in the cycle
    assert doc["recovers"][-1]["rows"] == ["fake/m|case|rep.math|r1"]
