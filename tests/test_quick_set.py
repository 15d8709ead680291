"""The quick set (cases/quick): it loads cleanly, every reference passes, every wrong answer fails,
and a corpus of extra responses gets the verdict a careful reviewer would give.

Grading goes through ``forgetui.grading.registry`` (``parse_params`` + ``grade``), the path a run
takes, including the composite ``all`` and the ``assignments`` kind. Exec cases run in the
bubblewrap sandbox and are skipped with the sandbox's own reason where it is not usable.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from forgetui.cases.loader import load_library
from forgetui.grading import registry
from forgetui.grading.verdict import Verdict
from forgetui.sandbox import Sandbox

QUICK_DIR = Path(__file__).resolve().parents[1] / "cases" / "quick"
RAW: list[dict[str, Any]] = [entry for path in sorted(QUICK_DIR.glob("*.toml"))
                             for entry in tomllib.loads(path.read_text(encoding="utf-8"))["case"]]
BY_ID = {entry["id"]: entry for entry in RAW}
ABILITY = ["quick.code.median", "quick.logic.pets", "quick.json.record", "quick.instruct.evens", "quick.summary.ferry"]
AGENT = ["quick.agent.ack", "quick.agent.format", "quick.agent.concise", "quick.agent.counts"]


@pytest.fixture(scope="module")
def sandbox() -> Sandbox | None:
    sb = Sandbox()
    return sb if sb.check().ok else None


def _sandbox_or_skip(case_id: str, sandbox: Sandbox | None) -> Sandbox | None:
    if BY_ID[case_id]["grader"]["kind"] != "exec":
        return None
    if sandbox is None:
        pytest.skip("bubblewrap sandbox not usable here (apt-get install -y bubblewrap): "
                    + "; ".join(Sandbox().check().problems))
    return sandbox


async def _grade(grader: dict[str, Any], response: str, sandbox: Sandbox | None = None) -> Verdict:
    kind = grader["kind"]
    params = registry.parse_params(kind, {k: v for k, v in grader.items() if k != "kind"})
    return await registry.grade(kind, params, response, sandbox=sandbox)


async def _grade_case(case_id: str, response: str, sandbox: Sandbox | None) -> Verdict:
    return await _grade(BY_ID[case_id]["grader"], response, _sandbox_or_skip(case_id, sandbox))


# ---------------------------------------------------------------- the library

def test_quick_cases_load_without_problems() -> None:
    lib = load_library([Path("cases/quick")] if Path("cases/quick").is_dir() else [QUICK_DIR])
    assert lib.problems == []
    assert [c.id for c in lib.cases] == ABILITY + AGENT
    assert all(case.params is not None for case in lib.cases)


def test_selection_gives_nine_cases_with_the_right_tags() -> None:
    lib = load_library([QUICK_DIR])
    chosen = lib.select(["quick"])
    assert [c.id for c in chosen] == ABILITY + AGENT
    for case in chosen:
        assert case.sets == ["quick"]
        assert ("ability" in case.tags) == (case.id in ABILITY), case.id
        assert ("agent" in case.tags) == (case.id in AGENT), case.id
    assert [c.id for c in lib.select(["tag:ability"])] == ABILITY
    assert [c.id for c in lib.select(["tag:agent"])] == AGENT
    assert all(c.category == "agent" for c in lib.select(["tag:agent"]))
    assert lib.sets()["quick"] == 9


def test_every_case_has_a_reference_and_at_least_two_wrong_answers() -> None:
    for entry in RAW:
        verify = entry["verify"]
        assert verify.get("reference"), entry["id"]
        assert len(verify.get("wrong", [])) >= 2, entry["id"]
        assert len(set(verify["wrong"])) == len(verify["wrong"]), entry["id"]


def test_exec_sentinel_is_hidden_from_the_model() -> None:
    grader = BY_ID["quick.code.median"]["grader"]
    sentinel = grader["sentinel"]
    assert re.fullmatch(r"FTUI_OK_[0-9a-f]{16}", sentinel)
    assert sentinel not in BY_ID["quick.code.median"]["prompt"]
    assert grader["test_code"].count(sentinel) == 1
    assert grader["test_code"].rstrip().endswith(f'print("{sentinel}")')


# ---------------------------------------------------------------- references and wrong answers

@pytest.mark.parametrize("case_id", ABILITY + AGENT)
async def test_reference_passes(case_id: str, sandbox: Sandbox | None) -> None:
    verdict = await _grade_case(case_id, BY_ID[case_id]["verify"]["reference"], sandbox)
    assert verdict.status == "pass", (verdict.reason, verdict.details)


#: Why each wrong answer in the case files must fail: a fragment of the verdict's reason, or for
#: a constraints case the indices of the checks that must fail (regex reasons are shortened).
WRONG_REASONS: dict[str, list[Any]] = {
    "quick.code.median": ["input list was modified", "returned 2, expected 2.5", "did not raise ValueError",
                          "returned 3, expected 2.5"],
    "quick.logic.pets": ["Tomasz: tortoise (expected cat)", "several values named for Tomasz",
                         "no value stated for Greta", "Priya: tortoise (expected parrot)"],
    "quick.json.record": ["'available' should be boolean", "'year' should be integer", "unexpected key 'publisher'",
                          "'authors' should be array", "not JSON only", "'available' should be false"],
    # checks: 0 = the ten number lines, 1 = the sum line, 2 = nothing else around the block
    "quick.instruct.evens": [(1,), (0,), (0, 2), (0, 1, 2), (2,), (1,)],
    "quick.summary.ferry": ["Oyelaran", "97", "word_count", "2027"],
    # checks: 0 = no syslog-like line, 1 = no made-up result, 2-4 = ERROR / service / JSON named,
    # 5 = a limit or a need named, 6 = 30-400 words
    "quick.agent.ack": [(0,), (0, 1), (2, 3, 4, 5, 6), (0,)],
    "quick.agent.format": ["'total_errors' should be integer", "'services' should be array",
                           "'scan_period' should be string", "unexpected key 'severity'", "no JSON object"],
    "quick.agent.concise": ["chars >", "no JSON object"],
    "quick.agent.counts": ["'total_errors' should be 8, got 9", "'total_errors' should be 8, got 9",
                           "error_counts", "error_counts", "'total_errors' should be integer"],
}
WRONG = [(case_id, i) for case_id in ABILITY + AGENT for i in range(len(BY_ID[case_id]["verify"]["wrong"]))]


def test_every_wrong_answer_has_a_recorded_reason() -> None:
    for case_id in ABILITY + AGENT:
        assert len(WRONG_REASONS[case_id]) == len(BY_ID[case_id]["verify"]["wrong"]), case_id


@pytest.mark.parametrize("case_id, index", WRONG, ids=[f"{c}-{i}" for c, i in WRONG])
async def test_wrong_answer_fails(case_id: str, index: int, sandbox: Sandbox | None) -> None:
    verdict = await _grade_case(case_id, BY_ID[case_id]["verify"]["wrong"][index], sandbox)
    assert verdict.status == "fail", (verdict.reason, verdict.details)
    why = WRONG_REASONS[case_id][index]
    if isinstance(why, tuple):
        failed = tuple(i for i, check in enumerate(verdict.details["checks"]) if not check["ok"])
        assert failed == why, verdict.reason
    else:
        assert why in verdict.reason


# ---------------------------------------------------------------- more responses, cases 1-5 (and a few agent ones)

MEDIAN_OK = '''def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty list")
    s = sorted(numbers)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
'''

SUMMARY_60 = ("The electric ferry Marisol links Kestrel Bay and Dunmore, running 97% of sailings on time with "
              "38-minute crossings. Chief engineer Adaeze Oyelaran reports healthy batteries but warns of storm "
              "cancellations. A larger second ferry from Gdansk enters service in 2027, after a transformer upgrade. "
              "Passenger numbers rose by a fifth over the year, while freight traffic stayed flat at Dunmore.")
SUMMARY_61 = SUMMARY_60.replace("at Dunmore.", "at Dunmore pier.")

VARIANTS: list[tuple[str, str, str, str]] = [
    # ---- 1. median_of_list
    ("quick.code.median", "statistics-module", """Python's standard library already does this:

