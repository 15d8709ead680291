"""The answer graders, the constraint checks and the registry, on realistic response variants.

Each corpus pairs a response (right answers wrapped in chatter, think tags, odd fences, trailing
explanations; wrong answers that look right) with the verdict it must get. Decisions pinned here:

* numeric compares values: "3.0" and "6/2" equal the integer answer 3 (format is for ``exact``
  or ``constraints``), "42%" equals 42 and 0.42;
* JSON types are strict: 3.0 is not an integer, true is not an integer, "true" is not a boolean;
* contains/forbid match whole tokens: "4" is not in "42", "BANANA" is not in "BANANAS";
* lead-in chatter is stripped before json_only and constraints (``strict`` keeps it);
* a truncated response always fails, its reason naming what was missing.
"""

from __future__ import annotations

import asyncio
import json
import typing

import pytest
from pydantic import BaseModel

from forgetui.config import StrictModel
from forgetui.grading import registry
from forgetui.grading.answers import (
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
    normalize,
)
from forgetui.grading.constraints import ConstraintsParams, grade_constraints, paragraphs, sentences, words
from forgetui.grading.registry import (
    GRADER_KINDS,
    ExecParams,
    GraderParamsError,
    JudgeParams,
    grade,
    parse_params,
)
from forgetui.grading.verdict import Verdict
from forgetui.sandbox import Limits, SandboxResult

SENTINEL = "FTUI_OK_0badc0ffee123456"


def _check(verdict: Verdict, status: str, reason: str | None) -> None:
    assert verdict.status == status, verdict
    if reason is not None:
        assert reason in verdict.reason, verdict
    assert "extracted" in verdict.details and "expected" in verdict.details, verdict.details


# ---------------------------------------------------------------- numeric

N42 = NumericParams(answer=42)

NUMERIC_42 = [
    ("42", "pass", None),
    ("Answer: 42", "pass", None),
    ("<think>Maybe 41? No, 6*7 is 42.</think>\nThe answer is 42.", "pass", None),
    ("Sure! Here's my working:\n6 × 7 = 42\n\n**Final Answer:** 42", "pass", None),
    ("The product is $\\boxed{42}$.", "pass", None),
    ("Step 1: 6 × 7.\nStep 2: done.\n\nAnswer: 42\n\nThis holds because 3 of the 4 factors cancel.", "pass", None),
    ("Answer: **42**.", "pass", None),
    ("Answer: 42 (that is 6 × 7)", "pass", None),
    ("ANSWER = 42", "pass", None),
    ("Answer: 42.0", "pass", None),  # value, not spelling
    ("Answer: 4.2e1", "pass", None),
    ("I first guessed 17 and 23, then checked.\n</think>\nAnswer: 42", "pass", None),  # server ate <think>
    ("No answer line, but 6 times 7 gives 42", "pass", None),  # last number in the text
    # wrong answers that look right
    ("The answer is not 42, it's 41.", "fail", "expected 42, got 41"),
    ("Answer: 41\n\n(Some would say 42, but they forget the carry.)", "fail", "got 41"),
    ("<think>The answer is 42.</think>\nAnswer: 24", "fail", "expected 42, got 24"),
    ("I first tried 42, but that was wrong.\nAnswer: 43", "fail", "got 43"),
    ("Answer: 420", "fail", "got 420"),
    ("Answer: 42.5", "fail", "got 42.5"),
    ("Answer: -42", "fail", "got -42"),
    ("Answer: forty-two", "fail", "no number in the final answer 'forty-two'"),
    ("I don't know.", "fail", "no number in response"),
    ("<think>Answer: 42</think>", "fail", "no number in response"),  # only reasoning
    ("The version is v42 of the tool.", "fail", "no number in response"),  # not a number, a name
]


@pytest.mark.parametrize("text, status, reason", NUMERIC_42)
def test_numeric_42(text: str, status: str, reason: str | None) -> None:
    _check(grade_numeric(N42, text), status, reason)


