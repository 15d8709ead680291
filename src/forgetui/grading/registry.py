"""Every grader kind in one table: its parameter model, how to parse it, and how to grade with it.

Case files name a grader by kind (``grader = "numeric"``) and give its parameters as a table;
:func:`parse_params` validates them (unknown keys are errors, they are usually typos) and
:func:`grade` turns one response into a :class:`Verdict`.

:func:`grade` owns the rules every kind shares, so no grader can get them wrong on its own:

* a response cut off by the token limit (``finish_reason == "length"``) always fails, and says
  so: "TRUNCATED at 4096 tokens (3900 reasoning tokens); no final answer". A truncated chain
  of thought is never graded as if it were an answer (crucibleforge §5.1), and the reason
  names what was missing, so a budget problem is never mistaken for a wrong answer;
* an answer that is empty once reasoning is removed fails with "no visible answer (all R tokens
  were reasoning)" rather than a grader-specific "no number found";
* a grader that crashes gives ``error`` (grading broke), never ``fail`` (the model's fault).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from forgetui.config import StrictModel
from forgetui.sandbox import Limits

from .assignments import AssignmentsParams, grade_assignments
from .toolcalls import ToolCallsParams, grade_tool_calls
from .answers import (
    AnyOfParams,
    ContainsParams,
    ExactParams,
    ForbidParams,
    JsonParams,
    NumericParams,
    grade_any_of,
    grade_contains,
    grade_exact,
    grade_forbid,
    grade_json,
    grade_numeric,
)
from .constraints import ConstraintsParams, grade_constraints
from .exec_grader import LANGUAGES, ExecSpec, grade_exec
from .extract import extract_code, final_answer, normalize_language, strip_reasoning
from .verdict import Verdict

__all__ = ["GRADER_KINDS", "ExecParams", "GraderParamsError", "JudgeParams", "grade", "grade_judge", "parse_params"]


class ExecParams(StrictModel):
    """Run the answer's code with the case's tests in the sandbox (see ``exec_grader``)."""

    language: str = Field(default="python", description="python, sh, c, cpp or node.")
    required_name: str | None = Field(default=None,
                                      description="The function or class the answer must define, e.g. 'solve'.")
    sentinel: str = Field(min_length=12,
                          description="Printed by the tests after the last assertion; never in the prompt.")
    test_code: str = Field(min_length=1,
                           description="Appended after the answer's code; prints the sentinel when all tests pass.")
    wall_s: float | None = Field(default=None, gt=0,
                                 description="Wall-clock seconds for the run (default: the sandbox's).")
    cpu_s: float | None = Field(default=None, gt=0, description="CPU seconds per process (default: the sandbox's).")
    memory_mb: int | None = Field(default=None, gt=0,
                                  description="Address space per process in MiB (default: the sandbox's).")
    stdin: str = Field(default="", description="Text fed to the program's standard input.")
    run_as_main: bool = Field(default=False, description="Python: run the answer as __main__ (stdin/stdout tasks).")

    @field_validator("language")
    @classmethod
    def _supported(cls, value: str) -> str:
        if normalize_language(value) not in LANGUAGES:
            raise ValueError(f"unsupported language {value!r} (expected one of {', '.join(LANGUAGES)})")
        return value

    @field_validator("test_code")
    @classmethod
    def _prints_sentinel(cls, value: str, info: ValidationInfo) -> str:
        sentinel = info.data.get("sentinel")
        if sentinel and sentinel not in value:
            raise ValueError("the test code never prints the sentinel")
        return value

    @model_validator(mode="after")
    def _usable(self) -> ExecParams:
        # Whatever else ExecSpec knows to be wrong with a case, caught when the case is loaded.
        problems = self.to_spec().problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def to_spec(self, base: Limits | None = None) -> ExecSpec:
        """The ExecSpec to run; overridden limits replace those fields of ``base`` (the sandbox's
        limits; ``Limits()`` when None), and no override at all leaves the sandbox's limits."""
        overrides: dict[str, Any] = {}
        if self.wall_s is not None:
            overrides["wall_s"] = self.wall_s
        if self.cpu_s is not None:
            overrides["cpu_s"] = self.cpu_s
        if self.memory_mb is not None:
            overrides["memory_bytes"] = self.memory_mb << 20
        limits = dataclasses.replace(base or Limits(), **overrides) if overrides else None
        return ExecSpec(language=self.language, required_name=self.required_name, test_code=self.test_code,
                        sentinel=self.sentinel, limits=limits, stdin=self.stdin, run_as_main=self.run_as_main)