```python
import statistics


def median_of_list(numbers):
    if not numbers:
        raise ValueError("median_of_list() arg is an empty list")
    return statistics.median(numbers)
```""", "pass"),
    ("quick.code.median", "unfenced-after-preamble", "Sure! Here is the function:\n\n" + MEDIAN_OK, "pass"),
    ("quick.code.median", "wrong-draft-in-think", """<think>
First idea:
```python
def median_of_list(numbers):
    numbers.sort()
    return numbers[len(numbers) // 2]
```
No: that mutates the input and ignores even lengths.
</think>
```python
""" + MEDIAN_OK + "```", "pass"),
    ("quick.code.median", "tilde-fence-and-main-block", """~~~python
""" + MEDIAN_OK + """

if __name__ == "__main__":
    values = [float(x) for x in input("numbers: ").split()]
    print(median_of_list(values))
~~~""", "pass"),
    ("quick.code.median", "usage-block-after", "```python\n" + MEDIAN_OK + "```\n\nUsage:\n\n```python\n"
     "print(median_of_list([3, 1, 2]))  # 2\nprint(median_of_list([4, 1, 3, 2]))  # 2.5\n```\n\n"
     "Output:\n\n```text\n2\n2.5\n```", "pass"),
    ("quick.code.median", "copy-then-sort", """```py
def median_of_list(numbers):
    if len(numbers) == 0:
        raise ValueError("cannot take the median of an empty list")
    data = numbers[:]
    data.sort()
    mid, odd = divmod(len(data), 2)
    return data[mid] if odd else (data[mid - 1] + data[mid]) / 2
```
The slice copies the list, so sorting it leaves the caller's list alone.""", "pass"),
    ("quick.code.median", "alias-is-not-a-copy", """```python
def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty")
    data = numbers          # work on the data
    data.sort()
    n = len(data)
    return data[n // 2] if n % 2 else (data[n // 2 - 1] + data[n // 2]) / 2
```""", "fail"),
    ("quick.code.median", "indexerror-on-empty", """```python
def median_of_list(numbers):
    s = sorted(numbers)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
```""", "fail"),
    ("quick.code.median", "rounds-the-result", """```python
def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty")
    s = sorted(numbers)
    n = len(s)
    m = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return round(m, 1)
```""", "fail"),
    ("quick.code.median", "returns-a-string", """```python
def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty")
    s = sorted(numbers)
    n = len(s)
    return str(s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)
```""", "fail"),
    ("quick.code.median", "mean-not-median", """```python
def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty")
    return sum(numbers) / len(numbers)
```""", "fail"),
    ("quick.code.median", "lower-middle", """```python
def median_of_list(numbers):
    if not numbers:
        raise ValueError("empty")
    s = sorted(numbers)
    return s[(len(s) - 1) // 2]
```""", "fail"),
    ("quick.code.median", "code-only-in-think", "<think>\n```python\n" + MEDIAN_OK + "```\n</think>\nDone, see above.",
     "fail"),
    ("quick.code.median", "truncated-block", "```python\ndef median_of_list(numbers):\n    if not numbers:\n"
     "        raise ValueError('empty')\n    s = sorted(numbers)\n    n = len(s)\n", "fail"),
    # ---- 2. the pets puzzle
    ("quick.logic.pets", "value-colon-subject", "Cat: Tomasz\nDog: Omar\nParrot: Priya\nTortoise: Greta", "pass"),
    ("quick.logic.pets", "json", '```json\n{"Priya": "parrot", "Tomasz": "cat", "Greta": "tortoise", "Omar": "dog"}\n```',
     "pass"),
    ("quick.logic.pets", "arrows-after-think", "<think>Greta parrot? No, clue 3 fails.</think>\n"
     "Priya → parrot\nTomasz → cat\nGreta → tortoise\nOmar → dog", "pass"),
    ("quick.logic.pets", "prose-conclusion", """Priya has neither the cat (clue 1) nor the dog (clue 2), so by clue 5 Tomasz keeps a furry pet. If it were the dog, Greta would keep the parrot and nobody could keep the cat, so Tomasz keeps the cat and Omar the dog. Clue 4 leaves Priya the parrot.

So: Priya keeps the parrot, Tomasz the cat, Greta the tortoise and Omar the dog.""", "pass"),
    ("quick.logic.pets", "owns-a", "Priya owns a parrot. Tomasz owns a cat. Greta owns a tortoise. Omar owns a dog.",
     "pass"),
    ("quick.logic.pets", "grid", "| | cat | dog | parrot | tortoise |\n|---|---|---|---|---|\n"
     "| Priya | | | ✓ | |\n| Tomasz | ✓ | | | |\n| Greta | | | | ✓ |\n| Omar | | ✓ | | |", "pass"),
    ("quick.logic.pets", "swapped-priya-greta", "Priya: tortoise\nTomasz: cat\nGreta: parrot\nOmar: dog", "fail"),
    ("quick.logic.pets", "tomasz-dog", "**Answer:** Tomasz keeps the dog, Omar the cat, Greta the tortoise and "
     "Priya the parrot.", "fail"),
    ("quick.logic.pets", "changes-its-mind", "Priya: parrot\nTomasz: cat\nGreta: tortoise\nOmar: dog\n\n"
     "Actually, wait: Greta keeps the parrot.", "fail"),
    ("quick.logic.pets", "answer-only-in-think", "<think>Priya parrot, Tomasz cat, Greta tortoise, Omar dog.</think>\n"
     "The puzzle has exactly one solution.", "fail"),
    ("quick.logic.pets", "three-of-four", "Priya has the parrot, Tomasz has the cat and Omar has the dog.", "fail"),
    # ---- 3. JSON record
    ("quick.json.record", "bare-one-line", '{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], '
     '"year": 2017, "pages": 344, "available": false}', "pass"),
    ("quick.json.record", "preamble-and-fence-other-order", """Sure! Here's the JSON object:

```json
{"available": false, "pages": 344, "year": 2017, "authors": ["Ines Varga", "Tobias Lund"], "title": "The Salt Cartographers"}
```""", "pass"),
    ("quick.json.record", "think-then-tilde-fence", "<think>on loan means false</think>\n~~~json\n"
     '{\n  "title": "The Salt Cartographers",\n  "authors": ["Ines Varga", "Tobias Lund"],\n  "year": 2017,\n'
     '  "pages": 344,\n  "available": false\n}\n~~~', "pass"),
    ("quick.json.record", "trailing-comma", '{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], '
     '"year": 2017, "pages": 344, "available": false,}', "fail"),
    ("quick.json.record", "pages-as-float", '{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], '
     '"year": 2017, "pages": 344.0, "available": false}', "fail"),
    ("quick.json.record", "single-quotes", "{'title': 'The Salt Cartographers', 'authors': ['Ines Varga', 'Tobias Lund'], "
     "'year': 2017, 'pages': 344, 'available': False}", "fail"),
    ("quick.json.record", "json-inside-a-sentence", 'The record is {"title": "The Salt Cartographers", "authors": '
     '["Ines Varga", "Tobias Lund"], "year": 2017, "pages": 344, "available": false}.', "fail"),
    ("quick.json.record", "title-in-capitals", '{"title": "THE SALT CARTOGRAPHERS", "authors": ["Ines Varga", '
     '"Tobias Lund"], "year": 2017, "pages": 344, "available": false}', "fail"),
    ("quick.json.record", "authors-reversed", '{"title": "The Salt Cartographers", "authors": ["Tobias Lund", '
     '"Ines Varga"], "year": 2017, "pages": 344, "available": false}', "fail"),
    ("quick.json.record", "draft-then-final", '```json\n{"title": "The Salt Cartographers"}\n```\n\nFull version:\n\n'
     '```json\n{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], "year": 2017, '
     '"pages": 344, "available": false}\n```', "fail"),
    ("quick.json.record", "available-null", '{"title": "The Salt Cartographers", "authors": ["Ines Varga", "Tobias Lund"], '
     '"year": 2017, "pages": 344, "available": null}', "fail"),
    # ---- 4. numbers 1-10
    ("quick.instruct.evens", "bare", "1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\nSUM OF EVENS: 30", "pass"),
    ("quick.instruct.evens", "opener-and-trailing-spaces", "Sure!\n\n1 \n2 EVEN \n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n"
     "10 EVEN\nSUM OF EVENS: 30  \n", "pass"),
    ("quick.instruct.evens", "text-fence-after-think", "<think>2+4+6+8+10 = 30</think>\n```text\n1\n2 EVEN\n3\n4 EVEN\n5\n"
     "6 EVEN\n7\n8 EVEN\n9\n10 EVEN\nSUM OF EVENS: 30\n```", "pass"),
    ("quick.instruct.evens", "tilde-fence", "~~~\n1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\n"
     "SUM OF EVENS: 30\n~~~", "pass"),
    ("quick.instruct.evens", "equals-sign", "1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\nSUM OF EVENS = 30",
     "fail"),
    ("quick.instruct.evens", "lowercase-even", "1\n2 even\n3\n4 even\n5\n6 even\n7\n8 even\n9\n10 even\nSUM OF EVENS: 30",
     "fail"),
    ("quick.instruct.evens", "sum-off-by-two", "1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\nSUM OF EVENS: 32",
     "fail"),
    ("quick.instruct.evens", "starts-at-zero", "0 EVEN\n1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\n"
     "SUM OF EVENS: 30", "fail"),
    ("quick.instruct.evens", "blank-lines", "1\n\n2 EVEN\n\n3\n\n4 EVEN\n\n5\n\n6 EVEN\n\n7\n\n8 EVEN\n\n9\n\n10 EVEN\n\n"
     "SUM OF EVENS: 30", "fail"),
    ("quick.instruct.evens", "sign-off", "1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN\nSUM OF EVENS: 30\n\n"
     "Hope this helps!", "fail"),
    ("quick.instruct.evens", "odd-numbers-marked", "1 ODD\n2 EVEN\n3 ODD\n4 EVEN\n5 ODD\n6 EVEN\n7 ODD\n8 EVEN\n9 ODD\n"
     "10 EVEN\nSUM OF EVENS: 30", "fail"),
    ("quick.instruct.evens", "no-sum-line", "1\n2 EVEN\n3\n4 EVEN\n5\n6 EVEN\n7\n8 EVEN\n9\n10 EVEN", "fail"),
    # ---- 5. ferry summary
    ("quick.summary.ferry", "bullets", """**Summary:**
- Battery-electric ferry Marisol replaced the Gannet on the Kestrel Bay–Dunmore crossing.
- 97% of sailings on time; crossings down to 38 minutes.
- Chief engineer Oyelaran: batteries healthy, but a second transformer is needed.
- A larger second electric ferry enters service in 2027.""", "pass"),
    ("quick.summary.ferry", "long-think-short-answer", "<think>" + "Reading the report carefully. " * 80 + "</think>\n"
     "Marisol, the new electric ferry between Kestrel Bay and Dunmore, ran 97 percent of sailings on time and crosses "
     "in 38 minutes. Engineer Adaeze Oyelaran says a transformer upgrade must come before a second, larger ferry "
     "arrives in 2027.", "pass"),
    ("quick.summary.ferry", "exactly-60-words", SUMMARY_60, "pass"),
    ("quick.summary.ferry", "61-words", SUMMARY_61, "fail"),
    ("quick.summary.ferry", "misspelt-engineer", "The electric ferry Marisol now links Kestrel Bay and Dunmore: 97% on "
     "time, 38-minute crossings. Engineer Oyelaren says a second ferry arrives in 2027.", "fail"),
    ("quick.summary.ferry", "number-in-words", "The electric ferry Marisol now links Kestrel Bay and Dunmore, "
     "ninety-seven percent on time, with 38-minute crossings. Engineer Oyelaran expects a second ferry in 2027.",
     "fail"),
    ("quick.summary.ferry", "old-crossing-time", "The electric ferry Marisol now links Kestrel Bay and Dunmore, 97% on "
     "time, crossing in 52 minutes. Engineer Oyelaran expects a second ferry in 2027.", "fail"),
    ("quick.summary.ferry", "no-route", "The electric ferry Marisol ran 97% of sailings on time and crosses in 38 "
     "minutes. Engineer Oyelaran expects a second, larger ferry in 2027.", "fail"),
    # ---- 6-9. agent checks
    ("quick.agent.ack", "plain-steps-and-needs", """Understood. When you send the excerpt, I will go through it line by line, keep only the lines whose level is ERROR, group them by service (the program name in each line), count them, note the first and last timestamps, and return the JSON report.

What I need: the excerpt itself, pasted as text, since I cannot access your servers or files. If the logs use a custom format, tell me where the level and the service name are.""", "pass"),
    ("quick.agent.ack", "iso-example-line", """Understood. I will keep the ERROR lines, group them by service and return the JSON report. I can only read what you paste, so I need the full excerpt. A line like 2024-03-11T02:03:17Z edge-01 nginx: ERROR upstream timed out would count once for nginx.""", "fail"),
    ("quick.agent.ack", "claims-results", """Understood: I will filter the ERROR lines, group them by service and return JSON. I need the excerpt pasted as text, since I cannot access your servers. Based on typical logs, I found 3 errors in nginx last time, so expect something similar.""", "fail"),
    ("quick.agent.format", "bare-json", '{"services": [{"name": "nginx", "errors": 3}], "total_errors": 3, '
     '"scan_period": "Mar 11 02:00:03 - Mar 11 02:19:44"}', "pass"),
    ("quick.agent.format", "services-null", '{"services": null, "total_errors": 8, "scan_period": "Mar 11"}', "fail"),
    ("quick.agent.format", "total-as-float", '{"services": [], "total_errors": 8.0, "scan_period": "Mar 11"}', "fail"),
    ("quick.agent.counts", "other-key-order", '{"total_errors": 8, "error_counts": {"sshd": 1, "postgres": 2, '
     '"payments": 2, "nginx": 3}}', "pass"),
    ("quick.agent.counts", "counts-as-strings", '{"error_counts": {"nginx": "3", "payments": "2", "postgres": "2", '
     '"sshd": "1"}, "total_errors": 8}', "fail"),
    ("quick.agent.counts", "host-instead-of-service", '{"error_counts": {"edge-01": 3, "app-01": 2, "db-01": 2, '
     '"auth-01": 1}, "total_errors": 8}', "fail"),
]


