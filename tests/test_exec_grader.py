"""The execution grader: real sandboxed runs of model answers against case tests.

The sandboxed tests need a usable bubblewrap (``apt-get install -y bubblewrap``; ``.ci/run``
installs it) and are skipped with the sandbox's own reason otherwise. The reason-mapping tests
at the end use a stand-in sandbox and always run.
"""

from __future__ import annotations

import textwrap

import pytest

from forgetui.grading.exec_grader import ExecSpec, build_program, grade_exec, new_sentinel
from forgetui.grading.verdict import Verdict
from forgetui.sandbox import Limits, Sandbox, SandboxResult, SandboxUnavailable

SENTINEL = "FTUI_OK_5c0e91d7a3b2f846"

PY_TESTS = textwrap.dedent(f"""\
    assert solve(2) == 4, "solve(2) should be 4"
    assert solve(-3) == -6, "solve(-3) should be -6"
    assert type(solve(5)) is int
    print("{SENTINEL}")
""")
PY_SPEC = ExecSpec(language="python", required_name="solve", test_code=PY_TESTS, sentinel=SENTINEL)
GOOD = "```python\ndef solve(n):\n    return n * 2\n```"

# Minimum gap between any two of up to 100k distinct integers: sorting makes it O(n log n)
# (well under a second); comparing all pairs is ~5e9 steps, which no machine does in 3 CPU seconds.
GAP_TESTS = textwrap.dedent(f"""\
    import random

    def _reference(a):
        b = sorted(a)
        return min(y - x for x, y in zip(b, b[1:]))

    rng = random.Random(7)
    for _ in range(30):
        small = rng.sample(range(-1000, 1000), rng.randint(2, 30))
        assert min_gap(small) == _reference(small), small
    big = rng.sample(range(-10**9, 10**9), 100_000)
    assert min_gap(big) == _reference(big), "wrong on the large input"
    print("{SENTINEL}")
""")
GAP_SPEC = ExecSpec(language="python", required_name="min_gap", test_code=GAP_TESTS, sentinel=SENTINEL,
                    limits=Limits(wall_s=8.0, cpu_s=3.0))
FAST_GAP = """Sort first, then only neighbours can be closest:
```python
def min_gap(a):
    b = sorted(a)
    return min(b[i + 1] - b[i] for i in range(len(b) - 1))
```"""
SLOW_GAP = """```python
def min_gap(a):
    best = None
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            d = abs(a[i] - a[j])
            if best is None or d < best:
                best = d
    return best
```"""

C_TESTS = textwrap.dedent(f"""\
    #include <stdio.h>
    int main(void) {{
        if (solve(2) != 4) {{ fprintf(stderr, "solve(2) != 4\\n"); return 1; }}
        if (solve(-3) != -6) {{ fprintf(stderr, "solve(-3) != -6\\n"); return 1; }}
        puts("{SENTINEL}");
        return 0;
    }}
""")
C_SPEC = ExecSpec(language="c", required_name="solve", test_code=C_TESTS, sentinel=SENTINEL)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    sb = Sandbox()
    check = sb.check()
    if not check.ok:
        pytest.skip("bubblewrap sandbox not usable here (apt-get install -y bubblewrap): "
                    + "; ".join(check.problems))
    return sb


# ---------------------------------------------------------------- real sandboxed runs

async def test_correct_solution_passes(sandbox: Sandbox) -> None:
    verdict = await grade_exec(PY_SPEC, GOOD, sandbox)
    assert verdict.status == "pass", verdict
    assert verdict.reason == "all tests passed"
    d = verdict.details
    assert d["sandboxed"] is True and d["sandbox_status"] == "ok"
    assert d["extraction_method"] == "fenced:python:last-defining"
    assert d["code"] == "def solve(n):\n    return n * 2\n"
    assert SENTINEL in d["stdout_tail"]
    assert d["wall_s"] > 0


