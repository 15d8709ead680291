"""Extraction from realistic model responses: reasoning, chatter, several fences, truncation."""

from __future__ import annotations

import pytest

from forgetui.grading.extract import (
    CodeBlock,
    extract_code,
    fenced_blocks,
    final_answer,
    normalize_language,
    strip_preamble,
    strip_reasoning,
)
from forgetui.grading.verdict import Verdict

SOLVE = "def solve(n):\n    return n * 2\n"


# ---------------------------------------------------------------- strip_reasoning

@pytest.mark.parametrize("text, expected", [
    ("<think>let me see</think>The answer", "The answer"),
    ("<think>\nplan\n</think>\n\nanswer", "answer"),
    ("<thinking>a</thinking>b<reasoning>c</reasoning>d", "bd"),
    ("<THINK>shouting</THINK>ok", "ok"),
    ("I should double it.\n</think>\nanswer", "answer"),  # the server ate the opening tag
    ("<think>cut off mid-thought, def solve(n): return n", ""),  # truncated reasoning is dropped
    ("answer first <think>then trailing unclosed", "answer first"),
    ("<think>outer <think>inner</think> still outer</think>after", "after"),
    ("<|thinking|>x<|/thinking|>y", "y"),
    ("no reasoning at all", "no reasoning at all"),
])
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


# ---------------------------------------------------------------- strip_preamble

@pytest.mark.parametrize("text, expected", [
    ("Sure! Here is your answer:\n\nx = 1", "x = 1"),
    ("Certainly. Here's the code:\nx = 1", "x = 1"),
    ("Answer:\n42", "42"),
    ("**Solution:**\n\ncode", "code"),
    ("Of course!\nHere is a function that solves the problem:\n```python\n```", "```python\n```"),
    ("Okay.\n\nI'd be happy to help with that.\nx", "x"),
])
def test_strip_preamble_drops_chatter(text: str, expected: str) -> None:
    assert strip_preamble(text) == expected


@pytest.mark.parametrize("text", [
    "Sure. The answer is 42.",  # holds the answer
    "Here is the answer: 42",
    "The function below doubles n.",
    "def solve(n):\n    return n",
])
def test_strip_preamble_keeps_content(text: str) -> None:
    assert strip_preamble(text) == text


# ---------------------------------------------------------------- fenced_blocks

@pytest.mark.parametrize("info, language", [
    ("python", "python"), ("py", "python"), ("Python3", "python"), ("PYTHON", "python"),
    ("c++", "cpp"), ("cpp", "cpp"), ("C", "c"), ("js", "node"), ("javascript", "node"),
    ("bash", "sh"), ("text", "text"), ("{.python}", "python"), ("python title=main.py", "python"),
    ("python:solution.py", "python"), ("language-cpp", "cpp"),
])
def test_fence_info_strings(info: str, language: str) -> None:
    [block] = fenced_blocks(f"```{info}\nx\n```")
    assert block.language == language
    assert block.info == info


def test_fenced_blocks_offsets_order_and_completion() -> None:
    text = "intro\n```python\na = 1\n```\nmiddle\n~~~\nb = 2\n~~~\n```c\nint x;\n"
    blocks = fenced_blocks(text)
    assert [(b.language, b.code, b.complete) for b in blocks] == [
        ("python", "a = 1\n", True), (None, "b = 2\n", True), ("c", "int x;\n", False)]
    assert text[blocks[0].start:].startswith("```python")
    assert text[blocks[1].start:].startswith("~~~")


def test_longer_fence_quotes_shorter_one_and_backticks_in_code() -> None:
    text = "````markdown\nUse:\n```python\nx = 1\n```\n````\n```python\ns = '```' + \"``\"\n```"
    blocks = fenced_blocks(text)
    assert blocks[0] == CodeBlock("markdown", "Use:\n```python\nx = 1\n```\n", 0, True, "markdown")
    assert blocks[1].code == "s = '```' + \"``\"\n" and blocks[1].complete


def test_tilde_fence_is_not_closed_by_backticks() -> None:
    [block] = fenced_blocks("~~~python\nx = '''\n```\n'''\n~~~")
    assert block.code == "x = '''\n```\n'''\n"


def test_indented_fence_in_list_item_is_dedented() -> None:
    text = ("Steps:\n\n1. Write the function:\n\n   ```python\n   def solve(n):\n       return n * 2\n"
            "   ```\n\n2. Call it.\n")
    [block] = fenced_blocks(text)
    assert block.language == "python" and block.complete
    assert block.code == SOLVE