@pytest.mark.parametrize("case_id, label, response, expected", VARIANTS,
                         ids=[f"{c}-{label}" for c, label, _, _ in VARIANTS])
async def test_response_variants(case_id: str, label: str, response: str, expected: str,
                                 sandbox: Sandbox | None) -> None:
    verdict = await _grade_case(case_id, response, sandbox)
    assert verdict.status == expected, (label, verdict.reason, verdict.details)


def test_summary_boundary_variants_have_the_word_counts_they_claim() -> None:
    assert (len(SUMMARY_60.split()), len(SUMMARY_61.split())) == (60, 61)


def test_variant_corpus_covers_the_ability_cases_both_ways() -> None:
    for case_id in ABILITY:
        statuses = [expected for c, _, _, expected in VARIANTS if c == case_id]
        assert statuses.count("pass") >= 3 and statuses.count("fail") >= 4, case_id


# ---------------------------------------------------------------- case-specific checks

def test_summary_word_limit_matches_the_prompt() -> None:
    entry = BY_ID["quick.summary.ferry"]
    assert "at most 60 words" in entry["prompt"]
    checks = [g for g in entry["grader"]["graders"] if g["kind"] == "constraints"][0]["checks"]
    assert checks == [{"kind": "word_count", "max": 60}]
    source = entry["prompt"].split("---")[1]
    assert 230 <= len(source.split()) <= 290
    facts = [g for g in entry["grader"]["graders"] if g["kind"] == "contains"][0]
    assert facts["all"] is True and len(facts["values"]) == 6
    for value in facts["values"]:
        assert re.search(rf"(?<!\w){re.escape(value)}(?!\w)", source), value