async def test_wrong_solution_fails_with_assertion_message(sandbox: Sandbox) -> None:
    verdict = await grade_exec(PY_SPEC, "```python\ndef solve(n):\n    return n + 2\n```", sandbox)
    assert verdict.status == "fail"
    assert verdict.reason == "AssertionError: solve(-3) should be -6"
    assert "Traceback" in verdict.details["stderr_tail"]


async def test_type_gaming_answer_fails(sandbox: Sandbox) -> None:
    # An object equal to everything passes the == asserts; the type check in the tests stops it.
    cheat = ("```python\nclass _Any:\n    def __eq__(self, other):\n        return True\n\n"
             "def solve(n):\n    return _Any()\n```")
    verdict = await grade_exec(PY_SPEC, cheat, sandbox)
    assert verdict.status == "fail" and verdict.reason == "AssertionError"


async def test_name_error(sandbox: Sandbox) -> None:
    verdict = await grade_exec(PY_SPEC, "```python\ndef solve(n):\n    return n * x\n```", sandbox)
    assert verdict.status == "fail"
    assert verdict.reason == "NameError: name 'x' is not defined"


async def test_syntax_error(sandbox: Sandbox) -> None:
    verdict = await grade_exec(PY_SPEC, "```python\ndef solve(n)\n    return n * 2\n```", sandbox)
    assert verdict.status == "fail" and verdict.reason.startswith("SyntaxError")


async def test_no_code_never_reaches_the_sandbox(sandbox: Sandbox) -> None:
    verdict = await grade_exec(PY_SPEC, "I would multiply the number by two.", sandbox)
    assert verdict.status == "fail" and verdict.reason == "no code in response"
    assert verdict.details["code"] is None and "sandbox_status" not in verdict.details


async def test_busy_loop_hits_a_time_limit(sandbox: Sandbox) -> None:
    spec = ExecSpec(language="python", required_name="solve", test_code=PY_TESTS, sentinel=SENTINEL,
                    limits=Limits(wall_s=6.0, cpu_s=1.0))
    verdict = await grade_exec(spec, "```python\ndef solve(n):\n    while True:\n        pass\n```", sandbox)
    assert verdict.status == "fail"
    assert verdict.reason in ("cpu_limit after 1 s CPU", "wall_timeout after 6 s"), verdict.reason


async def test_sleeping_loop_hits_the_wall_clock(sandbox: Sandbox) -> None:
    spec = ExecSpec(language="python", required_name="solve", test_code=PY_TESTS, sentinel=SENTINEL,
                    limits=Limits(wall_s=1.5, cpu_s=10.0))
    answer = "```python\nimport time\n\ndef solve(n):\n    while True:\n        time.sleep(1)\n```"
    verdict = await grade_exec(spec, answer, sandbox)
    assert verdict.status == "fail" and verdict.reason == "wall_timeout after 1.5 s"


async def test_complexity_is_enforced_by_input_size(sandbox: Sandbox) -> None:
    fast = await grade_exec(GAP_SPEC, FAST_GAP, sandbox)
    assert fast.status == "pass", fast
    slow = await grade_exec(GAP_SPEC, SLOW_GAP, sandbox)
    assert slow.status == "fail"
    assert slow.reason in ("cpu_limit after 3 s CPU", "wall_timeout after 8 s"), slow.reason


async def test_exit_zero_without_sentinel_fails(sandbox: Sandbox) -> None:
    answer = ("```python\nimport sys\n\ndef solve(n):\n    return n * 2\n\n"
              "print('all tests passed')\nsys.exit(0)\n```")
    verdict = await grade_exec(PY_SPEC, answer, sandbox)
    assert verdict.status == "fail" and verdict.reason == "sentinel missing"
    assert verdict.details["exit_code"] == 0


async def test_answer_printing_the_sentinel_fails(sandbox: Sandbox) -> None:
    answer = f"```python\ndef solve(n):\n    return 0\n\nprint('{SENTINEL}')\n```"
    verdict = await grade_exec(PY_SPEC, answer, sandbox)
    assert verdict.status == "fail" and verdict.reason == "the answer contains the sentinel"


