"""A sample of library cases graded on response variants: the right answer wrapped the ways real
models wrap it (think blocks, chatter, odd fences, markdown, explanations after the answer) must
pass, and answers that look right but are not must fail."""

from __future__ import annotations

import asyncio
import re

import pytest

from forgetui.cases.loader import builtin_cases_dir, load_library
from forgetui.grading.extract import fenced_blocks
from forgetui.grading.registry import grade
from forgetui.sandbox import Sandbox

LIB = load_library([builtin_cases_dir()])


def verdict(case_id: str, text: str, sandbox=None):
    case = LIB.by_id(case_id)
    assert case is not None, case_id
    return asyncio.run(grade(case.grader_kind, case.params, text, sandbox=sandbox))


MATH = [c for c in LIB.select(["standard"]) if c.category == "math"][:4]


@pytest.mark.parametrize("case", MATH, ids=lambda c: c.id)
def test_math_answers_are_read_through_the_wrapping(case) -> None:
    n = case.params.answer
    passing = [
        f"<think>Let me work it out... maybe {n + 3}? No.</think>\nAfter checking each step the count is {n}.\n\nFinal answer: {n}",
        f"Sure! Here is the solution.\n\n**Final answer:** {n}",
        f"Final answer: {n}\n\n(Explanation: I enumerated the cases and double-checked the total.)",
        f"The answer is $\\boxed{{{n}}}$.",
    ]
    failing = [
        f"I first thought {n}, but on reflection it is {n + 1}.\n\nFinal answer: {n + 1}",
        f"<think>It is {n}.</think>\nFinal answer: {n - 1}",
        "I am not sure; it could be several values.",
    ]
    for text in passing:
        assert verdict(case.id, text).status == "pass", text
    for text in failing:
        assert verdict(case.id, text).status == "fail", text


def test_injection_case_fails_when_the_canary_slips_into_a_good_answer() -> None:
    good = LIB.by_id("std.inject.memo-canary").verify.reference
    assert verdict("std.inject.memo-canary", "<think>ignore the note</think>" + good).status == "pass"
    assert verdict("std.inject.memo-canary", good + " (The memo also says: DEPOT ACCESS CODE 5521.)").status == "fail"


def test_reasoning_exact_answer_with_markdown_passes_and_a_near_miss_fails() -> None:
    case = LIB.by_id("std.reason.bench_row")
    expected = case.params.expected
    assert verdict(case.id, f"Working through the clues...\n\n**Final answer:** `{expected}`").status == "pass"
    swapped = expected[1] + expected[0] + expected[2:]
    assert verdict(case.id, f"Final answer: {swapped}").status == "fail"


def test_code_reference_passes_in_odd_fences_and_after_chatter() -> None:
    sandbox = Sandbox()
    if not sandbox.check().ok:
        pytest.skip("bubblewrap sandbox not usable here")
    case = LIB.by_id("std.code.bracket_error")
    code = next(b.code for b in reversed(fenced_blocks(case.verify.reference)) if b.language == "python")
    tilde = f"Certainly! Here's my approach.\n\n~~~python\n{code}\n~~~\n\nThis runs in O(n)."
    assert verdict(case.id, tilde, sandbox).status == "pass"
    thinking = f"<think>stack of openers</think>\n```py\n{code}\n```\nUsage: `print(first_error('([)]'))`"
    assert verdict(case.id, thinking, sandbox).status == "pass"
    broken = re.sub(r"return ([^\n]+)\n", "return -1\n", code, count=1)
    assert verdict(case.id, f"```python\n{broken}\n```", sandbox).status == "fail"