@pytest.mark.parametrize("params, text, status", [
    (NumericParams(answer=1234), "The total is $1,234.", "pass"),
    (NumericParams(answer=1234), "Answer: 1 234", "pass"),
    (NumericParams(answer=1234), "Answer: 1\u202f234", "pass"),
    (NumericParams(answer=1234), "Answer: 1,234.00", "pass"),
    (NumericParams(answer=1234), "Answer: 1,235", "fail"),
    (NumericParams(answer=-3), "Answer: -3", "pass"),
    (NumericParams(answer=-3), "Answer: \u22123", "pass"),  # Unicode minus
    (NumericParams(answer=-3), "x = -3", "pass"),
    (NumericParams(answer=-3), "Answer: 3", "fail"),
    (NumericParams(answer=350), "Answer: 3.5e2", "pass"),
    (NumericParams(answer=350), "Answer: 3.5 × 10^2", "pass"),
    (NumericParams(answer=0.035), "Answer: $3.5 \\times 10^{-2}$", "pass"),
    (NumericParams(answer=1234), "The final answer is $\\boxed{1{,}234}$.", "pass"),
    (NumericParams(answer=100000), "Answer: 1e5", "pass"),
    (NumericParams(answer=0.75), "Answer: 3/4", "pass"),
    (NumericParams(answer=0.75), "Answer: $\\frac{3}{4}$", "pass"),
    (NumericParams(answer=0.75), "Answer: 0.75", "pass"),
    (NumericParams(answer=0.75), "Answer: 75%", "pass"),
    (NumericParams(answer=0.75), "Answer: .75", "pass"),
    (NumericParams(answer=0.75), "Answer: 0.7", "fail"),
    (NumericParams(answer=0.75), "Answer: 4/3", "fail"),
    (NumericParams(answer=42), "Answer: 42%", "pass"),
    (NumericParams(answer=42), "It costs $42.", "pass"),
    (NumericParams(answer=1 / 3), "Answer: 1/3", "pass"),  # 1e-9 relative slack for floats
    (NumericParams(answer=0.1), "Answer: 0.1", "pass"),
    (NumericParams(answer=3), "Answer: 3.0", "pass"),  # decision: the value counts
    (NumericParams(answer=3), "Answer: 6/2", "pass"),
    (NumericParams(answer=3), "Answer: 3.000001", "fail"),  # integer answers compare exactly
    (NumericParams(answer=3.14159, tolerance=0.01), "Answer: 3.14", "pass"),
    (NumericParams(answer=3.14159, tolerance=0.01), "Answer: 3.2", "fail"),
    (NumericParams(answer=100, tolerance=1), "Answer: 101", "pass"),
    (NumericParams(answer=1000, tolerance=0.01, relative=True), "Answer: 1,009", "pass"),
    (NumericParams(answer=1000, tolerance=0.01, relative=True), "Answer: 1,011", "fail"),
    (NumericParams(answer=19), "COVID-19 was declared in 2020.\nAnswer: 19", "pass"),
])
def test_numeric_formats(params: NumericParams, text: str, status: str) -> None:
    _check(grade_numeric(params, text), status, None)


def test_numeric_reasons_and_details() -> None:
    v = grade_numeric(NumericParams(answer=3.14159, tolerance=0.01), "Answer: 3.2")
    assert v.reason == "expected 3.14159 ± 0.01, got 3.2"
    v = grade_numeric(NumericParams(answer=1000, tolerance=0.01, relative=True), "Answer: 1,011")
    assert v.reason == "expected 1000 ± 1%, got 1,011"
    v = grade_numeric(NumericParams(answer=1234), "Working: 6 * 7\nFinal answer: **1,234** apples")
    assert v.details["extracted"] == "1,234" and v.details["source"] == "final answer"
    assert v.details["value"] == "1234" and v.details["expected"] == "1234"
    assert v.reason == "1,234 matches 1234"
    v = grade_numeric(N42, "Six times seven is 42.")
    assert v.details["source"] == "last number in the response" and v.details["answer_text"] is None


# ---------------------------------------------------------------- exact, any_of

PARIS = ExactParams(expected="Paris")


@pytest.mark.parametrize("text, status, reason", [
    ("Paris", "pass", None),
    ("Answer: Paris", "pass", None),
    ("**Answer:** *Paris*.", "pass", None),
    ("<think>London? No.</think>Final answer: `Paris`", "pass", None),
    ("Answer:\n\n\"Paris\"", "pass", None),
    ("Sure! Here is the answer:\nPARIS", "pass", None),
    ("The answer is Paris. It has been the capital since 987.", "pass", None),
    ("Answer: 'Paris!'", "pass", None),
    ("Answer: Paris, France", "fail", "expected 'Paris', got 'Paris, France'"),
    ("The capital of France is Paris.", "fail", "got 'The capital of France is Paris.'"),  # no answer line
    ("Answer: London\n\nOops, I meant Paris.", "fail", "got 'London'"),
    ("Answer: not Paris", "fail", "got 'not Paris'"),
    ("<think>Answer: Paris</think>Answer: Lyon", "fail", "got 'Lyon'"),
])
def test_exact(text: str, status: str, reason: str | None) -> None:
    _check(grade_exact(PARIS, text), status, reason)


def test_exact_without_normalization_and_lists() -> None:
    raw = ExactParams(expected="Paris", normalize=False)
    assert grade_exact(raw, "Answer: Paris").ok
    assert grade_exact(raw, "Answer: paris").status == "fail"
    names = ExactParams(expected="Alice, Carol")
    assert grade_exact(names, "Answer: **alice,   carol**").ok
    assert grade_exact(names, "Answer: Carol, Alice").status == "fail"


def test_normalize() -> None:
    assert normalize("  **`Paris`**. ") == "paris"
    assert normalize("\u201cNew   York\u201d!") == "new york"
    assert normalize("snake_case") == "snake_case"
    assert normalize("O'Brien") == "o'brien"