async def test_think_block_and_chatter_still_graded_on_the_code(sandbox: Sandbox) -> None:
    response = ("<think>\nMaybe:\n```python\ndef solve(n):\n    return n + n + 1\n```\nNo, off by one.\n"
                "</think>\n\nSure! Here is your answer:\n\n" + GOOD
                + "\n\nExample:\n```python\nprint(solve(4))\n```\n")
    verdict = await grade_exec(PY_SPEC, response, sandbox)
    assert verdict.status == "pass", verdict
    assert verdict.details["code"] == "def solve(n):\n    return n * 2\n"


async def test_memory_hog_fails(sandbox: Sandbox) -> None:
    spec = ExecSpec(language="python", required_name="solve", test_code=PY_TESTS, sentinel=SENTINEL,
                    limits=Limits(memory_bytes=256 << 20))
    answer = "```python\nhog = bytearray(1 << 30)\n\ndef solve(n):\n    return n * 2\n```"
    verdict = await grade_exec(spec, answer, sandbox)
    assert verdict.status == "fail" and verdict.reason == "memory_limit"


async def test_c_solution_passes(sandbox: Sandbox) -> None:
    # The model's own main() is harmless: the tests' main is the one that runs.
    answer = ("```c\n#include <stdio.h>\n\nint solve(int n) {\n    return 2 * n;\n}\n\n"
              "int main(void) {\n    printf(\"%d\\n\", solve(21));\n    return 0;\n}\n```")
    verdict = await grade_exec(C_SPEC, answer, sandbox)
    assert verdict.status == "pass", verdict


async def test_wrong_c_solution_fails_with_its_message(sandbox: Sandbox) -> None:
    verdict = await grade_exec(C_SPEC, "```c\nint solve(int n) { return n + 2; }\n```", sandbox)
    assert verdict.status == "fail" and verdict.reason == "solve(-3) != -6"


async def test_c_compile_error_is_reported(sandbox: Sandbox) -> None:
    verdict = await grade_exec(C_SPEC, "```c\nint solve(int n) {\n    return 2 * n\n}\n```", sandbox)
    assert verdict.status == "fail"
    assert verdict.reason.startswith("compile error: solution.c:2:"), verdict.reason
    assert "error:" in verdict.reason


async def test_c_segfault_is_a_signal(sandbox: Sandbox) -> None:
    answer = "```c\n#include <signal.h>\nint solve(int n) { raise(SIGSEGV); return n; }\n```"
    verdict = await grade_exec(C_SPEC, answer, sandbox)
    assert verdict.status == "fail" and verdict.reason == "signal(11)"


async def test_cpp_solution_passes(sandbox: Sandbox) -> None:
    tests = C_TESTS.replace("#include <stdio.h>", "#include <cstdio>")
    spec = ExecSpec(language="cpp", required_name="solve", test_code=tests, sentinel=SENTINEL)
    answer = ("```cpp\n#include <vector>\nint solve(int n) {\n    std::vector<int> v(2, n);\n"
              "    return v[0] + v[1];\n}\n```")
    verdict = await grade_exec(spec, answer, sandbox)
    assert verdict.status == "pass", verdict


async def test_sandbox_unavailable_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from forgetui.sandbox import SandboxCheck

    broken = Sandbox()
    failing = SandboxCheck(ok=False, bwrap=None, version=None, problems=["bubblewrap (bwrap) not found"])
    monkeypatch.setattr(broken, "check", lambda *a, **k: failing)
    verdict = await grade_exec(PY_SPEC, GOOD, broken)
    assert verdict.status == "skipped"
    assert verdict.reason.startswith("sandbox unavailable: ")
    assert "bwrap" in verdict.reason


# ---------------------------------------------------------------- without a sandbox

