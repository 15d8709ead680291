"""Grade code by running it: the model's code plus the case's tests, in the sandbox.

A response passes only when the case's **sentinel** shows up on stdout and the program ended
normally. The test code prints the sentinel after its last assertion, so a bare exit status of 0
proves nothing (``sys.exit(0)`` at the top of an answer would fake it).

Rules for case authors:

* Keep the sentinel out of the prompt, the system prompt and any example: a model that can see
  it can print it. :func:`new_sentinel` makes a fresh one. As a second line of defence, an answer
  whose code contains the sentinel fails ("the answer contains the sentinel").
* Make the tests robust against answers that game comparisons (an object whose ``__eq__``
  always returns True): compare types too, e.g. ``assert type(r) is int and r == 4``.
* The model's code and the tests share one process, so a deliberately hostile answer could read
  the program's own source to find the sentinel. The grader measures ability, not adversarial
  robustness; the sandbox still contains what such code can do.
* Enforce complexity with input size and the case's ``limits`` (wall and CPU seconds), with a
  wide margin between the intended solution and the naive one on a slow machine.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from forgetui.sandbox import Limits, Sandbox, SandboxResult, SandboxUnavailable

from .extract import extract_code, normalize_language
from .verdict import Verdict

__all__ = ["ExecSpec", "build_program", "grade_exec", "new_sentinel"]

#: Languages the sandbox can run.
LANGUAGES = ("python", "sh", "c", "cpp", "node")
#: How much of stdout/stderr a verdict keeps (the end, where failures are reported).
TAIL_BYTES = 4096
_SENTINEL_MIN_LEN = 12


def new_sentinel() -> str:
    """A fresh unguessable sentinel for a new case, e.g. ``FTUI_OK_3f9a1c2b7d4e8a06``."""
    return f"FTUI_OK_{secrets.token_hex(8)}"


@dataclass(frozen=True)
class ExecSpec:
    """How to run and judge one code case."""

    language: str = "python"
    required_name: str | None = None  # the function/class the answer must define, e.g. "solve"
    test_code: str = ""  # appended after the model's code; prints the sentinel only when every test passed
    sentinel: str = ""  # must appear on stdout; random-looking, never in the prompt
    limits: Limits | None = None  # per-case limits; None uses the sandbox's
    stdin: str = ""
    #: Python only. False (function tasks): the answer runs as module "solution", so a
    #: ``if __name__ == "__main__":`` demo block that models like to add (often reading input())
    #: does not run. True (stdin/stdout tasks): the answer runs as the main program.
    run_as_main: bool = False

    def problems(self) -> list[str]:
        """What is wrong with this spec as a case (empty when it is usable)."""
        out = []
        if normalize_language(self.language) not in LANGUAGES:
            out.append(f"unsupported language {self.language!r} (expected one of {', '.join(LANGUAGES)})")
        if len(self.sentinel.strip()) < _SENTINEL_MIN_LEN:
            # An empty or short sentinel would be found in almost any output: a free pass.
            out.append(f"the sentinel must be at least {_SENTINEL_MIN_LEN} characters")
        elif self.sentinel not in self.test_code:
            out.append("the test code never prints the sentinel")
        return out


def build_program(spec: ExecSpec, code: str) -> str:
    """The program the sandbox runs: the model's code, then the test code.

    For C/C++ the model's own ``main`` (models often add one) is renamed with a macro so the
    test code's ``main`` is the one that runs, and ``#line`` keeps compiler messages pointing
    at the model's own line numbers ("solution.c:3:5: error: ...").
    """
    lang = normalize_language(spec.language)
    if lang in ("c", "cpp"):
        ext = "c" if lang == "c" else "cpp"
        return (f"#define main forgetui_model_main\n#line 1 \"solution.{ext}\"\n{code.rstrip()}\n"
                f"#undef main\n#line 1 \"tests.{ext}\"\n{spec.test_code}\n")
    if spec.run_as_main:
        return f"{code.rstrip()}\n\n{spec.test_code}\n"
    # Run the answer under its own module name, then expose its names to the tests. Tracebacks
    # still point at "solution.py" and the answer's own line numbers.
    return (
        f"_forgetui_ns = {{'__name__': 'solution', '__builtins__': __builtins__}}\n"
        f"exec(compile({code.rstrip()!r}, 'solution.py', 'exec'), _forgetui_ns)\n"
        f"globals().update({{k: v for k, v in _forgetui_ns.items() if not k.startswith('__')}})\n"
        f"del _forgetui_ns\n\n{spec.test_code}\n"
    )


def _tail(text: str, limit: int = TAIL_BYTES) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return "…" + data[-limit:].decode("utf-8", "ignore")


def _last_line(stderr: str) -> str:
    """The line that names the failure: a Python traceback's exception line, else the last line."""
    lines = [ln.rstrip() for ln in stderr.splitlines() if ln.strip()]
    header = max((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")),
                 default=None)
    if header is not None:
        # The exception line is the last unindented one after the traceback header (notes and
        # later output can follow it, indented lines are frames).
        for ln in reversed(lines[header + 1:]):
            if not ln[0].isspace():
                return ln.strip()
    return lines[-1].strip() if lines else ""


# "solution.c:3:5: error: expected ';' before '}' token" (also "fatal error:" for a missing header)
_GCC_ERROR = re.compile(r"^[^\s:][^:\n]*:\d+(?::\d+)?: (?:fatal )?error: .+$", re.MULTILINE)
_LINK_ERROR = re.compile(r"undefined reference to [^\n]+")


def _compile_error(result: SandboxResult) -> str | None:
    """The first compiler error line, when the C/C++ program failed to build (else None).

    The sandbox marks a failed build with a reason starting "compile error"; only then is stderr
    read as compiler output, so a program that prints "error: ..." itself is never mistaken for one.
    """
    if not (result.reason or "").startswith("compile error"):
        return None
    stderr = result.stderr or ""
    m = _GCC_ERROR.search(stderr) or _LINK_ERROR.search(stderr)
    if m:
        return m.group(0).strip()
    _, _, detail = result.reason.partition(": ")
    return detail.strip() or result.reason


def _limit_value(limits: Limits | None, attr: str, measured: float | None) -> str:
    # The configured limit, not the measured time: "wall_timeout after 15 s" reads the same on
    # every run, while the measured time jitters around it.
    value = getattr(limits, attr, None) if limits is not None else None
    if value is None:
        value = measured
    return f"{value:g}" if isinstance(value, (int, float)) else "?"


def _failure_reason(spec: ExecSpec, result: SandboxResult, limits: Limits | None) -> str:
    status = result.status
    if status == "wall_timeout":
        if "compiling" in (result.reason or ""):
            return result.reason  # the build, not the program, ran out of time
        return f"wall_timeout after {_limit_value(limits, 'wall_s', result.wall_s)} s"
    if status == "cpu_limit":
        return f"cpu_limit after {_limit_value(limits, 'cpu_s', result.cpu_s)} s CPU"
    if status in ("memory_limit", "output_limit"):
        return status
    err = _compile_error(result)
    if err:
        return f"compile error: {err}"
    if status == "signal":
        return result.label
    if status == "ok":
        return "sentinel missing"
    line = _last_line(result.stderr or "")
    if line:
        return line[:300]
    return f"exit code {result.exit_code}" if result.exit_code is not None else (result.label or status)


def _result_details(result: SandboxResult) -> dict[str, Any]:
    return {
        "sandbox_status": result.status,
        "sandbox_label": result.label,
        "sandbox_reason": result.reason,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "stdout_tail": _tail(result.stdout or ""),
        "stderr_tail": _tail(result.stderr or ""),
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "wall_s": result.wall_s,
        "cpu_s": result.cpu_s,
        "sandboxed": result.sandboxed,
    }


async def grade_exec(spec: ExecSpec, response: str, sandbox: Sandbox) -> Verdict:
    """Extract the code from ``response``, run it with the case's tests, and judge the run.

    ``pass``: the program ended normally and printed the sentinel. ``fail``: no code, the
    sentinel in the answer itself, a compile error, an exception (its last traceback line is the
    reason), a limit hit, or "sentinel missing". ``error``: the case is malformed or the sandbox
    itself failed. ``skipped``: no usable sandbox on this machine.
    """
    problems = spec.problems()
    if problems:
        return Verdict.error(f"case error: {'; '.join(problems)}", {"problems": problems})
    language = normalize_language(spec.language) or spec.language
    extraction = extract_code(response, language, spec.required_name)
    details: dict[str, Any] = {
        "language": language,
        "extraction_method": extraction.method,
        "extraction_note": extraction.note,
        "code": extraction.code,
    }
    if extraction.code is None:
        return Verdict.failed("no code in response", details)
    if spec.sentinel in extraction.code:
        # Only a leaked prompt lets a model know the sentinel; never let printing it count.
        return Verdict.failed("the answer contains the sentinel", details)

    program = build_program(spec, extraction.code)
    try:
        result = await sandbox.run(language, program, stdin=spec.stdin, limits=spec.limits)
    except SandboxUnavailable as exc:
        return Verdict.skipped(f"sandbox unavailable: {exc}", details)
    details.update(_result_details(result))

    if result.status == "sandbox_error":
        return Verdict.error(f"sandbox error: {result.reason or result.label}", details)
    if result.status == "ok" and spec.sentinel in (result.stdout or ""):
        return Verdict.passed("all tests passed", details)
    limits = spec.limits if spec.limits is not None else getattr(sandbox, "limits", None)
    return Verdict.failed(_failure_reason(spec, result, limits), details)
