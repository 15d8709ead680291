"""`forgetui cases verify` finds cases that are wrong or toothless, and passes good ones."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from forgetui.cases.commands import verify_case
from forgetui.sandbox import Sandbox
from forgetui.cases.loader import load_library

GOOD_AND_BAD = '''
[[case]]
id = "v.good"
category = "math"
prompt = "2+2?"
[case.grader]
kind = "numeric"
answer = 4
[case.verify]
reference = "Final answer: 4"
wrong = ["Final answer: 5"]
brute_force = "print(2 + 2)"

[[case]]
id = "v.wrong-reference"
category = "math"
prompt = "2+3?"
[case.grader]
kind = "numeric"
answer = 6
[case.verify]
reference = "Final answer: 5"
wrong = ["Final answer: 6"]
brute_force = "print(2 + 3)"

[[case]]
id = "v.toothless"
category = "instruct"
prompt = "Two words, lowercase."
[case.grader]
kind = "constraints"
checks = [ { kind = "word_count", max = 2 }, { kind = "all_lowercase" } ]
[case.verify]
reference = "hello there"
wrong = ["hello there friend"]
'''


def test_verify_finds_a_wrong_reference_a_bad_brute_force_and_an_untested_check(tmp_path: Path) -> None:
    (tmp_path / "v.toml").write_text(GOOD_AND_BAD)
    lib = load_library([tmp_path])
    assert lib.problems == []
    sandbox = Sandbox()
    if not sandbox.check().ok:
        pytest.skip("bubblewrap sandbox not usable here: " + "; ".join(sandbox.check().problems))
    found = {c.id: asyncio.run(verify_case(c, sandbox))[0] for c in lib.cases}
    assert found["v.good"] == []
    assert any("reference answer does not pass" in p for p in found["v.wrong-reference"])
    assert any("brute force found 5, case says 6" in p for p in found["v.wrong-reference"])
    assert any("wrong answer #1 is not rejected" in p for p in found["v.wrong-reference"])
    assert any("constraint check(s) [2]" in p for p in found["v.toothless"])