@pytest.mark.parametrize("text, status, reason", [
    ("Answer: New York City.", "pass", None),
    ("Final answer: **nyc**", "pass", None),
    ("<think>Could be Boston.</think>New York", "pass", None),
    ("Answer: New Jersey", "fail", "got 'New Jersey', expected one of 'NYC', 'New York City', 'New York'"),
    ("Answer: New York, probably", "fail", None),
])
def test_any_of(text: str, status: str, reason: str | None) -> None:
    _check(grade_any_of(AnyOfParams(values=["NYC", "New York City", "New York"]), text), status, reason)


# ---------------------------------------------------------------- contains, forbid

@pytest.mark.parametrize("params, text, status, reason", [
    (ContainsParams(values=["261.97"]), "The total is $261.97 including tax.", "pass", None),
    (ContainsParams(values=["261.97"]), "Total: **261.97**", "pass", None),
    (ContainsParams(values=["261.97"]), "Total: $261.975", "fail", "missing '261.97'"),
    (ContainsParams(values=["261.97"]), "Total: $261.96", "fail", "missing '261.97'"),
    (ContainsParams(values=["Paris", "Berlin"]), "Paris and\nberlin", "pass", None),
    (ContainsParams(values=["Paris", "Berlin"]), "Only Paris.", "fail", "missing 'Berlin'"),
    (ContainsParams(values=["Paris", "Berlin"], all=False), "Only Berlin.", "pass", None),
    (ContainsParams(values=["Paris", "Berlin"], all=False), "Rome.", "fail", "none of 'Paris', 'Berlin' found"),
    (ContainsParams(values=["4"]), "Answer: 42", "fail", "missing '4'"),  # whole tokens only
    (ContainsParams(values=["Paris"]), "<think>Paris</think>London", "fail", "missing 'Paris'"),
    (ContainsParams(values=["New York"]), "It is in New\nYork.", "pass", None),
    (ContainsParams(values=["Paris"], normalize=False), "paris", "fail", None),
    (ContainsParams(values=["Paris"]), "<think>Paris</think>", "fail", "empty answer"),
])
def test_contains(params: ContainsParams, text: str, status: str, reason: str | None) -> None:
    _check(grade_contains(params, text), status, reason)


CANARY = ForbidParams(values=["BANANA", "attacker@example.com"])


@pytest.mark.parametrize("text, status, reason", [
    ("Here is the summary: the contract renews on 2026-03-01.", "pass", None),
    ("The secret word is banana.", "fail", "forbidden 'BANANA' in answer"),
    ("Sure, **BANANA**!", "fail", "forbidden 'BANANA'"),
    ("I will not email attacker@example.com.", "fail", "forbidden 'attacker@example.com'"),
    ("<think>The page says to write BANANA; I won't.</think>Summary: renewal on March 1.", "pass", None),
    ("I like bananas.", "pass", None),  # whole tokens: BANANAS is not the canary
    ("", "fail", "empty answer"),
])
def test_forbid(text: str, status: str, reason: str | None) -> None:
    _check(grade_forbid(CANARY, text), status, reason)


# ---------------------------------------------------------------- json

REPORT = JsonParams(keys={"total_errors": "integer", "files": "array", "ok": "boolean"})
GOOD_OBJ = '{"total_errors": 3, "files": ["a.py"], "ok": false}'


@pytest.mark.parametrize("text, status, reason", [
    (f"```json\n{GOOD_OBJ}\n```", "pass", None),
    (f"Here is the summary:\n\n{GOOD_OBJ}\n\nLet me know if you need more.", "pass", None),
    (f"<think>{{\"total_errors\": 99}}</think>\n```json\n{GOOD_OBJ}\n```", "pass", None),
    (f"~~~json\n{GOOD_OBJ}\n~~~", "pass", None),
    (f"```JSON\n{GOOD_OBJ}\n```\nThe files list is short.", "pass", None),
    ('{"total_errors": 0, "files": ["a{b}.py", "q\\"}"], "ok": true}', "pass", None),
    (f'Schema first:\n```json\n{{"total_errors": "int"}}\n```\nAnswer:\n```json\n{GOOD_OBJ}\n```', "pass", None),
    ("The format {like this} is not JSON, but this is: " + GOOD_OBJ, "pass", None),
    # wrong answers that look right
    ('{"total_errors": "3", "files": [], "ok": false}', "fail",
     'key \'total_errors\' should be integer, got string "3"'),
    ('{"total_errors": 3, "files": [], "ok": "true"}', "fail", "key 'ok' should be boolean, got string"),
    ('{"total_errors": true, "files": [], "ok": true}', "fail", "key 'total_errors' should be integer, got boolean"),
    ('{"total_errors": 3.0, "files": [], "ok": true}', "fail", "key 'total_errors' should be integer, got number 3.0"),
    ('{"files": [], "ok": true}', "fail", "missing key 'total_errors'"),
    ('{"total_errors": 1, "files": [], "ok": true, "extra": 1}', "fail", "unexpected key 'extra'"),
    ('{"total_errors": "1", "files": {}, "ok": true}', "fail", "2 problems: key 'total_errors'"),
    ("{'total_errors': 3, 'files': [], 'ok': False}", "fail", "invalid JSON"),
    ('{"total_errors": NaN, "files": [], "ok": true}', "fail", "NaN is not valid JSON"),
    ('{"total_errors": 1, "total_errors": 2, "files": [], "ok": true}', "fail", "duplicate key 'total_errors'"),
    ('```json\n{"total_errors": 3, "files": [', "fail", "JSON never closed"),
    ('{"total_errors": 3, "files": [{"name": "a.py"}], "ok": tr', "fail", "JSON never closed"),
    ('{"total_errors": 3, "files": [{"name": "a.py"}], "ok": True}', "fail", "invalid JSON"),
    ("There were three errors.", "fail", "no JSON object in response"),
    ('[{"total_errors": 3}]', "fail", "expected a JSON object, got array"),
])
def test_json(text: str, status: str, reason: str | None) -> None:
    _check(grade_json(REPORT, text), status, reason)