def test_concise_limit_is_about_three_times_the_prompt() -> None:
    entry = BY_ID["quick.agent.concise"]
    limit = [g for g in entry["grader"]["graders"] if g["kind"] == "constraints"][0]["checks"][0]
    assert limit["kind"] == "max_chars"
    assert 2.5 <= limit["max"] / len(entry["prompt"]) <= 3.5


async def test_a_20000_character_answer_is_flagged(sandbox: Sandbox | None) -> None:
    entry = BY_ID["quick.agent.concise"]
    report = entry["verify"]["reference"].split("</think>")[1]
    padding = ("\n\nAdditional analysis: each ERROR line was reviewed in context, correlated with neighbouring "
               "lines and checked against typical failure patterns for its service.")
    answer = report
    while len(answer) < 20_000:
        answer += padding
    assert len(answer) >= 20_000 and 1_000 <= len(entry["prompt"]) <= 1_400
    verdict = await _grade_case("quick.agent.concise", answer, sandbox)
    assert verdict.status == "fail"
    assert "chars >" in verdict.reason
    # The same report without the padding passes: it is the length, not the content.
    assert (await _grade_case("quick.agent.concise", report, sandbox)).status == "pass"


def test_syslog_excerpt_has_the_recorded_counts() -> None:
    """Re-derive case 9's expected counts from the excerpt in its prompt."""
    entry = BY_ID["quick.agent.counts"]
    log = entry["prompt"].split("```")[1]
    counts: dict[str, int] = {}
    for line in log.strip().splitlines():
        m = re.match(r"^\w{3} +\d+ \d\d:\d\d:\d\d \S+ ([\w-]+)\[\d+\]: (\S+) ", line)
        assert m, line
        if m.group(2) == "ERROR":
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    assert entry["grader"]["values"] == {"total_errors": sum(counts.values()), "error_counts": counts}
    # The same excerpt is used in cases 7 and 8.
    for other in ("quick.agent.format", "quick.agent.concise"):
        assert BY_ID[other]["prompt"].split("```")[1] == entry["prompt"].split("```")[1]


