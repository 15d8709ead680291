"""The tool-call grader: calls made through the API's ``tools``, checked by code.

A case offers tools (OpenAI function definitions) and says what must happen:

* ``expect``: the calls that must be made in this turn, each by ``name`` with ``arguments`` that
  must hold exactly those values (other arguments may be present; every argument is checked
  against the tool's JSON schema), optionally in ``ordered`` order;
* ``count``: the exact number of calls (parallel calls in one turn), defaulting to len(expect);
* ``none = true``: a trap where the right answer is to call nothing (e.g. the user only asked
  what the tool does, or the tool cannot do what is asked);
* multi-step: ``results`` scripts what each tool returns; the case runner sends the results back
  and lets the model continue (up to ``max_steps`` turns), ``expect`` covers the calls of all
  turns, and ``answer`` grades the final text (e.g. a number computed from the tool results).

Calls are read from the structured ``tool_calls`` of the response, never from text: a model that
writes a JSON call into its answer instead of making it did not call the tool. The schema check
covers the JSON-schema subset tool definitions use: type, properties, required, enum, items,
additionalProperties: false, minimum/maximum.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, model_validator

from forgetui.config import StrictModel

from .verdict import Verdict

_TYPES = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool,
    "array": list, "object": dict, "null": type(None),
}


class ExpectedCall(StrictModel):
    """One call that must be made."""

    name: str = Field(description="The function name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Argument values that must match exactly.")


class ToolCallsParams(StrictModel):
    """Parameters of the ``tool_calls`` grader (the tools themselves are the case's ``tools``)."""

    tools: list[dict[str, Any]] = Field(min_length=1, description="OpenAI tool definitions offered to the model.")
    expect: list[ExpectedCall] = Field(default_factory=list, description="Calls that must be made.")
    count: int | None = Field(default=None, ge=0, description="Exact number of calls (default: len(expect)).")
    ordered: bool = Field(default=False, description="The calls must come in the order of expect.")
    none: bool = Field(default=False, description="A trap: the right answer makes no call at all.")
    results: dict[str, Any] = Field(
        default_factory=dict,
        description="Multi-step: scripted result per tool name, sent back after each call; "
        "expect then lists the calls of all steps.",
    )
    max_steps: int = Field(default=4, ge=1, le=10, description="Multi-step: most model turns.")
    answer: dict[str, Any] | None = Field(
        default=None, description="Multi-step: a grader (kind + parameters) for the final text answer."
    )

    @model_validator(mode="after")
    def _consistent(self) -> "ToolCallsParams":
        names = {tool_name(t) for t in self.tools}
        if None in names:
            raise ValueError("every tool needs function.name")
        for call in self.expect:
            if call.name not in names:
                raise ValueError(f"expect names an unknown tool {call.name!r}")
            problems = check_schema(call.arguments, tool_schema(self.tools, call.name), "arguments", partial=True)
            if problems:
                raise ValueError(f"expected arguments of {call.name} break its schema: {problems[0]}")
        if self.none and self.expect:
            raise ValueError("none = true and expect cannot both be given")
        if not self.none and not self.expect:
            raise ValueError("give expect (the calls that must be made) or none = true")
        return self


def tool_name(tool: dict[str, Any]) -> str | None:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return fn.get("name") if isinstance(fn, dict) else None


def tool_schema(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for tool in tools:
        if tool_name(tool) == name:
            return tool["function"].get("parameters") or {"type": "object"}
    return {}


def check_schema(value: Any, schema: dict[str, Any], where: str, partial: bool = False) -> list[str]:
    """Problems of ``value`` against a JSON-schema subset (``partial``: skip ``required``)."""
    problems: list[str] = []
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds and not any(_is(value, k) for k in kinds):
        return [f"{where} should be {'/'.join(kinds)}, got {type(value).__name__} {json.dumps(value)[:40]}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where} must be one of {schema['enum']}, got {json.dumps(value)[:40]}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where} below minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where} above maximum {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        if not partial:
            problems += [f"{where} is missing required '{key}'" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if key in props:
                problems += check_schema(item, props[key], f"{where}.{key}", partial)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where} has unknown argument '{key}'")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems += check_schema(item, schema["items"], f"{where}[{index}]", partial)
    return problems


def _is(value: Any, kind: str) -> bool:
    expected = _TYPES.get(kind)
    if expected is None:
        return True
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, expected)


def _matches(call: dict[str, Any], expected: ExpectedCall) -> bool:
    args = call.get("arguments_parsed")
    return call.get("name") == expected.name and isinstance(args, dict) and all(
        key in args and args[key] == value for key, value in expected.arguments.items())


def grade_tool_calls(params: ToolCallsParams, text: str, tool_calls: list[dict[str, Any]] | None) -> Verdict:
    """Check the structured calls of one response against the case's expectation."""
    calls = tool_calls or []
    shown = [{"name": c.get("name"), "arguments": c.get("arguments_parsed", c.get("arguments"))} for c in calls]
    expected: Any = "no tool call" if params.none else [e.model_dump() for e in params.expect]
    details = {"extracted": shown, "expected": expected}
    if params.none:
        if calls:
            return Verdict.failed(f"called {', '.join(str(c.get('name')) for c in calls)} although no call was right", details)
        return Verdict.passed("no tool call, as required", details)
    if not calls:
        wrote = " (it wrote a call as text instead of making it)" if '"name"' in text or "function" in text else ""
        return Verdict.failed(f"no tool call made{wrote}", details)
    problems: list[str] = []
    names = {tool_name(t) for t in params.tools}
    for index, call in enumerate(calls):
        if call.get("name") not in names:
            problems.append(f"call {index + 1} uses an unknown tool {call.get('name')!r}")
            continue
        if call.get("arguments_parsed") is None:
            problems.append(f"call {index + 1} ({call.get('name')}) has arguments that are not JSON: {str(call.get('arguments'))[:60]!r}")
            continue
        problems += check_schema(call["arguments_parsed"], tool_schema(params.tools, call["name"]), f"{call['name']}(...)")
    want = params.count if params.count is not None else len(params.expect)
    if len(calls) != want:
        problems.append(f"{len(calls)} call(s) made, {want} expected")
    remaining = list(calls)
    for position, exp in enumerate(params.expect):
        match = next((c for c in remaining if _matches(c, exp)), None)
        if match is None:
            same = [c for c in remaining if c.get("name") == exp.name]
            got = f"; got {json.dumps(same[0].get('arguments_parsed'))[:80]}" if same else ""
            problems.append(f"no call {exp.name}({json.dumps(exp.arguments)[:80]}){got}")
            continue
        if params.ordered and calls.index(match) != position:
            problems.append(f"{exp.name} came at position {calls.index(match) + 1}, expected {position + 1}")
        remaining.remove(match)
    if problems:
        return Verdict.failed("; ".join(problems[:4]) + (f" (+{len(problems) - 4} more)" if len(problems) > 4 else ""),
                              details | {"problems": problems})
    return Verdict.passed(f"{len(calls)} correct tool call(s)", details)