class _Fixed:
    """A stand-in sandbox returning one prepared result (for the reason rules)."""

    def __init__(self, result: SandboxResult | Exception, limits: Limits | None = None) -> None:
        self.result = result
        self.limits = limits or Limits()
        self.calls: list[tuple[str, str]] = []

    async def run(self, language: str, source: str, *, stdin: str = "", limits: Limits | None = None,
                  files: dict[str, str] | None = None) -> SandboxResult:
        self.calls.append((language, source))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def _result(status: str, *, stdout: str = "", stderr: str = "", exit_code: int | None = 1,
            signal: int | None = None, reason: str = "") -> SandboxResult:
    return SandboxResult(status=status, exit_code=exit_code, signal=signal, stdout=stdout, stderr=stderr,
                         stdout_truncated=False, stderr_truncated=False, wall_s=0.5, cpu_s=0.25,
                         sandboxed=True, reason=reason or status)


async def _grade(result: SandboxResult | Exception, spec: ExecSpec = PY_SPEC) -> Verdict:
    response = GOOD if spec.language == "python" else "```c\nint solve(int n) { return 2 * n; }\n```"
    return await grade_exec(spec, response, _Fixed(result))  # type: ignore[arg-type]


@pytest.mark.parametrize("result, status, reason", [
    (_result("ok", stdout=f"{SENTINEL}\n", exit_code=0), "pass", "all tests passed"),
    (_result("ok", stdout="done\n", exit_code=0), "fail", "sentinel missing"),
    (_result("wall_timeout", exit_code=None), "fail", "wall_timeout after 15 s"),
    (_result("wall_timeout", exit_code=None, reason="wall_timeout while compiling after 30 s"),
     "fail", "wall_timeout while compiling after 30 s"),
    (_result("cpu_limit", exit_code=None, signal=24), "fail", "cpu_limit after 10 s CPU"),
    (_result("memory_limit", stderr="MemoryError\n"), "fail", "memory_limit"),
    (_result("output_limit", stdout="x" * 100), "fail", "output_limit"),
    (_result("signal", exit_code=None, signal=11), "fail", "signal(11)"),
    (_result("runtime_error", stderr="boom\nlast words\n", exit_code=3), "fail", "last words"),
    (_result("runtime_error", exit_code=3), "fail", "exit code 3"),
    # A sentinel printed before a crash is not a pass.
    (_result("runtime_error", stdout=f"{SENTINEL}\n", stderr="Traceback (most recent call last):\n"
             "  File \"main.py\", line 1\nValueError: late\n"), "fail", "ValueError: late"),
    (_result("sandbox_error", reason="sandbox_error: bwrap: No permission"), "error",
     "sandbox error: sandbox_error: bwrap: No permission"),
    (SandboxUnavailable("bubblewrap (bwrap) is not installed"), "skipped",
     "sandbox unavailable: bubblewrap (bwrap) is not installed"),
])
async def test_reason_rules(result: SandboxResult | Exception, status: str, reason: str) -> None:
    verdict = await _grade(result)
    assert (verdict.status, verdict.reason) == (status, reason)


async def test_traceback_reason_skips_exception_notes_and_chained_frames() -> None:
    stderr = ("Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\n"
              "KeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\n"
              "Traceback (most recent call last):\n  File \"main.py\", line 5, in <module>\n"
              "    raise ValueError('bad input')\nValueError: bad input\n")
    verdict = await _grade(_result("runtime_error", stderr=stderr))
    assert verdict.reason == "ValueError: bad input"


async def test_compile_error_reason_from_compiler_output() -> None:
    stderr = ("solution.c: In function 'solve':\nsolution.c:2:17: error: expected ';' before '}' token\n"
              "solution.c:3:1: error: another\n")
    result = _result("runtime_error", stderr=stderr,
                     reason="compile error (exit code 1): solution.c:2:17: error: expected ';' before '}' token")
    verdict = await _grade(result, C_SPEC)
    assert verdict.reason == "compile error: solution.c:2:17: error: expected ';' before '}' token"
    link = _result("runtime_error", stderr="/usr/bin/ld: /tmp/x.o: in function `main':\n"
                   "tests.c:(.text+0x9): undefined reference to `solve'\ncollect2: error: ld returned 1\n",
                   reason="compile error (exit code 1): collect2: error: ld returned 1")
    assert (await _grade(link, C_SPEC)).reason == "compile error: undefined reference to `solve'"