def test_closing_fence_glued_to_last_line() -> None:
    [block] = fenced_blocks("```python\ndef solve(n):\n    return n * 2```\nDone.")
    assert block.complete and block.code == SOLVE


def test_windows_line_endings() -> None:
    [block] = fenced_blocks("Code:\r\n```python\r\ndef solve(n):\r\n    return n * 2\r\n```\r\n")
    assert block.code == SOLVE and block.complete


def test_empty_fence() -> None:
    [block] = fenced_blocks("```\n```")
    assert block.code == "" and block.language is None and block.complete


# ---------------------------------------------------------------- extract_code: Python

def test_chatter_then_fence() -> None:
    ex = extract_code(f"Sure! Here is your answer:\n\n```python\n{SOLVE}```\n\nIt doubles n.", "python", "solve")
    assert ex.code == SOLVE
    assert ex.method == "fenced:python:last-defining"


def test_example_first_answer_last() -> None:
    response = (
        "A naive version would be:\n```python\ndef solve(n):\n    return sum(n for _ in range(2))\n```\n"
        "But this is simpler and faster:\n```python\n" + SOLVE + "```\n")
    assert extract_code(response, "python", "solve").code == SOLVE


def test_trailing_usage_fence_is_not_the_answer() -> None:
    response = f"```python\n{SOLVE}```\n\nUsage:\n\n```python\nprint(solve(21))  # 42\n```\n"
    with_name = extract_code(response, "python", "solve")
    assert with_name.code == SOLVE and with_name.method == "fenced:python:last-defining"
    # Even without a required name, a block that defines something beats a bare usage example.
    without = extract_code(response, "python")
    assert without.code == SOLVE and without.method == "fenced:python:last-with-def"


def test_required_name_decides_between_blocks() -> None:
    response = ("Helper first:\n```python\ndef helper(x):\n    return x\n```\n"
                f"Main answer:\n```python\n{SOLVE}```\nAnother unrelated snippet:\n"
                "```python\ndef other():\n    pass\n```\n")
    assert extract_code(response, "python", "solve").code == SOLVE
    assert extract_code(response, "python", "helper").code.startswith("def helper")
    # Without a name the last defining block wins.
    assert extract_code(response, "python").code.startswith("def other")


@pytest.mark.parametrize("definition", [
    "class solve:\n    pass\n",
    "solve = lambda n: n * 2\n",
    "solve: object = print\n",
    "from math import floor as solve\n",
    "async def solve(n):\n    return n\n",
])
def test_required_name_definition_forms(definition: str) -> None:
    response = f"```python\n{definition}```\n```python\nprint('usage')\n```"
    ex = extract_code(response, "python", "solve")
    assert ex.code == definition and ex.method == "fenced:python:last-defining"


def test_nested_definition_does_not_count_as_top_level() -> None:
    nested = "def outer():\n    def solve(n):\n        return n\n    return solve\n"
    response = f"```python\n{SOLVE}```\n```python\n{nested}```"
    assert extract_code(response, "python", "solve").code == SOLVE


def test_unparsable_block_still_found_by_name() -> None:
    broken = "def solve(n)\n    return n * 2\n"  # missing colon: the grader reports the SyntaxError
    ex = extract_code(f"```python\n{broken}```", "python", "solve")
    assert ex.code == broken and ex.method == "fenced:python:last-defining"


def test_no_block_defines_the_name_falls_back_to_last_block() -> None:
    ex = extract_code("```python\ndef solution(n):\n    return n\n```", "python", "solve")
    assert ex.code.startswith("def solution") and "solve" in ex.note


def test_unterminated_fence_is_used_when_nothing_else() -> None:
    ex = extract_code("Here you go:\n```python\ndef solve(n):\n    return n * 2\n", "python", "solve")
    assert ex.code == SOLVE
    assert ex.method == "fenced:python:unterminated" and "never closed" in ex.note


def test_complete_block_beats_truncated_one() -> None:
    response = f"```python\n{SOLVE}```\nA faster version:\n```python\ndef solve(n):\n    return n <<"
    assert extract_code(response, "python", "solve").code == SOLVE