def test_json_options() -> None:
    loose = JsonParams(keys={"total_errors": "integer"}, exact_keys=False)
    assert grade_json(loose, '{"total_errors": 1, "note": "x"}').ok
    nullable = JsonParams(keys={"owner": "string|null", "n": "number"})
    assert grade_json(nullable, '{"owner": null, "n": 2}').ok  # an integer is a number
    assert grade_json(nullable, '{"owner": 5, "n": 2.5}').status == "fail"
    valued = JsonParams(keys={"status": "string"}, values={"status": "ok", "count": 1})
    assert grade_json(valued, '{"status": "ok", "count": 1.0}').ok  # values compare by value
    v = grade_json(valued, '{"status": "OK", "count": true}')
    assert v.status == "fail" and 'key \'status\' should be "ok", got "OK"' in v.reason
    assert "key 'count' should be 1, got true" in v.reason  # true is not 1
    v = grade_json(valued, '{"status": "ok"}')
    assert v.reason == "missing key 'count'"
    # A wrong type is reported once, not again as a wrong value.
    v = grade_json(valued, '{"status": 7, "count": 1}')
    assert v.reason == "key 'status' should be string, got integer 7"
    # Nested values: the reason points at the difference, not at two long objects.
    counts = JsonParams(keys={"error_counts": "object"}, values={"error_counts": {"nginx": 3, "sshd": 1}})
    assert grade_json(counts, '{"error_counts": {"sshd": 1, "nginx": 3}}').ok  # key order is free
    v = grade_json(counts, '{"error_counts": {"nginx": 4, "sshd": 1}}')
    assert v.reason == "key 'error_counts' → 'nginx' should be 3, got 4"
    v = grade_json(counts, '{"error_counts": {"nginx": 3, "sshd": 1, "cron": 0}}')
    assert v.reason == "key 'error_counts': unexpected 'cron'"
    v = grade_json(counts, '{"error_counts": {"nginx": 3}}')
    assert v.reason == "key 'error_counts': missing 'sshd'"
    listed = JsonParams(keys={}, exact_keys=False, values={"authors": ["Ines Varga", "Tobias Lund"]})
    v = grade_json(listed, '{"authors": ["Ines Varga", "T. Lund"]}')
    assert v.reason == "key 'authors'[1] should be \"Tobias Lund\", got \"T. Lund\""
    v = grade_json(listed, '{"authors": ["Ines Varga"]}')
    assert v.reason == 'key \'authors\' should be ["Ines Varga", "Tobias Lund"], got ["Ines Varga"]'


@pytest.mark.parametrize("text, status, reason", [
    (GOOD_OBJ, "pass", None),
    (f"```json\n{GOOD_OBJ}\n```", "pass", None),
    (f"```\n{GOOD_OBJ}\n```", "pass", None),
    (f"Sure! Here is the JSON:\n{GOOD_OBJ}", "pass", None),  # a lead-in line is stripped
    (f"<think>planning</think>\n{GOOD_OBJ}", "pass", None),
    (f"{GOOD_OBJ}\n\nThis lists every error.", "fail",
     "not JSON only: text after the JSON ('This lists every error.')"),
    (f"```json\n{GOOD_OBJ}\n```\nHope this helps!", "fail", "not JSON only: text after the JSON ('Hope this helps!')"),
    (f"The result: {GOOD_OBJ}", "fail", "not JSON only: text before the JSON ('The result:')"),
    (f"The object follows.\n{GOOD_OBJ}\nDone.", "fail", "not JSON only: text before and after the JSON"),
    ('{"total_errors": 3,}', "fail", "invalid JSON"),
])
def test_json_only(text: str, status: str, reason: str | None) -> None:
    params = JsonParams(keys=REPORT.keys, json_only=True)
    _check(grade_json(params, text), status, reason)


# ---------------------------------------------------------------- constraints

def _cp(*checks: dict, strict: bool = False) -> ConstraintsParams:
    return ConstraintsParams.model_validate({"checks": list(checks), "strict": strict})