async def test_program_prints_error_lines_is_not_a_compile_error() -> None:
    result = _result("runtime_error", stderr="main.c:1:1: error: my own message\n", reason="exit code 1")
    assert (await _grade(result, C_SPEC)).reason == "main.c:1:1: error: my own message"


async def test_details_are_capped() -> None:
    result = _result("ok", stdout="y" * 10_000 + SENTINEL, stderr="é" * 10_000, exit_code=0)
    verdict = await _grade(result)
    assert verdict.status == "pass"
    assert len(verdict.details["stdout_tail"].encode()) <= 4096 + 3
    assert verdict.details["stdout_tail"].endswith(SENTINEL)
    assert len(verdict.details["stderr_tail"].encode()) <= 4096 + 3


@pytest.mark.parametrize("spec, fragment", [
    (ExecSpec(test_code="print('x')"), "sentinel must be at least"),
    (ExecSpec(test_code="print('x')", sentinel=SENTINEL), "never prints the sentinel"),
    (ExecSpec(language="cobol", test_code=PY_TESTS, sentinel=SENTINEL), "unsupported language"),
])
async def test_malformed_case_is_an_error_not_a_pass(spec: ExecSpec, fragment: str) -> None:
    sandbox = _Fixed(_result("ok", stdout="anything", exit_code=0))
    verdict = await grade_exec(spec, GOOD, sandbox)  # type: ignore[arg-type]
    assert verdict.status == "error" and fragment in verdict.reason
    assert sandbox.calls == []


def test_build_program() -> None:
    from dataclasses import replace

    as_main = replace(PY_SPEC, run_as_main=True)
    assert build_program(as_main, "def solve(n):\n    return n\n\n") == \
        "def solve(n):\n    return n\n\n" + PY_TESTS + "\n"
    as_module = build_program(PY_SPEC, "def solve(n):\n    return n\n\n")
    assert "'__name__': 'solution'" in as_module and as_module.endswith(PY_TESTS + "\n")
    c = build_program(C_SPEC, "int solve(int n) { return n; }")
    assert c.index("#define main") < c.index("int solve") < c.index("#undef main") < c.index("int main(void)")
    assert '#line 1 "solution.c"' in c and '#line 1 "tests.c"' in c
    assert '"solution.cpp"' in build_program(ExecSpec(language="c++", test_code="", sentinel=SENTINEL), "x")


def test_new_sentinel_is_fresh_and_usable() -> None:
    a, b = new_sentinel(), new_sentinel()
    assert a != b and len(a) >= 12
    assert ExecSpec(test_code=f"print({a!r})", sentinel=a).problems() == []


async def test_a_main_guard_in_the_answer_does_not_run_for_function_tasks(sandbox) -> None:
    response = (
        "```python\ndef add(a, b):\n    return a + b\n\n"
        "if __name__ == \"__main__\":\n    print(add(int(input()), int(input())))\n```"
    )
    sentinel = "SENTINEL-main-guard-7f3a9c"
    spec = ExecSpec(required_name="add", test_code=f"assert add(2, 3) == 5\nprint({sentinel!r})", sentinel=sentinel)
    verdict = await grade_exec(spec, response, sandbox)
    assert verdict.status == "pass", verdict.reason
    broken = await grade_exec(ExecSpec(required_name="add", sentinel=sentinel, run_as_main=True,
                                       test_code=f"assert add(2, 3) == 5\nprint({sentinel!r})"), response, sandbox)
    assert broken.status == "fail" and "EOFError" in broken.reason
