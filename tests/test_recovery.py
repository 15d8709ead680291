"""Thinking models that lose their answer (re-asked with thinking off) and ``forgetui recover RUN``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx
import pytest

from forgetui.cli import main
from forgetui.config import ProviderConfig
from forgetui.engine.accumulate import Accumulated, ToolCallBuilder
from forgetui.engine.client import ChatRequest, StreamResult
from forgetui.engine.recovery import TAG_SWITCH, lost_answer, thinking_off
from forgetui.engine.rundoc import latest_per_key
from forgetui.providers import DIALECTS
from forgetui.store import read_records
from tests.fakeserver import Script
from tests.conftest import use_case_dir

CASES = textwrap.dedent('''\
    [[case]]
    id = "rec.math"
    category = "math"
    sets = ["rec"]
    max_tokens = 20
    prompt = "THINKQ: what is 40 + 2? End with 'Final answer: N'."
    [case.grader]
    kind = "numeric"
    answer = 42

    [[case]]
    id = "rec.capital"
    category = "reasoning"
    sets = ["rec"]
    max_tokens = 200
    prompt = "CAPQ: the capital of France?"
    [case.grader]
    kind = "exact"
    expected = "Paris"

    [[case]]
    id = "rec.colour"
    category = "reasoning"
    sets = ["rec"]
    max_tokens = 200
    prompt = "SKYQ: the colour of a clear sky at noon?"
    [case.grader]
    kind = "exact"
    expected = "blue"
    ''')

ANSWERS = {"THINKQ": "Final answer: 42", "CAPQ": "Final answer: Paris", "SKYQ": "Final answer: blue"}
PROMPT_KEYS = tuple(ANSWERS)


def _setup(home: Path, tmp_path: Path, write_profile, base_url: str, *, kind: str | None = "llamacpp",
           speed: str = "enabled = false", limits: str = "") -> Path:
    use_case_dir(home, tmp_path / "reccases", {"rec.toml": CASES})
    kind_line = f'kind = "{kind}"' if kind else ""
    return write_profile(textwrap.dedent(f"""\
        name = "recovery"
        [[providers]]
        name = "fake"
        base_url = "{base_url}"
        {kind_line}
        [models]
        targets = ["fake/m"]
        [speed]
        {speed}
        [cases]
        select = ["rec"]
        [limits]
        idle_timeout_s = 5
        request_timeout_s = 20
        """) + limits)


def _run_dir(home: Path) -> Path:
    return next((home / "data" / "runs").iterdir())


def _doc(home: Path) -> dict:
    return json.loads((_run_dir(home) / "run.json").read_text())


def _cases(doc: dict) -> dict[str, dict]:
    return {c["case_id"]: c for c in doc["models"][0]["cases"]}


def _chat_logs(server) -> list:
    return [log for log in server.logs if log.path.endswith("/chat/completions")]


def _which(log) -> str:
    """Which case (by its prompt key) a logged request asked; "speed" for a speed request."""
    text = json.dumps(log.body.get("messages"))
    return next((k for k in PROMPT_KEYS if k in text), "speed")


# -- the re-ask inside a run ----------------------------------------------------------------------


def test_thinking_model_that_loses_its_answer_is_reasked_with_thinking_off(home, tmp_path, fake, write_profile,
                                                                           capsys) -> None:
    server = fake({"m": Script(reasoning_tokens=50, thinking_switch=True, answers=ANSWERS, gap_s=0.001)})
    profile = _setup(home, tmp_path, write_profile, server.base_url)
    assert main(["--run", str(profile)]) == 0
    out = capsys.readouterr().out
    cases = _cases(_doc(home))
    math = cases["rec.math"]
    assert math["status"] == "pass" and math["recovered"] is True
    assert math["recovery"]["switch"] == "chat_template_kwargs.enable_thinking=false"
    assert math["recovery"]["first_finish"] == "length" and math["recovery"]["first_reasoning_tokens"] == 20
    [first] = math["attempts"]
    assert first["finish_reason"] == "length" and first["response"] == "" and first["reasoning"].startswith("r0 r1")
    assert first["usage"]["completion_tokens"] == 20  # both usages kept: the lost one here ...
    assert math["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0  # ... the answering one on top
    assert math["finish_reason"] == "stop" and math["response"] == "Final answer: 42"
    assert "thinking used 20 tokens (20 reasoning)" in first["reason"]
    # The budget was enough for the other cases: answered while thinking, never asked again.
    for other in ("rec.capital", "rec.colour"):
        assert cases[other]["status"] == "pass" and "recovered" not in cases[other]
        assert not cases[other].get("attempts")
    logs = _chat_logs(server)
    asked = [_which(log) for log in logs]
    assert asked.count("THINKQ") == 2 and asked.count("CAPQ") == 1 and asked.count("SKYQ") == 1
    first_req, second_req = [log.body for log in logs if _which(log) == "THINKQ"]
    assert "chat_template_kwargs" not in first_req
    assert second_req["chat_template_kwargs"] == {"enable_thinking": False}
    assert second_req["messages"] == first_req["messages"]  # the same question, no prompt tag
    assert second_req["max_tokens"] == first_req["max_tokens"] == 20
    # Counted in run.json, summary.json and the printed summary.
    doc = _doc(home)
    assert doc["models"][0]["cases_summary"]["recoveries"] == 1
    summary = json.loads((_run_dir(home) / "summary.json").read_text())
    assert summary["models"][0]["cases_summary"]["recoveries"] == 1
    assert "1 recovered (thinking off)" in out


def test_a_reask_that_fails_too_keeps_both_attempts_and_fails_with_its_own_reason(home, tmp_path, fake,
                                                                                 write_profile) -> None:
    # thinking_switch off: this model thinks whatever it is told.
    server = fake({"m": Script(reasoning_tokens=50, answers=ANSWERS, gap_s=0.001)})
    profile = _setup(home, tmp_path, write_profile, server.base_url, kind=None)  # generic OpenAI-style
    assert main(["--run", str(profile)]) == 1
    math = _cases(_doc(home))["rec.math"]
    assert math["status"] == "fail" and math["recovered"] is True
    assert math["reason"].startswith("TRUNCATED at 20 tokens (20 reasoning tokens)")
    assert math["recovery"]["switch"] == "reasoning_effort=low"
    assert len(math["attempts"]) == 1 and math["attempts"][0]["finish_reason"] == "length"
    assert math["finish_reason"] == "length" and math["usage"]["completion_tokens"] == 20
    bodies = [log.body for log in _chat_logs(server) if _which(log) == "THINKQ"]
    assert len(bodies) == 2 and "reasoning_effort" not in bodies[0] and bodies[1]["reasoning_effort"] == "low"
    summary = _doc(home)["models"][0]["cases_summary"]
    assert summary["reasks"] == 1 and summary["recoveries"] == 0  # re-asked, but no answer came back


def test_a_model_that_answers_is_never_reasked(home, tmp_path, fake, write_profile, capsys) -> None:
    server = fake({"m": Script(reasoning_tokens=5, thinking_switch=True, answers=ANSWERS, gap_s=0.001)})
    profile = _setup(home, tmp_path, write_profile, server.base_url)
    assert main(["--run", str(profile)]) == 0
    assert len(_chat_logs(server)) == 3
    assert all("chat_template_kwargs" not in log.body for log in _chat_logs(server))
    doc = _doc(home)
    assert doc["models"][0]["cases_summary"]["recoveries"] == 0
    assert not any(c.get("recovered") or c.get("attempts") for c in doc["models"][0]["cases"])
    assert "recovered" not in capsys.readouterr().out


# -- lost_answer and the switches, unit by unit ---------------------------------------------------


def _result(content: str = "", reasoning: str = "", finish: str | None = "length", outcome: str = "finished",
            usage: dict | None = None, calls: int = 0) -> StreamResult:
    acc = Accumulated(finish_reason=finish, usage=usage)
    if content:
        acc.add_content(content)
    if reasoning:
        acc.add_reasoning(reasoning)
    acc.tool_calls = [ToolCallBuilder(index=i, name="f") for i in range(calls)]
    return StreamResult(outcome=outcome, acc=acc)


def test_lost_answer_needs_no_content_some_reasoning_and_the_budget_used() -> None:
    req = ChatRequest(base_url="http://x/v1", model="m", messages=[], max_tokens=20)
    assert lost_answer(req, _result(reasoning="hmm"))
    assert lost_answer(req, _result(usage={"completion_tokens": 20,
                                           "completion_tokens_details": {"reasoning_tokens": 20}}))
    assert not lost_answer(req, _result(content="42", reasoning="hmm"))  # it answered (cut or not)
    assert not lost_answer(req, _result())  # nothing at all: not a thinking problem
    assert not lost_answer(req, _result(reasoning="hmm", finish="stop"))  # stopped on its own
    assert not lost_answer(req, _result(reasoning="hmm", calls=1))  # a tool call is an answer
    cut = {"completion_tokens": 20}
    assert lost_answer(req, _result(reasoning="hmm", finish=None, outcome="truncated", usage=cut))
    assert not lost_answer(req, _result(reasoning="hmm", finish=None, outcome="truncated"))  # cap not known
    assert not lost_answer(req, _result(reasoning="hmm", finish=None, outcome="connect_error"))


@pytest.mark.parametrize("kind, switch, field, value", [
    ("llamacpp", "chat_template_kwargs.enable_thinking=false", "chat_template_kwargs",
     {"keep": 1, "enable_thinking": False}),
    ("vllm", "chat_template_kwargs.enable_thinking=false", "chat_template_kwargs",
     {"keep": 1, "enable_thinking": False}),
    ("sglang", "chat_template_kwargs.enable_thinking=false", "chat_template_kwargs",
     {"keep": 1, "enable_thinking": False}),
    ("ollama", "think=false", "think", False),
    ("openai", "reasoning_effort=low", "reasoning_effort", "low"),
])
async def test_no_thinking_sets_each_servers_documented_switch(kind, switch, field, value) -> None:
    provider = ProviderConfig(name="p", base_url="http://127.0.0.1:9/v1", kind=kind,
                              extra_body={"chat_template_kwargs": {"keep": 1}})
    async with httpx.AsyncClient() as http:
        dialect = DIALECTS[kind](provider, http)
        plain = ChatRequest(base_url=provider.base_url, model="m", max_tokens=20,
                            messages=[{"role": "user", "content": "Q?"}], extra_body=dict(provider.extra_body))
        switched, used = thinking_off(dialect, plain)
        assert used == switch and switched.messages == plain.messages  # no prompt tag
        body = dialect.prepare(switched, "case").body(True)
        assert body[field] == value
        assert plain.extra_body == {"chat_template_kwargs": {"keep": 1}}  # the original is untouched
        if kind == "ollama":
            assert dialect.prepare(switched, "case").path == "/api/chat"


@pytest.mark.parametrize("kind", ["lmstudio", "llamacpp-python"])
async def test_servers_without_a_switch_get_the_no_think_prompt_tag(kind) -> None:
    provider = ProviderConfig(name="p", base_url="http://127.0.0.1:9/v1", kind=kind)
    async with httpx.AsyncClient() as http:
        dialect = DIALECTS[kind](provider, http)
        assert dialect.no_thinking(ChatRequest(base_url="http://x/v1", model="m", messages=[], max_tokens=1)) is None
        plain = ChatRequest(base_url=provider.base_url, model="m", max_tokens=20,
                            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}])
        switched, used = thinking_off(dialect, plain)
    assert used == TAG_SWITCH
    assert switched.messages[-1] == {"role": "user", "content": "Q?\n/no_think"}
    assert switched.messages[0] == plain.messages[0] and plain.messages[-1]["content"] == "Q?"
    assert switched.extra_body == plain.extra_body


async def test_a_switch_already_set_by_the_provider_falls_back_to_the_tag() -> None:
    provider = ProviderConfig(name="p", base_url="http://127.0.0.1:9/v1", kind="llamacpp",
                              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    async with httpx.AsyncClient() as http:
        dialect = DIALECTS["llamacpp"](provider, http)
        plain = ChatRequest(base_url=provider.base_url, model="m", max_tokens=20, extra_body=dict(provider.extra_body),
                            messages=[{"role": "user", "content": [{"type": "text", "text": "Q?"}]}])
        switched, used = thinking_off(dialect, plain)
    assert used == TAG_SWITCH
    assert switched.messages[-1]["content"][-1] == {"type": "text", "text": "/no_think"}


def test_latest_per_key_keeps_the_highest_seq_and_every_speed_record() -> None:
    recs = [{"kind": "speed_request", "key": "s", "seq": 0}, {"kind": "case_result", "key": "a", "seq": 1, "v": 1},
            {"kind": "case_result", "key": "b", "seq": 2}, {"kind": "speed_request", "key": "s", "seq": 3},
            {"kind": "case_result", "key": "a", "seq": 4, "v": 2}]
    kept = latest_per_key(recs)
    assert [r["seq"] for r in kept] == [0, 2, 3, 4]
    assert [r.get("v") for r in latest_per_key(list(reversed(recs))) if r["key"] == "a"] == [2]  # not file order


# -- forgetui recover RUN --------------------------------------------------------------------------


def test_recover_reruns_exactly_the_failed_rows_and_merges_them(home, tmp_path, fake, write_profile,
                                                                capsys) -> None:
    server = fake({"m": Script(answers=ANSWERS, gap_s=0.001, content_tokens=4)})
    profile = _setup(home, tmp_path, write_profile, server.base_url,
                     speed='prompts = ["short"]\nwarmup = 0\nrepeats = 1\nmax_tokens = 8\nprefill_baseline = false',
                     limits="retries = 0\n")
    # Request 1 is the speed request; cases follow in library order: 2 math, 3 capital, 4 colour.
    server.scripts["m"].faults.update({3: "500", 4: "drop"})
    assert main(["--run", str(profile)]) == 1
    run_dir = _run_dir(home)
    before = _cases(_doc(home))
    assert before["rec.math"]["status"] == "pass"
    assert before["rec.capital"]["status"] == "error" and before["rec.capital"]["outcome"] == "http_error"
    assert before["rec.colour"]["status"] == "error" and before["rec.colour"]["outcome"] == "truncated"
    lines_before = (run_dir / "records.jsonl").read_text().splitlines()
    math_line = next(json.loads(x) for x in lines_before if '"rec.math"' in x)
    sent_before = len(server.logs)
    capsys.readouterr()

    assert main(["recover", run_dir.name]) == 0
    out = capsys.readouterr().out
    sent = [log for log in server.logs[sent_before:] if log.path.endswith("/chat/completions")]
    assert sorted(_which(log) for log in sent) == ["CAPQ", "SKYQ"]  # nothing else, no speed request
    after = _cases(_doc(home))
    assert after["rec.capital"]["status"] == "pass" and after["rec.colour"]["status"] == "pass"
    assert after["rec.math"]["status"] == "pass"
    records = read_records(run_dir / "records.jsonl").records
    assert len(records) == len(lines_before) + 2  # appended; the old lines stay
    assert (run_dir / "records.jsonl").read_text().splitlines()[: len(lines_before)] == lines_before
    assert [r["case"]["status"] for r in records if r.get("key") == "fake/m|case|rec.capital"] == ["error", "pass"]
    math_now = [r for r in records if r.get("key") == "fake/m|case|rec.math"]
    assert math_now == [math_line]  # the passing row is untouched
    doc = _doc(home)
    assert doc["status"] == "complete" and doc["totals"]["cases"] == 3 and doc["totals"]["cases_failed"] == 0
    assert doc["models"][0]["speed"]["prompts"][0]["requests"]  # speed results kept as they were
    [entry] = doc["recovers"]
    assert entry["status"] == "complete" and sorted(entry["rows"]) == ["fake/m|case|rec.capital", "fake/m|case|rec.colour"]
    assert "fake/m rec.capital: error (request failed: http_error: HTTP 500" in out and "-> pass" in out
    assert "fake/m rec.colour: request failed (truncated)" in out
    assert "Recovering 2 row(s)" in out

    # Nothing left: a second recover asks nothing and says so.
    sent_before = len(server.logs)
    assert main(["recover", run_dir.name]) == 0
    assert "Nothing to recover" in capsys.readouterr().out
    assert len(server.logs) == sent_before


def test_recover_reruns_a_lost_thinking_answer_with_the_reask(home, tmp_path, fake, write_profile, capsys) -> None:
    # First the model ignores the switch: the row ends truncated even after the re-ask.
    server = fake({"m": Script(reasoning_tokens=50, answers=ANSWERS, gap_s=0.001)})
    profile = _setup(home, tmp_path, write_profile, server.base_url)
    assert main(["--run", str(profile)]) == 1
    run_dir = _run_dir(home)
    assert _cases(_doc(home))["rec.math"]["status"] == "fail"
    server.scripts["m"].thinking_switch = True  # now it honours the switch
    sent_before = len(server.logs)
    assert main(["recover", run_dir.name]) == 0
    sent_logs = [log for log in server.logs[sent_before:] if log.path.endswith("/chat/completions")]
    assert [_which(log) for log in sent_logs] == ["THINKQ", "THINKQ"]
    sent = [log.body for log in sent_logs]
    assert "chat_template_kwargs" not in sent[0] and sent[1]["chat_template_kwargs"] == {"enable_thinking": False}
    math = _cases(_doc(home))["rec.math"]
    assert math["status"] == "pass" and math["recovered"] is True and len(math["attempts"]) == 1
    assert _doc(home)["models"][0]["cases_summary"]["recoveries"] == 1


def test_recover_names_an_unknown_run(home, capsys) -> None:
    assert main(["recover", "no-such-run"]) == 4
    assert "no-such-run" in capsys.readouterr().err


def test_recover_with_the_server_gone_changes_no_row(home, tmp_path, fake, write_profile, capsys) -> None:
    server = fake({"m": Script(answers=ANSWERS, gap_s=0.001)})
    profile = _setup(home, tmp_path, write_profile, server.base_url, limits="retries = 0\n")
    server.scripts["m"].faults.update({2: "500"})
    assert main(["--run", str(profile)]) == 1
    run_dir = _run_dir(home)
    lines = (run_dir / "records.jsonl").read_text()
    server.stop()
    assert main(["recover", run_dir.name]) == 1
    assert (run_dir / "records.jsonl").read_text() == lines
    doc = _doc(home)
    assert _cases(doc)["rec.capital"]["status"] == "error" and doc["models"][0]["error"] is None
    [entry] = doc["recovers"]
    assert entry["rows"] == ["fake/m|case|rec.capital"] and "fake/m" in entry["errors"]
    assert "unreachable" in capsys.readouterr().err


def test_recovery_modules_never_import_textual_or_rich() -> None:
    import os
    import subprocess
    import sys

    code = ("import sys, forgetui.engine.recovery, forgetui.engine.recover, forgetui.recover_cmd; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
            "print(bad); sys.exit(1 if bad else 0)")
    src = Path(__file__).resolve().parents[1] / "src"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(src)},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