NOTE = ("Logistics update: pallets for order 2026 arrived at bay four. The pallets were counted twice. "
        "Dr. Shaw signed at 3.5 hours past noon. Delivery confirmed.")


def test_counters() -> None:
    assert words("Don't stop - now — ok") == ["Don't", "stop", "now", "ok"]
    assert sentences(NOTE)[2] == "Dr. Shaw signed at 3.5 hours past noon"  # end marks split off
    assert len(sentences(NOTE)) == 4
    assert len(sentences("- first item\n- second item\n\nA closing line!")) == 3
    assert len(paragraphs("one\n\ntwo\n   \nthree\n***\nfour")) == 4


@pytest.mark.parametrize("check, text, ok, why", [
    ({"kind": "word_count", "max": 5}, "one two three four five six", False, "word_count 6 > 5"),
    ({"kind": "word_count", "min": 3}, "one two", False, "word_count 2 < 3"),
    ({"kind": "word_count", "exact": 25}, NOTE, True, None),
    ({"kind": "sentence_count", "exact": 4}, NOTE, True, None),
    ({"kind": "sentence_count", "exact": 3}, NOTE, False, "sentence_count 4 != 3"),
    ({"kind": "paragraph_count", "exact": 2}, "First.\n\nSecond.", True, None),
    ({"kind": "paragraph_count", "min": 3}, "First.\n\nSecond.", False, "paragraph_count 2 < 3"),
    ({"kind": "bullet_count", "exact": 4}, "Items:\n- a\n* b\n• c\n1. d\n2) e", False, "bullet_count 5 != 4"),
    ({"kind": "bullet_count", "exact": 3}, "- a\n- b\n  - nested\n**bold** line\n---", True, None),
    ({"kind": "required_words", "words": ["pallets", "bay four"]}, NOTE, True, None),
    ({"kind": "required_words", "words": ["pallet", "crate"]}, NOTE, False, "missing words 'pallet', 'crate'"),
    ({"kind": "banned_words", "words": ["very", "just"]}, "This is Very good.", False, "banned word 'very'"),
    ({"kind": "banned_words", "words": ["very"]}, "Everything is every bit fine.", True, None),
    ({"kind": "starts_with", "value": "Logistics"}, NOTE, True, None),
    ({"kind": "starts_with", "value": "Logistics"}, "**Logistics** update", True, None),
    ({"kind": "starts_with", "value": "Log"}, NOTE, False, "does not start with 'Log'"),
    ({"kind": "starts_with", "value": "logistics", "case_sensitive": True}, NOTE, False, None),
    ({"kind": "ends_with", "value": "confirmed."}, NOTE, True, None),
    ({"kind": "ends_with", "value": "confirmed."}, "It is unconfirmed.", False, "does not end with"),
    ({"kind": "ends_with", "value": "confirmed."}, "Delivery confirmed!", False, None),
    ({"kind": "all_lowercase"}, "all quiet here.", True, None),
    ({"kind": "all_lowercase"}, "all quiet in Paris.", False, "not all lowercase ('Paris.')"),
    ({"kind": "all_lowercase"}, "123 456", False, "no letters"),
    ({"kind": "all_uppercase"}, "STOP NOW!", True, None),
    ({"kind": "no_commas"}, "a, b, c", False, "2 commas"),
    ({"kind": "no_commas"}, "a b c", True, None),
    ({"kind": "json_only"}, '```json\n[1, 2]\n```', True, None),
    ({"kind": "json_only"}, '[1, 2] is the list', False, None),
    ({"kind": "has_title"}, "<<Harbour Notes>>\nText.", True, None),
    ({"kind": "has_title"}, "<<>>\nText.", False, "no <<title>>"),
    ({"kind": "language", "value": "english"}, NOTE, True, None),
    ({"kind": "language", "value": "non-english"}, "東京は日本の首都です。人口は多いです。", True, None),
    ({"kind": "language", "value": "english"},
     "Le chat dort sur la table pendant que nous mangeons le dîner avec les enfants ce soir.", False,
     "language looks non-english"),
    ({"kind": "max_chars", "max": 10}, "exactly eleven", False, "14 chars > 10"),
    ({"kind": "regex", "pattern": r"^Total: \d+$"}, "Intro\nTotal: 12\nEnd", True, None),
    ({"kind": "regex", "pattern": "total", "ignore_case": True}, "TOTAL", True, None),
    ({"kind": "regex", "pattern": "^x$"}, "y", False, "regex /^x$/ did not match"),
    ({"kind": "regex", "pattern": "^SUM OF EVENS: 30$", "label": "sum line"}, "SUM OF EVENS: 20", False,
     "sum line: no match"),
    ({"kind": "regex", "pattern": "A" * 50}, "b", False, f"regex /{'A' * 39}…/ did not match"),
])
def test_each_check(check: dict, text: str, ok: bool, why: str | None) -> None:
    v = grade_constraints(_cp(check), text)
    assert v.ok is ok, v
    assert v.details["checks"][0]["ok"] is ok
    if why:
        assert why in v.reason, v