class JudgeParams(StrictModel):
    """Graded by an LLM judge against a reference answer (``grading/judge.py``)."""

    reference: str = Field(min_length=1, description="The reference answer the judge compares with.")
    rubric: str = Field(default="", description="Extra instructions for the judge, e.g. what must be mentioned.")


def grade_judge(params: JudgeParams, text: str) -> Verdict:
    """Code cannot decide a judged case: ``skipped`` (n/a, never failed) until a judge model decides
    it (``grading.judge.judge_case``, called by the case runner with the run's judge)."""
    return Verdict.skipped("no judge configured: judged cases need a [judge] model",
                           {"expected": params.reference, "extracted": strip_reasoning(text).strip(),
                            "rubric": params.rubric})


class AllParams(StrictModel):
    """Several graders on one answer; it passes only when every one passes (e.g. a summary that
    must keep six facts AND stay under a word limit)."""

    graders: list[dict[str, Any]] = Field(min_length=1, description="Sub-graders: tables with a kind and its parameters.")
    _children: list[tuple[str, BaseModel]] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _parse_children(self) -> "AllParams":
        parsed = []
        for index, child in enumerate(self.graders):
            kind = child.get("kind")
            if not isinstance(kind, str) or kind == "all":
                raise ValueError(f"graders[{index}]: needs a kind other than 'all'")
            parsed.append((kind, parse_params(kind, {k: v for k, v in child.items() if k != "kind"})))
        self._children = parsed
        return self

    @property
    def children(self) -> list[tuple[str, BaseModel]]:
        """The parsed sub-graders, as (kind, parameters)."""
        return self._children


async def grade_all(params: AllParams, response: str, sandbox: Any) -> Verdict:
    """Every sub-grader must pass; the reason lists the ones that did not."""
    verdicts = [(kind, await grade(kind, child, response, sandbox=sandbox)) for kind, child in params.children]
    details = {"checks": [{"kind": k, **v.to_dict()} for k, v in verdicts],
               "extracted": next((v.details.get("extracted") for _, v in verdicts if v.details.get("extracted")), None),
               "expected": [v.details.get("expected") for _, v in verdicts]}
    bad = [(k, v) for k, v in verdicts if v.status != "pass"]
    if not bad:
        return Verdict.passed(f"all {len(verdicts)} checks passed", details)
    reason = f"{len(bad)} of {len(verdicts)} checks not passed: " + "; ".join(f"{k}: {v.reason}" for k, v in bad)
    statuses = {v.status for _, v in bad}
    if "fail" in statuses:
        return Verdict.failed(reason, details)
    return Verdict.error(reason, details) if "error" in statuses else Verdict.skipped(reason, details)


#: Grader kind -> its parameter model.
GRADER_KINDS: dict[str, type[BaseModel]] = {
    "all": AllParams,
    "assignments": AssignmentsParams,
    "tool_calls": ToolCallsParams,
    "exec": ExecParams,
    "numeric": NumericParams,
    "exact": ExactParams,
    "contains": ContainsParams,
    "any_of": AnyOfParams,
    "forbid": ForbidParams,
    "json": JsonParams,
    "constraints": ConstraintsParams,
    "judge": JudgeParams,
}

#: The graders that need nothing but the text (all but exec).
_PURE: dict[str, Callable[[Any, str], Verdict]] = {
    "numeric": grade_numeric,
    "exact": grade_exact,
    "contains": grade_contains,
    "any_of": grade_any_of,
    "forbid": grade_forbid,
    "json": grade_json,
    "constraints": grade_constraints,
    "judge": grade_judge,
    "assignments": grade_assignments,
}