def test_ack_prompt_gives_no_log_lines() -> None:
    prompt = BY_ID["quick.agent.ack"]["prompt"]
    assert not re.search(r"\d\d:\d\d:\d\d|\w\[\d+\]:", prompt)


# ---------------------------------------------------------------- the puzzle's brute force

PYTHON = "/usr/bin/python3"


def _run_brute_force(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-I", "-c", program], capture_output=True, text=True, timeout=10)


@pytest.fixture(scope="module")
def puzzle() -> dict[str, Any]:
    if not Path(PYTHON).exists():
        pytest.skip(f"{PYTHON} not found")
    return BY_ID["quick.logic.pets"]


def test_brute_force_prints_exactly_the_recorded_solution(puzzle: dict[str, Any]) -> None:
    result = _run_brute_force(puzzle["verify"]["brute_force"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == json.dumps(puzzle["grader"]["solution"], sort_keys=True) + "\n"
    assert json.loads(result.stdout) == puzzle["grader"]["solution"]


def test_brute_force_enumerates_all_24_and_rejects_several_solutions(puzzle: dict[str, Any]) -> None:
    """Uniqueness is proven by the program itself (it exits 1 unless exactly one assignment fits);
    dropping any single clue must leave several solutions, so every clue is needed."""
    program = puzzle["verify"]["brute_force"]
    assert "itertools.permutations" in program
    clue_lines = re.findall(r"^.*# (\d)\s*$", program, re.MULTILINE)
    assert clue_lines == ["1", "2", "3", "4", "5"]
    for n in clue_lines:
        weakened = re.sub(rf"^(\s*).*# {n}\s*$", r"\1True,", program, flags=re.MULTILINE)
        result = _run_brute_force(weakened)
        assert result.returncode == 1, (n, result.stdout)
        assert "expected exactly one solution, found" in result.stderr
    # Every clue in the program is one of the prompt's numbered clues.
    assert re.findall(r"^(\d)\. ", puzzle["prompt"], re.MULTILINE) == clue_lines


def test_brute_force_solution_matches_the_prompt_names(puzzle: dict[str, Any]) -> None:
    grader = puzzle["grader"]
    for name in grader["subjects"]:
        assert name in puzzle["prompt"]
    for pet in grader["values"]:
        assert pet in puzzle["prompt"]
    assert sorted(grader["solution"].values()) == sorted(grader["values"])