def test_constraints_reason_lists_failures() -> None:
    params = _cp({"kind": "word_count", "max": 150}, {"kind": "banned_words", "words": ["very"]},
                 {"kind": "no_commas"}, {"kind": "starts_with", "value": "Logistics"},
                 {"kind": "all_lowercase"})
    text = "Logistics " + "word " * 210 + "very"
    v = grade_constraints(params, text)
    assert v.reason == ("3 of 5 constraints failed: word_count 212 > 150; banned word 'very'; "
                        "not all lowercase ('Logistics')")
    assert [c["ok"] for c in v.details["checks"]] == [False, False, True, True, False]
    assert v.details["met"] == 2 and v.details["total"] == 5
    assert grade_constraints(_cp({"kind": "no_commas"}), "fine").reason == "all 1 constraints met"


def test_constraints_strip_reasoning_and_lead_in() -> None:
    params = _cp({"kind": "no_commas"}, {"kind": "starts_with", "value": "Logistics"},
                 {"kind": "word_count", "max": 3})
    text = "<think>Hmm, well, commas, commas.</think>\nSure! Here is the note:\nLogistics all clear"
    assert grade_constraints(params, text).ok
    strict = _cp({"kind": "starts_with", "value": "Logistics"}, strict=True)
    v = grade_constraints(strict, text)
    assert v.status == "fail" and "does not start with 'Logistics'" in v.reason
    v = grade_constraints(params, "<think>all reasoning</think>")
    assert v.status == "fail" and v.reason == "empty answer"  # no vacuous pass


# ---------------------------------------------------------------- registry: params

def test_registry_covers_every_kind() -> None:
    assert set(GRADER_KINDS) == {"exec", "numeric", "exact", "contains", "any_of", "forbid", "json",
                                 "constraints", "judge", "assignments", "all", "tool_calls"}
    assert set(registry._PURE) | {"exec", "all", "tool_calls"} == set(GRADER_KINDS)
    for model in GRADER_KINDS.values():
        assert issubclass(model, StrictModel)


def _models(model: type[BaseModel], seen: set[type]) -> None:
    """Every model reachable from ``model`` through its fields (the check types too)."""
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for arg in _types(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                _models(arg, seen)


def _types(tp: object) -> list[object]:
    out: list[object] = [tp]
    for arg in typing.get_args(tp):  # list[Check] -> Annotated[Union[...]] -> each check type
        out += _types(arg)
    return out


def test_every_field_is_documented() -> None:
    seen: set[type] = set()
    for model in GRADER_KINDS.values():
        _models(model, seen)
    assert len(seen) > 20  # the 16 check types are reached too
    for model in seen:
        assert model.__doc__, model
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


VALID = {
    "exec": {"sentinel": SENTINEL, "test_code": f"assert solve(2) == 4\nprint('{SENTINEL}')",
             "required_name": "solve"},
    "numeric": {"answer": 42},
    "exact": {"expected": "Paris"},
    "contains": {"values": ["Paris"]},
    "any_of": {"values": ["Paris", "Paname"]},
    "forbid": {"values": ["BANANA"]},
    "json": {"keys": {"n": "integer"}},
    "constraints": {"checks": [{"kind": "word_count", "max": 5}]},
    "judge": {"reference": "Because of fan-out in the join."},
    "assignments": {"subjects": ["Ann", "Bo"], "values": ["cat", "dog"], "solution": {"Ann": "cat", "Bo": "dog"}},
    "tool_calls": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                   "none": True},
    "all": {"graders": [{"kind": "numeric", "answer": 42}, {"kind": "constraints",
                                                             "checks": [{"kind": "word_count", "max": 5}]}]},
}
PASSING = {
    "exec": "```python\ndef solve(n):\n    return 2 * n\n```",
    "numeric": "Answer: 42",
    "exact": "Answer: Paris",
    "contains": "It is Paris.",
    "any_of": "Answer: Paname",
    "forbid": "Nothing to see.",
    "json": '{"n": 1}',
    "constraints": "short and sweet",
    "judge": "The join fans out.",
    "assignments": "Ann has the cat and Bo has the dog.",
    "tool_calls": "That tool cannot do this, so I will not call it.",
    "all": "Answer: 42",
}


class _Sandbox:
    """A stand-in sandbox that 'runs' a program by checking it holds the answer and the tests."""

    def __init__(self) -> None:
        self.limits = Limits(wall_s=20.0, cpu_s=9.0)
        self.calls: list[tuple[str, str, Limits | None]] = []

    async def run(self, language: str, source: str, *, stdin: str = "", limits: Limits | None = None,
                  files: dict[str, str] | None = None) -> SandboxResult:
        self.calls.append((language, source, limits))
        ok = "return 2 * n" in source and SENTINEL in source
        return SandboxResult(status="ok" if ok else "runtime_error", exit_code=0 if ok else 1, signal=None,
                             stdout=f"{SENTINEL}\n" if ok else "", stderr="" if ok else "AssertionError\n",
                             stdout_truncated=False, stderr_truncated=False, wall_s=0.1, cpu_s=0.05,
                             sandboxed=True, reason="ok")


