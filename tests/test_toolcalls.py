"""The tool-call grader: structured calls checked against expectations and schemas, and a tool
case run end to end through the engine against the fake server's scripted tool calls."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest
import tomli_w

from forgetui.cases.commands import as_tool_calls
from forgetui.cli import main
from forgetui.grading.registry import grade, parse_params
from tests.fakeserver import Script
from tests.conftest import use_case_dir

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city"], "additionalProperties": False}}}]


def params(**kw):
    return parse_params("tool_calls", {"tools": TOOLS, **kw})


def run(p, calls, text=""):
    return asyncio.run(grade("tool_calls", p, text, tool_calls=as_tool_calls(calls)))


def test_parallel_calls_in_any_order_pass_and_count_is_enforced() -> None:
    p = params(expect=[{"name": "get_weather", "arguments": {"city": "Oslo"}},
                       {"name": "get_weather", "arguments": {"city": "Lima"}}])
    both = [{"name": "get_weather", "arguments": {"city": "Lima", "unit": "c"}},
            {"name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert run(p, both).status == "pass"
    v = run(p, both + [{"name": "get_weather", "arguments": {"city": "Rome"}}])
    assert v.status == "fail" and "3 call(s) made, 2 expected" in v.reason
    assert run(params(expect=p.expect, ordered=True), both).status == "fail"


@pytest.mark.parametrize(("args", "why"), [
    ({"city": 3}, "should be string"),
    ({"city": "Oslo", "unit": "k"}, "must be one of"),
    ({"city": "Oslo", "days": 9}, "above maximum"),
    ({"city": "Oslo", "days": True}, "should be integer"),
    ({"city": "Oslo", "extra": 1}, "unknown argument 'extra'"),
    ({"unit": "c"}, "missing required 'city'"),
])
def test_schema_violations_fail_with_the_reason(args, why) -> None:
    v = run(params(expect=[{"name": "get_weather", "arguments": {}}]), [{"name": "get_weather", "arguments": args}])
    assert v.status == "fail" and why in v.reason


def test_no_call_and_text_calls_and_traps() -> None:
    p = params(expect=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    v = run(p, [], text='{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    assert v.status == "fail" and "wrote a call as text" in v.reason
    trap = params(none=True)
    assert run(trap, [], "It needs a city.").status == "pass"
    assert run(trap, [{"name": "get_weather", "arguments": {"city": "Oslo"}}]).status == "fail"


def test_bad_case_definitions_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        params(expect=[{"name": "nope", "arguments": {}}])
    with pytest.raises(ValueError, match="break its schema"):
        params(expect=[{"name": "get_weather", "arguments": {"city": 5}}])
    with pytest.raises(ValueError, match="expect .* or none"):
        params()


def run_cases(home, folder, base_url: str, select: str, write_profile) -> int:
    """Point the config at ``folder`` and run its ``select`` set against the fake model."""
    use_case_dir(home, folder)
    profile = write_profile(textwrap.dedent(f"""\
        name = "tools"
        [[providers]]
        name = "fake"
        base_url = "{base_url}"
        [models]
        targets = ["fake/m"]
        [speed]
        enabled = false
        [cases]
        select = ["{select}"]
        """))
    return main(["--run", str(profile)])


def test_a_tool_case_runs_end_to_end(home, tmp_path, fake, write_profile, capsys) -> None:
    folder = tmp_path / "tc"
    folder.mkdir()
    case = {"case": [{"id": "t.weather", "category": "tooluse", "sets": ["t"], "prompt": "WEATHERQ in Oslo?",
                      "grader": {"kind": "tool_calls", "tools": TOOLS,
                                 "expect": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}}]}
    (folder / "t.toml").write_text(tomli_w.dumps(case))
    server = fake({"m": Script(tool_answers={"WEATHERQ": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]})})
    assert run_cases(home, folder, server.base_url, "t", write_profile) == 0
    sent = server.logs[-1].body
    assert sent["tools"] == TOOLS
    doc = json.loads(next((home / "data" / "runs").iterdir()).joinpath("run.json").read_text())
    result = doc["models"][0]["cases"][0]
    assert result["status"] == "pass" and result["tool_calls"][0]["name"] == "get_weather"


def test_a_multi_step_tool_case_sends_scripted_results_and_grades_the_final_answer(home, tmp_path, fake,
                                                                                    write_profile) -> None:
    folder = tmp_path / "ms"
    folder.mkdir()
    tools = [{"type": "function", "function": {"name": "get_price", "parameters": {
        "type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}}]
    case = {"case": [{"id": "t.multi", "category": "tooluse", "sets": ["ms"], "prompt": "PRICEQ: 3 apples cost?",
                      "grader": {"kind": "tool_calls", "tools": tools,
                                 "expect": [{"name": "get_price", "arguments": {"item": "apple"}}],
                                 "results": {"get_price": {"item": "apple", "price": 0.5}},
                                 "answer": {"kind": "numeric", "answer": 1.5, "tolerance": 0.001}}}]}
    (folder / "m.toml").write_text(tomli_w.dumps(case))
    server = fake({"m": Script(tool_answers={"PRICEQ": [{"name": "get_price", "arguments": {"item": "apple"}}]},
                               answers={"PRICEQ": "Each apple is 0.50, so three cost 1.50.\nFinal answer: 1.5"})})
    assert run_cases(home, folder, server.base_url, "ms", write_profile) == 0
    chats = [log.body for log in server.logs if log.path.endswith("/chat/completions")]
    assert len(chats) == 2
    follow_up = chats[1]["messages"]
    assert follow_up[-2]["role"] == "assistant" and follow_up[-2]["tool_calls"][0]["function"]["name"] == "get_price"
    assert follow_up[-1]["role"] == "tool" and json.loads(follow_up[-1]["content"])["price"] == 0.5
    doc = json.loads(next((home / "data" / "runs").iterdir()).joinpath("run.json").read_text())
    result = doc["models"][0]["cases"][0]
    assert result["status"] == "pass" and result["steps"] == 2, result["reason"]
    assert "final answer right" in result["reason"]