def test_think_block_before_code() -> None:
    response = ("<think>\nThe user wants doubling. Draft:\n```python\ndef solve(n):\n    return n + n + 0\n```\n"
                "Fine, write it cleanly.\n</think>\n\nCertainly. Here's the code:\n\n```python\n" + SOLVE + "```")
    assert extract_code(response, "python", "solve").code == SOLVE


def test_code_only_in_reasoning_is_never_graded() -> None:
    response = "<think>\n```python\n" + SOLVE + "```\nNow I will write the final ans"
    ex = extract_code(response, "python", "solve")
    assert ex.code is None and ex.note == "no code in response"


def test_code_around_think_block() -> None:
    response = f"```python\n{SOLVE}```\n<think>was that right? yes ```python\nbad = 1\n```</think>\nDone."
    assert extract_code(response, "python", "solve").code == SOLVE


def test_stray_closing_think_tag() -> None:
    response = "I'll double the input.\n```python\nwrong = 1\n```\n</think>\n```python\n" + SOLVE + "```"
    assert extract_code(response, "python").code == SOLVE


def test_no_fences_but_valid_python() -> None:
    ex = extract_code("Sure! Here is your answer:\n" + SOLVE, "python", "solve")
    assert ex.code == SOLVE and ex.method == "whole:python"


@pytest.mark.parametrize("prose", [
    "I'm sorry, but I can't help with that.",
    "The answer is 42.",
    "42",
    "Hello",
    "",
    "<think>only thinking</think>",
])
def test_prose_only_is_no_code(prose: str) -> None:
    ex = extract_code(prose, "python", "solve")
    assert ex.code is None and ex.method == "none" and ex.note == "no code in response"


def test_wrong_language_fences_are_ignored() -> None:
    response = ("Install it:\n```bash\npip install numpy\n```\n```python\n" + SOLVE + "```\n"
                "Output:\n```text\n42\n```\n")
    assert extract_code(response, "python", "solve").code == SOLVE


def test_only_wrong_language_fences() -> None:
    ex = extract_code("```javascript\nfunction solve(n) { return 2 * n; }\n```", "python", "solve")
    assert ex.code is None and "no code in response" in ex.note and "node" in ex.note


def test_unlabeled_fence_used_when_it_is_python() -> None:
    ex = extract_code(f"```\n{SOLVE}```", "python", "solve")
    assert ex.code == SOLVE and ex.method == "fenced:unlabeled:last-defining"


def test_unlabeled_output_fence_is_not_code() -> None:
    response = f"```python\n{SOLVE}```\nOutput:\n```\n[2, 4, 6]\n```"
    assert extract_code(response, "python").code == SOLVE
    assert extract_code("```\nThe result is 6\n```", "python").code is None


def test_labeled_block_preferred_over_unlabeled() -> None:
    response = f"```python\n{SOLVE}```\n```\ndef solve(n):\n    return 0\n```"
    assert extract_code(response, "python", "solve").code == SOLVE


def test_unlabeled_defining_block_beats_labeled_usage() -> None:
    response = f"```\n{SOLVE}```\n```python\nprint(solve(2))\n```"
    ex = extract_code(response, "python", "solve")
    assert ex.code == SOLVE and ex.method == "fenced:unlabeled:last-defining"


def test_tilde_fence() -> None:
    assert extract_code(f"~~~python\n{SOLVE}~~~", "python", "solve").code == SOLVE


def test_indented_fence_extraction() -> None:
    response = "1. Define it:\n    ```python\n    def solve(n):\n        return n * 2\n    ```\n2. Done."
    assert extract_code(response, "py", "solve").code == SOLVE


# ---------------------------------------------------------------- extract_code: C / C++

C_SOLVE = "int solve(int n) {\n    return 2 * n;\n}\n"
CPP_SOLVE = ("#include <vector>\nlong long solve(const std::vector<int>& v) {\n"
             "    long long s = 0;\n    for (int x : v) s += x;\n    return s;\n}\n")


def test_c_labeled() -> None:
    response = f"Here is the C code:\n```c\n{C_SOLVE}```\nCall it as `solve(3)`."
    ex = extract_code(response, "c", "solve")
    assert ex.code == C_SOLVE and ex.method == "fenced:c:last-defining"


def test_c_unlabeled() -> None:
    ex = extract_code(f"```\n#include <stdio.h>\n{C_SOLVE}```", "c", "solve")
    assert ex.code is not None and ex.method == "fenced:unlabeled:last-defining"