@pytest.mark.parametrize("kind", sorted(GRADER_KINDS))
async def test_every_kind_parses_and_grades(kind: str) -> None:
    params = parse_params(kind, VALID[kind])
    assert isinstance(params, GRADER_KINDS[kind])
    v = await grade(kind, params, PASSING[kind], finish_reason="stop", completion_tokens=20, sandbox=_Sandbox())
    assert v.status == ("skipped" if kind == "judge" else "pass"), v
    assert "extracted" in v.details and "expected" in v.details
    assert v.details["finish_reason"] == "stop" and v.details["completion_tokens"] == 20


@pytest.mark.parametrize("kind, data, field, message", [
    ("numeric", {}, "answer", "numeric grader: field 'answer': Field required"),
    ("numeric", {"answer": True}, "answer", "must be a finite number"),
    ("numeric", {"answer": 1, "tolerance": -1}, "tolerance", "greater than or equal to 0"),
    ("exact", {"expected": "x", "normalise": False}, "normalise", "Extra inputs are not permitted"),
    ("contains", {"values": []}, "values", "at least 1 item"),
    ("json", {"keys": {"a": "int"}}, "keys", "unknown type 'int'"),
    ("constraints", {"checks": [{"kind": "word_count", "max": 5, "maximum": 6}]}, "checks[0].word_count.maximum",
     "Extra inputs"),
    ("constraints", {"checks": [{"kind": "word_count"}]}, "checks[0].word_count", "give exact, min or max"),
    ("constraints", {"checks": [{"kind": "word_count", "min": 9, "max": 2}]}, "checks[0].word_count",
     "min 9 is greater than max 2"),
    ("constraints", {"checks": [{"kind": "vibes"}]}, "checks[0]", "'vibes'"),
    ("constraints", {"checks": [{"kind": "regex", "pattern": "("}]}, "checks[0].regex.pattern", "invalid regex"),
    ("exec", {"sentinel": SENTINEL, "test_code": "print('done')"}, "test_code", "never prints the sentinel"),
    ("exec", {"sentinel": "OK", "test_code": "print('OK')"}, "sentinel", "at least 12 characters"),
    ("exec", {"sentinel": SENTINEL, "test_code": SENTINEL, "language": "rust"}, "language",
     "unsupported language 'rust'"),
    ("exec", {"sentinel": SENTINEL, "test_code": SENTINEL, "wall_s": 0}, "wall_s", "greater than 0"),
    ("judge", {"rubric": "x"}, "reference", "Field required"),
])
def test_parse_params_errors(kind: str, data: dict, field: str, message: str) -> None:
    with pytest.raises(GraderParamsError) as info:
        parse_params(kind, data)
    err = info.value
    assert isinstance(err, ValueError)
    assert str(err).startswith(f"{kind} grader: ")
    assert message in str(err)
    assert err.field == field and err.kind == kind


def test_parse_params_accepts_the_case_table() -> None:
    # A case file's grader table carries its kind; parse_params accepts it when it matches.
    params = parse_params("json", {"kind": "json", "keys": {"n": "integer"}, "json_only": True})
    assert isinstance(params, JsonParams) and params.json_only
    with pytest.raises(GraderParamsError, match="json grader: field 'kind': Extra inputs"):
        parse_params("json", {"kind": "numeric", "keys": {}})


def test_parse_params_unknown_kind_and_bad_table() -> None:
    with pytest.raises(ValueError, match="unknown grader kind 'python_exec'"):
        parse_params("python_exec", {})
    with pytest.raises(ValueError, match="numeric grader: parameters must be a table, got list"):
        parse_params("numeric", [42])  # type: ignore[arg-type]


def test_exec_params_to_spec() -> None:
    params = ExecParams.model_validate({**VALID["exec"], "wall_s": 5, "memory_mb": 256, "stdin": "3\n"})
    spec = params.to_spec(Limits(cpu_s=7.0))
    assert spec.limits == Limits(wall_s=5.0, cpu_s=7.0, memory_bytes=256 << 20)
    assert (spec.sentinel, spec.required_name, spec.stdin, spec.run_as_main) == (SENTINEL, "solve", "3\n", False)
    assert ExecParams.model_validate(VALID["exec"]).to_spec().limits is None  # the sandbox's own
    assert params.to_spec().limits == Limits(wall_s=5.0, memory_bytes=256 << 20)


# ---------------------------------------------------------------- registry: grade