class GraderParamsError(ValueError):
    """Bad grader parameters. ``field`` is the dotted path of the first bad field ("checks[0].max",
    "" for the table as a whole), so a caller can point at the line in the case file."""

    def __init__(self, kind: str, message: str, field: str = "", errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field
        self.errors = errors or [message]


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_params(kind: str, data: dict[str, Any]) -> BaseModel:
    """Validate a case's grader parameters for ``kind``.

    ``data`` may still hold ``kind`` (as in a case file's grader table) when it equals ``kind``.
    Raises :class:`GraderParamsError` (a ValueError) naming the kind and the bad field, e.g.
    "numeric grader: field 'answer': Field required".
    """
    model = GRADER_KINDS.get(kind)
    if model is None:
        raise GraderParamsError(kind, f"unknown grader kind {kind!r} (expected one of {', '.join(GRADER_KINDS)})")
    if not isinstance(data, dict):
        raise GraderParamsError(kind, f"{kind} grader: parameters must be a table, got {type(data).__name__}")
    if data.get("kind", kind) == kind:
        # Case files keep the kind inside the grader table ([case.grader] kind = "json"); accept it.
        data = {k: v for k, v in data.items() if k != "kind"}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            msg = str(err["msg"]).removeprefix("Value error, ")
            where = _path(tuple(err["loc"]))
            lines.append(f"field {where!r}: {msg}" if where else msg)
        first = _path(tuple(exc.errors()[0]["loc"]))
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise GraderParamsError(kind, f"{kind} grader: {lines[0]}{more}", first, lines) from None


# --------------------------------------------------------------------------- grading

def _truncated_head(completion_tokens: int | None, reasoning_tokens: int | None) -> str:
    head = f"TRUNCATED at {completion_tokens} tokens"
    if completion_tokens is None:
        head = "TRUNCATED (token count unknown)"
    return head + (f" ({reasoning_tokens} reasoning tokens)" if reasoning_tokens is not None else "")


def _empty_reason(response: str, reasoning_tokens: int | None) -> str:
    if reasoning_tokens:
        return f"no visible answer (all {reasoning_tokens} tokens were reasoning)"
    if response.strip():
        return "no visible answer (only reasoning)"
    return "empty response"


def _truncated(kind: str, params: Any, response: str) -> tuple[str, dict[str, Any]]:
    """What a cut-off response lacks, and the evidence. Nothing is run: the answer failed anyway."""
    if kind == "all":
        return "the answer was cut off", {"extracted": strip_reasoning(response).strip(), "expected": None}
    if kind == "exec":
        ex = extract_code(response, params.language, params.required_name)
        details = {"extracted": ex.code, "extraction_method": ex.method, "expected": _exec_expected(params)}
        if ex.code is None:
            return "no code in response", details
        if ex.method.endswith(":unterminated"):
            return "the code block was cut off", details
        return "cut off after the code (not run)", details
    inner = _PURE[kind](params, response)
    details = {k: inner.details.get(k) for k in ("extracted", "expected")} | {"graded_anyway": inner.to_dict()}
    if kind in ("numeric", "exact", "any_of") and final_answer(response) is None:
        return "no final answer", details
    if kind == "judge":
        return "the answer was cut off (not judged)", details
    return (inner.reason if not inner.ok else "cut off after an answer that would have passed"), details


def _exec_expected(params: ExecParams) -> dict[str, Any]:
    # The sentinel is left out: reports show details, and it has no business being copied around.
    return {"language": normalize_language(params.language), "required_name": params.required_name,
            "outcome": "all tests pass"}


def _expected(kind: str, params: Any) -> Any:
    """What the grader expects, in the shape its own verdicts report it (for verdicts made here)."""
    if kind == "all":
        return [_expected(k, child) for k, child in params.children]
    return _exec_expected(params) if kind == "exec" else _PURE[kind](params, "").details.get("expected")


async def grade(kind: str, params: BaseModel, response: str, *, finish_reason: str | None = None,
                completion_tokens: int | None = None, reasoning_tokens: int | None = None,
                sandbox: Any = None, tool_calls: list[dict[str, Any]] | None = None) -> Verdict:
    """Grade ``response`` with the ``kind`` grader and its parsed ``params``.

    ``finish_reason``/``completion_tokens``/``reasoning_tokens`` come from the server; they
    decide the truncation and no-visible-answer rules (module docstring). ``sandbox`` (a
    ``forgetui.sandbox.Sandbox``) is needed for ``exec`` only; without one exec is skipped.
    """
    model = GRADER_KINDS.get(kind)
    if model is None:
        return Verdict.error(f"unknown grader kind {kind!r}")
    if not isinstance(params, model):
        return Verdict.error(f"{kind} grader given {type(params).__name__} parameters, expected {model.__name__}")
    response = response or ""
    meta = {"finish_reason": finish_reason, "completion_tokens": completion_tokens,
            "reasoning_tokens": reasoning_tokens}
    visible = strip_reasoning(response).strip()
    if kind == "tool_calls":
        # Judged on the structured calls, which carry no visible text: the empty-answer rule does
        # not apply, truncation still does.
        if finish_reason == "length":
            return Verdict.failed(f"{_truncated_head(completion_tokens, reasoning_tokens)}; the calls were cut off",
                                  {"extracted": tool_calls, "expected": None, **meta, "truncated": True})
        try:
            verdict = grade_tool_calls(params, response, tool_calls)  # type: ignore[arg-type]
            answer = getattr(params, "answer", None)
            if verdict.ok and answer:
                # Multi-step: the calls were right; now the final answer built from their results.
                sub_kind = answer["kind"]
                sub = await grade(sub_kind, parse_params(sub_kind, {k: v for k, v in answer.items() if k != "kind"}),
                                  response, sandbox=sandbox)
                details = {**verdict.details, "answer_verdict": sub.to_dict()}
                if not sub.ok:
                    return Verdict(sub.status, f"calls right, final answer not: {sub.reason}", {**details, **meta})
                verdict = Verdict.passed(f"{verdict.reason}; final answer right ({sub.reason})", details)
        except Exception as exc:  # noqa: BLE001 - a grader bug must not look like a wrong answer
            return Verdict.error(f"grader error: {type(exc).__name__}: {exc}", meta)
        return dataclasses.replace(verdict, details={**verdict.details, **meta})
    try:
        if finish_reason == "length":
            if visible:
                missing, details = _truncated(kind, params, response)
            else:
                missing = _empty_reason(response, reasoning_tokens)
                details = {"extracted": "", "expected": _expected(kind, params)}
            head = _truncated_head(completion_tokens, reasoning_tokens)
            return Verdict.failed(f"{head}; {missing}", {**details, **meta, "truncated": True})
        if not visible:
            return Verdict.failed(_empty_reason(response, reasoning_tokens),
                                  {"extracted": "", "expected": _expected(kind, params), **meta})
        if kind == "all":
            assert isinstance(params, AllParams)
            verdict = await grade_all(params, response, sandbox)
            extra = {}
        elif kind == "exec":
            assert isinstance(params, ExecParams)
            if sandbox is None:
                code = extract_code(response, params.language, params.required_name).code
                return Verdict.skipped("no sandbox", {"extracted": code, "expected": _exec_expected(params), **meta})
            verdict = await grade_exec(params.to_spec(getattr(sandbox, "limits", None)), response, sandbox)
            extra = {"extracted": verdict.details.get("code"), "expected": _exec_expected(params)}
        else:
            verdict = _PURE[kind](params, response)
            extra = {}
    except Exception as exc:  # noqa: BLE001 - a grader bug must not look like a wrong answer
        return Verdict.error(f"grader error: {type(exc).__name__}: {exc}", meta)
    return dataclasses.replace(verdict, details={**verdict.details, **extra, **meta})