def test_c_call_or_prototype_is_not_a_definition() -> None:
    usage = "int main(void) {\n    printf(\"%d\\n\", solve(3));\n    return 0;\n}\n"
    prototype = "int solve(int n);\n"
    response = f"```c\n{C_SOLVE}```\n```c\n{prototype}{usage}```"
    assert extract_code(response, "c", "solve").code == C_SOLVE


def test_cpp_labels_and_c_block_for_cpp() -> None:
    assert extract_code(f"```c++\n{CPP_SOLVE}```", "cpp", "solve").code == CPP_SOLVE
    assert extract_code(f"```cpp\n{CPP_SOLVE}```", "c++", "solve").code == CPP_SOLVE
    # C is accepted for a C++ case, but C++ is not taken for a C case.
    assert extract_code(f"```c\n{C_SOLVE}```", "cpp", "solve").code == C_SOLVE
    assert extract_code(f"```cpp\n{CPP_SOLVE}```", "c", "solve").code is None


def test_cpp_method_and_qualified_definitions() -> None:
    cls = "class Solution {\npublic:\n    int solve(int n) const {\n        return n;\n    }\n};\n"
    out_of_line = "int Solution::solve(int n) {\n    return n;\n}\n"
    assert extract_code(f"```cpp\n{cls}```\n```cpp\nSolution().solve(1);\n```", "cpp", "solve").code == cls
    assert extract_code(f"```cpp\n{out_of_line}```", "cpp", "solve").method == "fenced:cpp:last-defining"


def test_c_without_fences() -> None:
    ex = extract_code("#include <stdio.h>\n\n" + C_SOLVE, "c", "solve")
    assert ex.method == "whole:c" and "int solve" in ex.code
    assert extract_code("Use a loop and return twice n.", "c", "solve").code is None


def test_python_fence_ignored_for_c_case() -> None:
    assert extract_code(f"```python\n{SOLVE}```", "c", "solve").code is None


# ---------------------------------------------------------------- other languages

def test_node_and_sh() -> None:
    js = "function solve(n) {\n  return 2 * n;\n}\n"
    assert extract_code(f"```js\n{js}```", "node", "solve").code == js
    sh = "solve() {\n  echo $(( $1 * 2 ))\n}\n"
    assert extract_code(f"```bash\n{sh}```", "sh", "solve").method == "fenced:sh:last-defining"


def test_normalize_language() -> None:
    assert normalize_language("Python3") == "python"
    assert normalize_language("language-cpp") == "cpp"
    assert normalize_language("") is None and normalize_language(None) is None


# ---------------------------------------------------------------- final_answer

@pytest.mark.parametrize("text, expected", [
    ("Final answer: 42", "42"),
    ("Work...\nFinal Answer: 42", "42"),
    ("**Answer:** 42", "42"),
    ("**Final answer**: 17", "17"),
    ("Answer = 3.5", "3.5"),
    ("ANSWER: Paris.", "Paris"),
    ("so the total is $\\boxed{42}$.", "42"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("The answer is 42.", "42"),
    ("So the final answer is **7**.", "7"),
    ("The answer is 3.5 m. That is all.", "3.5 m"),
    ("Answer:\n\n  12", "12"),
    ("Answer: `x = 2`", "x = 2"),
    ("Answer: 10\nWait, I made a mistake.\nFinal answer: 12", "12"),
    ("The answer is 5, I think.\n\\boxed{6}", "6"),
    ("<think>Answer: 3</think>Answer: 4", "4"),
])
def test_final_answer_forms(text: str, expected: str) -> None:
    assert final_answer(text) == expected


@pytest.mark.parametrize("text", [
    "I cannot determine that.",
    "To answer this we need more data.",
    "<think>Answer: 3</think>",
    "The user answered quickly.",
])
def test_final_answer_none(text: str) -> None:
    assert final_answer(text) is None


# ---------------------------------------------------------------- Verdict

def test_verdict_helpers() -> None:
    v = Verdict.failed("NameError: name 'x'\n  is not defined", {"code": "x"})
    assert v.status == "fail" and not v.ok
    assert v.reason == "NameError: name 'x' is not defined"  # one line
    assert v.to_dict() == {"status": "fail", "reason": v.reason, "details": {"code": "x"}}
    assert Verdict.passed().ok and Verdict.passed().reason == "passed"
    assert Verdict.error("boom").status == "error"
    assert Verdict.skipped("no sandbox").status == "skipped"
    with pytest.raises(ValueError):
        Verdict("maybe", "x")
