"""forgetui compare / recommend: McNemar verdicts, flipped cases, speed spread, job ranking, CLI.

Every run document is synthetic (built here, realistic shape per docs/results-format.md), so the
expected numbers are hand-computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgetui.cli import main
from forgetui.report.compare import compare_models, compare_text
from forgetui.report.recommend import JOBS, job_score, recommend, recommend_text


def _speed(*decode: float, ttft: float = 0.2) -> dict:
    return {"prompts": [{"name": "short", "requests": [{"ok": True, "decode_tps": d, "ttft_s": ttft} for d in decode]}]}


def _model(label: str, outcomes: dict[str, tuple[str, str]], decode: tuple[float, ...] = (), ttft: float = 0.2) -> dict:
    return {"model": label, "error": None, "speed": _speed(*decode, ttft=ttft) if decode else None,
            "cases": [{"case_id": cid, "category": cat, "status": st, "reason": f"{label} {st}"}
                      for cid, (cat, st) in outcomes.items()]}


def _doc(run_id: str, *models: dict, revision: str = "rev1", created: str = "2025-01-01T00:00:00+00:00",
         temperature: float = 0.0) -> dict:
    return {"schema_version": 1, "run_id": run_id, "name": run_id, "status": "complete", "created_at": created,
            "fingerprint": {"case_set_revision": revision, "sampling": {"temperature": temperature, "max_tokens": 4096},
                            "judge": None},
            "models": list(models)}


def _cases(prefix: str, cat: str, statuses: str) -> dict[str, tuple[str, str]]:
    names = {"p": "pass", "f": "fail", "e": "error", "s": "skipped"}
    return {f"{prefix}{i:02d}": (cat, names[ch]) for i, ch in enumerate(statuses)}


# A passes 12 cases B fails, both pass 3; one error and one skip are left out of the pairing.
SIG_A = _model("p/m", _cases("c", "coding", "pppppppppppp" + "ppp" + "ep"), decode=(40, 41, 42), ttft=0.3)
SIG_B = _model("p/m", _cases("c", "coding", "ffffffffffff" + "ppp" + "ps"), decode=(38, 39, 40), ttft=0.4)


def test_significant_difference_gives_a_is_better_with_exact_p() -> None:
    result = compare_models(_doc("old", SIG_A), "p/m", _doc("new", SIG_B), "p/m")
    paired = result["paired"]
    assert paired["p_value"] == 2 / 4096
    assert paired["verdict"] == "A is better"
    assert (paired["n"], paired["only_a"], paired["only_b"], paired["both_pass"]) == (15, 12, 0, 3)
    assert [e["case_id"] for e in paired["excluded"]] == ["c15", "c16"]
    assert [f["case_id"] for f in paired["flipped_a_to_b"]] == [f"c{i:02d}" for i in range(12)]
    assert paired["flipped_b_to_a"] == []
    text = compare_text(result)
    assert "Verdict: A is better (McNemar exact p = 0.0004883; on 15 cases both answered, 12 passed only by A, " \
           "0 only by B; alpha 0.05)" in text
    assert "[coding] c00: B failed: p/m fail" in text
    # speed: medians with stdev, and the ratio B/A
    assert "decode A 41.0 +/- 1.0 tok/s, B 39.0 +/- 1.0 tok/s, B/A 0.95" in text
    all_row = next(r for r in result["speed"] if r["prompt"] == "all")
    assert all_row["a_decode_sd"] == pytest.approx(1.0) and all_row["b_ttft_sd"] == 0.0
    assert result["warnings"] == []


def test_three_against_two_is_indistinguishable_and_flips_listed_exactly() -> None:
    a = _model("p/a", _cases("m", "math", "pppff") | _cases("i", "instruct", "pp"))
    b = _model("p/b", _cases("m", "math", "ffppp") | _cases("i", "instruct", "pf"))
    result = compare_models(_doc("r", a, b), "p/a", _doc("r", a, b), "p/b")
    paired = result["paired"]
    # A only: m00, m01, i01 (3); B only: m03, m04 (2)
    assert (paired["only_a"], paired["only_b"]) == (3, 2)
    assert paired["p_value"] == 1.0
    assert paired["verdict"] == "indistinguishable at this sample size"
    assert [(f["case_id"], f["category"]) for f in paired["flipped_a_to_b"]] == \
        [("m00", "math"), ("m01", "math"), ("i01", "instruct")]
    assert [f["case_id"] for f in paired["flipped_b_to_a"]] == ["m03", "m04"]
    assert "B is better" not in compare_text(result) and "A is better" not in compare_text(result)


def test_b_is_better_and_warnings_for_revision_and_sampling() -> None:
    result = compare_models(_doc("r1", SIG_B, revision="rev1"), "p/m",
                            _doc("r2", SIG_A, revision="rev2", temperature=0.7), "p/m")
    assert result["paired"]["verdict"] == "B is better"
    assert result["revision_mismatch"]
    assert any("different case-set revisions (rev1 vs rev2)" in w for w in result["warnings"])
    assert any(w.startswith("different sampling settings") and "0.7" in w for w in result["warnings"])
    assert "WARNING: different case-set revisions" in compare_text(result)


# Recommend: 20 coding cases and 4 instruct cases per model.
ACCURATE = _model("p/accurate", _cases("c", "coding", "p" * 20) | _cases("i", "instruct", "ppff"), decode=(10,))
FAST = _model("p/fast", _cases("c", "coding", "p" * 8 + "f" * 12) | _cases("i", "instruct", "ffff"), decode=(50,))
SLOW = _model("p/slow", _cases("c", "coding", "p" * 8 + "f" * 12) | _cases("i", "instruct", "pppp"), decode=(5,))


def test_recommend_ranks_states_tradeoffs_and_ties() -> None:
    result = recommend([_doc("r", FAST, SLOW, ACCURATE)], "coding")
    ranking = result["ranking"]
    assert [r["model"] for r in ranking] == ["p/accurate", "p/fast", "p/slow"]
    assert [r["score"] for r in ranking] == [1.0, 0.4, 0.4]
    sentences = {r["model"]: r["sentence"] for r in ranking}
    assert sentences["p/accurate"] == "most accurate on coding (100%), but 5.0x slower than p/fast"
    assert sentences["p/fast"].startswith("fastest (50.0 tok/s), but only 40% on coding against 100% for p/accurate")
    assert sentences["p/slow"].startswith("dominated by p/accurate: slower and no better")
    assert ranking[2]["dominated_by"] == "p/accurate" and ranking[1]["on_front"]
    # accurate vs fast: 12 discordant one way (p = 2/4096) -> separable; fast vs slow: identical -> tied
    assert [(t["a"], t["b"]) for t in result["ties"]] == [("p/fast", "p/slow")]
    assert result["ties"][0]["line"].startswith("p/fast and p/slow cannot be told apart on coding with 20 cases")
    text = recommend_text(result)
    assert "1. p/accurate: 100% [84%, 100%] (20/20 cases), 10.0 tok/s" in text
    assert "(* = Pareto front)" in text and "p/fast: 40% at 50.0 tok/s (Pareto front)" in text


def test_job_weighting_changes_the_ranking() -> None:
    result = recommend([_doc("r", FAST, SLOW, ACCURATE)], "instructions")
    assert [r["model"] for r in result["ranking"]] == ["p/slow", "p/accurate", "p/fast"]
    # general: every category weighs the same -> mean of per-category rates
    general = {r["model"]: r["score"] for r in recommend([_doc("r", FAST, SLOW, ACCURATE)], "general")["ranking"]}
    assert general == {"p/accurate": 0.75, "p/slow": 0.7, "p/fast": 0.2}
    # one category: the interval is that category's exact Wilson interval; errors are counted apart
    score = job_score(_model("x", _cases("c", "coding", "ppffe")), JOBS["coding"])
    assert (score["passed"], score["answered"], score["errors"]) == (2, 4, 1)
    assert score["n_eff"] == pytest.approx(4.0)
    tools = job_score(_model("x", _cases("t", "tooluse", "pp") | _cases("a", "agent", "ff")), JOBS["tools"])
    assert tools["score"] == pytest.approx(1.0 / 1.5)


def test_recommend_uses_the_newest_run_of_a_model() -> None:
    old = _doc("old", _model("p/m", _cases("c", "coding", "ffff"), decode=(20,)), created="2025-01-01T00:00:00+00:00")
    new = _doc("new", _model("p/m", _cases("c", "coding", "pppp"), decode=(20,)), created="2025-02-01T00:00:00+00:00")
    result = recommend([new, old], "coding")
    assert [(r["model"], r["run_id"], r["score"]) for r in result["ranking"]] == [("p/m", "new", 1.0)]
    assert result["notes"] == ["p/m is in runs old, new: using the newest, new"]
    assert "note: p/m is in runs old, new" in recommend_text(result)


@pytest.fixture
def stored(home: Path) -> None:
    from forgetui.paths import locations

    runs = locations().runs_dir
    for doc in (_doc("run-a", SIG_A), _doc("run-b", SIG_B), _doc("run-three", FAST, SLOW, ACCURATE)):
        (runs / doc["run_id"]).mkdir(parents=True)
        (runs / doc["run_id"] / "run.json").write_text(json.dumps(doc))


def test_cli_compare_and_recommend(stored: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "run-a", "run-b"]) == 0
    assert "Verdict: A is better" in capsys.readouterr().out
    assert main(["compare", "run-three", "--model-a", "p/fast", "--model-b", "p/slow"]) == 0
    assert "indistinguishable at this sample size" in capsys.readouterr().out
    assert main(["compare", "run-a", "run-b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["paired"]["p_value"] == 2 / 4096
    assert main(["recommend", "run-three", "--job", "coding"]) == 0
    assert "cannot be told apart on coding" in capsys.readouterr().out
    assert main(["recommend", "--job", "weights"]) == 0
    out = capsys.readouterr().out
    assert all(job in out for job in JOBS) and "tooluse 1, agent 0.5" in out


@pytest.mark.parametrize("argv, code, message", [
    (["compare", "run-a", "nope"], 4, "no run named nope"),
    (["compare", "run-three", "--model-a", "p/fast"], 2, "need both --model-a and --model-b"),
    (["compare", "run-three", "--model-a", "p/fast", "--model-b", "p/zzz"], 2, "has no model p/zzz"),
    (["compare", "a", "b", "c"], 2, "compare takes RUN_A RUN_B"),
    (["recommend", "run-three", "--job", "poetry"], 2, "unknown job poetry"),
    (["recommend", "--job", "coding"], 2, "needs at least one RUN"),
])
def test_cli_exit_codes(stored: None, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
                        message: str) -> None:
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_general_job_covers_every_case_category() -> None:
    from forgetui.cases.schema import CATEGORIES
    from forgetui.report.recommend import ALL_CATEGORIES

    assert set(ALL_CATEGORIES) == set(CATEGORIES) == set(JOBS["general"])
    assert all(set(weights) <= set(CATEGORIES) for weights in JOBS.values())


def test_compare_and_recommend_never_import_textual_or_rich() -> None:
    import subprocess
    import sys

    code = ("import sys, forgetui.report.compare, forgetui.report.recommend, forgetui.compare_cmd; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_recommend_says_so_when_no_model_passes_anything() -> None:
    from forgetui.report.recommend import recommend

    zero_a = _model("p/a", _cases("c", "coding", "ffff"), decode=(50,))
    zero_b = _model("p/b", _cases("c", "coding", "ffff"), decode=(20,))
    result = recommend([_doc("r1", zero_a, zero_b)], "coding")
    sentences = {r["model"]: r["sentence"] for r in result["ranking"]}
    assert sentences["p/a"].startswith("passes none of the coding cases (like every model here)")
    assert "clear choice" not in " ".join(sentences.values())