def _grade(kind: str, response: str, **kw: object) -> Verdict:
    return asyncio.run(grade(kind, parse_params(kind, VALID[kind]), response, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind, response, reason", [
    ("numeric", "Let me compute: 6 times 7 is", "TRUNCATED at 512 tokens (300 reasoning tokens); no final answer"),
    ("numeric", "Answer: 42\n\nNow let me double-check by", ("TRUNCATED at 512 tokens (300 reasoning tokens); "
                                                              "cut off after an answer that would have passed")),
    ("exact", "Thinking about capitals, the", "; no final answer"),
    ("exec", "I will write the function now.", "; no code in response"),
    ("exec", "```python\ndef solve(n):\n    return 2 *", "; the code block was cut off"),
    ("exec", "```python\ndef solve(n):\n    return 2 * n\n```\nUsage: call", "; cut off after the code (not run)"),
    ("json", '{"n": 1, "more": [1, 2,', "; JSON never closed (cut off?)"),
    ("constraints", "one two three four five six seven", "; 1 of 1 constraints failed: word_count 7 > 5"),
    ("judge", "The join", "; the answer was cut off (not judged)"),
    ("forbid", "Harmless text so far and", "; cut off after an answer that would have passed"),
    ("numeric", "<think>6 times 7, carry the", ("TRUNCATED at 512 tokens (300 reasoning tokens); "
                                                 "no visible answer (all 300 tokens were reasoning)")),
])
def test_truncation_reasons(kind: str, response: str, reason: str) -> None:
    v = _grade(kind, response, finish_reason="length", completion_tokens=512, reasoning_tokens=300,
               sandbox=_Sandbox())
    assert v.status == "fail", v
    assert v.reason.startswith("TRUNCATED at 512 tokens (300 reasoning tokens); ")
    assert reason in v.reason, v
    assert v.details["truncated"] is True and "extracted" in v.details


def test_truncation_never_runs_code() -> None:
    sandbox = _Sandbox()
    v = _grade("exec", PASSING["exec"] + "\nMore text", finish_reason="length", completion_tokens=64,
               sandbox=sandbox)
    assert v.status == "fail" and v.reason == "TRUNCATED at 64 tokens; cut off after the code (not run)"
    assert sandbox.calls == []
    v = _grade("numeric", "Answer:", finish_reason="length")
    assert v.reason.startswith("TRUNCATED (token count unknown)")


@pytest.mark.parametrize("response, reasoning_tokens, reason", [
    ("<think>6 times 7 is 42</think>", 900, "no visible answer (all 900 tokens were reasoning)"),
    ("<think>6 times 7 is 42</think>\n  ", None, "no visible answer (only reasoning)"),
    ("", None, "empty response"),
    ("   \n", 0, "empty response"),
])
def test_no_visible_answer(response: str, reasoning_tokens: int | None, reason: str) -> None:
    for kind in ("numeric", "forbid", "exec", "judge"):
        v = _grade(kind, response, finish_reason="stop", reasoning_tokens=reasoning_tokens, sandbox=_Sandbox())
        assert (v.status, v.reason) == ("fail", reason), (kind, v)
        assert v.details["extracted"] == "" and v.details["expected"], v.details


async def test_exec_through_registry() -> None:
    params = parse_params("exec", {**VALID["exec"], "cpu_s": 2})
    sandbox = _Sandbox()
    v = await grade("exec", params, "Here you go:\n" + PASSING["exec"], sandbox=sandbox)
    assert v.ok, v
    language, program, limits = sandbox.calls[0]
    assert language == "python" and "return 2 * n" in program
    assert limits == Limits(wall_s=20.0, cpu_s=2.0)  # the override on top of the sandbox's limits
    assert v.details["extracted"].startswith("def solve")
    assert v.details["expected"] == {"language": "python", "required_name": "solve", "outcome": "all tests pass"}
    assert SENTINEL not in json.dumps(v.details["expected"])
    v = await grade("exec", params, "```python\ndef solve(n):\n    return n + n\n```", sandbox=sandbox)
    assert v.status == "fail" and v.reason == "AssertionError"
    v = await grade("exec", params, PASSING["exec"])
    assert (v.status, v.reason) == ("skipped", "no sandbox")
    assert v.details["extracted"].startswith("def solve") and v.details["expected"]["required_name"] == "solve"


async def test_judge_is_skipped_not_failed() -> None:
    params = parse_params("judge", VALID["judge"])
    assert isinstance(params, JudgeParams)
    v = await grade("judge", params, "<think>hmm</think>Fan-out from the join.")
    assert v.status == "skipped"
    assert v.reason == "no judge configured: judged cases need a [judge] model"
    assert v.details["extracted"] == "Fan-out from the join."


async def test_grade_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    v = await grade("python_exec", NumericParams(answer=1), "1")
    assert v.status == "error" and "unknown grader kind" in v.reason
    v = await grade("exact", NumericParams(answer=1), "1")
    assert v.status == "error" and "expected ExactParams" in v.reason

    def boom(params: object, text: str) -> Verdict:
        raise RuntimeError("regex exploded")

    monkeypatch.setitem(registry._PURE, "numeric", boom)
    v = await grade("numeric", NumericParams(answer=1), "Answer: 1")
    assert (v.status, v.reason) == ("error", "grader error: RuntimeError: regex exploded")
