"""The assignments grader: who-has-which answers in every wording, hedges, omissions, reasoning."""

from __future__ import annotations

import pytest

from forgetui.grading import registry
from forgetui.grading.assignments import AssignmentsParams, extract_assignments, grade_assignments

PARAMS = AssignmentsParams(
    subjects=["Alice", "Bob", "Carol", "Dan"],
    values=["cat", "dog", "fish", "hamster"],
    solution={"Alice": "cat", "Bob": "dog", "Carol": "fish", "Dan": "hamster"},
    synonyms={"fish": ["goldfish"]},
)
RIGHT = {"Alice": "cat", "Bob": "dog", "Carol": "fish", "Dan": "hamster"}


def _grade(text: str):
    return grade_assignments(PARAMS, text)


# ---------------------------------------------------------------- the forms an answer takes

CORRECT_FORMS = {
    "has": "Alice has the cat, Bob has the dog, Carol has the fish and Dan has the hamster.",
    "value-colon-subject": "Cat: Alice\nDog: Bob\nFish: Carol\nHamster: Dan",
    "subject-colon-value": "Alice: cat\nBob: dog\nCarol: fish\nDan: hamster",
    "arrows": "Alice -> cat\nBob → dog\nCarol => fish\nDan — hamster",
    "owns-a": "Alice owns a cat. Bob owns a dog. Carol owns a fish. Dan owns a hamster.",
    "belongs-to": "The cat belongs to Alice, the dog to Bob, the fish to Carol and the hamster to Dan.",
    "possessive": "Alice's pet is the cat; Bob's pet is the dog; Carol's pet is the fish; Dan's pet is the hamster.",
    "bold-bullets": "- **Alice**: 🐱 **Cat**\n- **Bob**: 🐶 **Dog**\n- **Carol**: 🐟 **Fish**\n- **Dan**: 🐹 **Hamster**",
    "numbered": "1. Alice - cat\n2. Bob - dog\n3. Carol - fish\n4. Dan - hamster",
    "parentheses": "Alice (cat), Bob (dog), Carol (fish), Dan (hamster)",
    "markdown-table": "| Person | Pet |\n|:--|:--|\n| Alice | Cat |\n| Bob | Dog |\n| Carol | Fish |\n| Dan | Hamster |",
    "table-pet-first": "| Pet | Owner |\n|---|---|\n| cat | Alice |\n| dog | Bob |\n| fish | Carol |\n| hamster | Dan |",
    "table-with-reason-column": (
        "| Person | Pet | Why |\n|---|---|---|\n| Alice | cat | clue 2 |\n| Bob | dog | clue 1 |\n"
        "| Carol | fish | only one left |\n| Dan | hamster | clue 3 |"),
    "column-table": "| | Alice | Bob | Carol | Dan |\n|---|---|---|---|---|\n| Pet | cat | dog | fish | hamster |",
    "check-grid": (
        "| | Cat | Dog | Fish | Hamster |\n|---|---|---|---|---|\n| Alice | ✓ | ✗ | ✗ | ✗ |\n"
        "| Bob | ✗ | ✓ | ✗ | ✗ |\n| Carol | ✗ | ✗ | ✓ | ✗ |\n| Dan | ✗ | ✗ | ✗ | ✓ |"),
    "json": '```json\n{"Alice": "cat", "Bob": "dog", "Carol": "fish", "Dan": "hamster"}\n```',
    "plurals-and-synonyms": "Alice keeps cats, Bob keeps dogs, Carol keeps goldfish, Dan keeps hamsters.",
    "lowercase-names": "alice: cat, bob: dog, carol: fish, dan: hamster",
    "one-line-with-semicolons": "Alice → cat; Bob → dog; Carol → fish; Dan → hamster",
    "informative-parenthesis": "Alice has the cat (she adopted it first). Bob has the dog. Carol has the fish. Dan has the hamster.",
    "negated-parenthesis": "Alice has the cat (not the dog). Bob has the dog (rules out the fish). Carol has the fish. Dan has the hamster.",
    "negation-after-comma": "Alice has the cat, not the fish. Bob has the dog. Carol has the fish. Dan has the hamster.",
    "hedge-before-colon": "The only arrangement that could satisfy every clue: Alice has the cat, Bob the dog, Carol the fish and Dan the hamster.",
}


@pytest.mark.parametrize("form", list(CORRECT_FORMS))
def test_every_wording_of_the_right_answer_passes(form: str) -> None:
    verdict = _grade(CORRECT_FORMS[form])
    assert verdict.status == "pass", (form, verdict.reason, verdict.details)
    assert verdict.details["extracted"] == RIGHT
    assert verdict.details["expected"] == RIGHT
    assert verdict.reason == "all 4 assignments correct"


WRONG_FORMS = {
    "has": "Alice has the dog, Bob has the cat, Carol has the fish and Dan has the hamster.",
    "table": "| Person | Pet |\n|---|---|\n| Alice | Cat |\n| Bob | Fish |\n| Carol | Dog |\n| Dan | Hamster |",
    "arrows": "Alice -> cat\nBob -> dog\nCarol -> hamster\nDan -> fish",
}


@pytest.mark.parametrize("form", list(WRONG_FORMS))
def test_a_wrong_assignment_fails_and_names_it(form: str) -> None:
    verdict = _grade(WRONG_FORMS[form])
    assert verdict.status == "fail"
    assert verdict.reason.startswith("2 of 4 wrong:")
    assert "expected" in verdict.reason


def test_wrong_reason_names_subject_value_and_expected() -> None:
    verdict = _grade("Alice: dog\nBob: cat\nCarol: fish\nDan: hamster")
    assert verdict.reason == "2 of 4 wrong: Alice: dog (expected cat); Bob: cat (expected dog)"
    assert verdict.details["extracted"] == {"Alice": "dog", "Bob": "cat", "Carol": "fish", "Dan": "hamster"}


# ---------------------------------------------------------------- ambiguity and omissions

@pytest.mark.parametrize("text, subject", [
    ("Alice: cat or dog\nBob: dog\nCarol: fish\nDan: hamster", "Alice"),
    ("Alice: cat/dog\nBob: dog\nCarol: fish\nDan: hamster", "Alice"),
    ("Alice: cat, dog, fish, hamster\nBob: dog\nCarol: fish\nDan: hamster", "Alice"),
    ("Alice has the cat or the dog. Bob has the dog. Carol has the fish. Dan has the hamster.", "Alice"),
    ("| Person | Pet |\n|---|---|\n| Alice | cat or dog |\n| Bob | dog |\n| Carol | fish |\n| Dan | hamster |", "Alice"),
    # Two different definite statements: which one is the answer?
    ("Alice has the cat. Bob has the dog. Carol has the fish. Dan has the hamster. Alice has the dog.", "Alice"),
])
def test_several_values_for_one_subject_fail(text: str, subject: str) -> None:
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.reason.startswith(f"several values named for {subject}:")
    assert isinstance(verdict.details["extracted"][subject], list)


def test_listing_every_option_for_everyone_fails() -> None:
    text = "\n".join(f"{p}: cat, dog, fish or hamster" for p in ["Alice", "Bob", "Carol", "Dan"])
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert "several values named for Alice" in verdict.reason and "and for Bob, Carol, Dan" in verdict.reason


def test_a_hedge_settled_later_is_not_ambiguous() -> None:
    text = ("Alice has the cat or the fish at this point. Clue 3 settles it.\n\n"
            "Alice has the cat, Bob has the dog, Carol has the fish, Dan has the hamster.")
    assert _grade(text).status == "pass"


@pytest.mark.parametrize("text, missing", [
    ("Alice has the cat, Bob has the dog and Carol has the fish.", "Dan"),
    ("Alice: cat\nBob: dog", "Carol, Dan"),
    ("Alice: cat\nBob: dog\nCarol: fish\nDan: ???", "Dan"),
    ("| Person | Pet |\n|---|---|\n| Alice | cat |\n| Bob | dog |\n| Carol | fish |\n| Dan | |", "Dan"),
])
def test_a_subject_left_out_fails(text: str, missing: str) -> None:
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.reason == f"no value stated for {missing}"
    for name in missing.split(", "):
        assert verdict.details["extracted"][name] is None


@pytest.mark.parametrize("text", ["", "I don't know.", "Here's my answer: it is a hard puzzle with no clear solution.",
                                  "Send me the clues again, please."])
def test_no_assignments_at_all(text: str) -> None:
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.reason == "no assignments found in the response"


@pytest.mark.parametrize("text", [
    "Alice does not have the dog. Bob doesn't have the cat. Carol can't have the hamster. Dan never had the fish.",
    "Neither Alice nor Bob has the fish. Nobody but Carol could own the hamster.",
    "If Alice has the dog, then Bob has the cat. Suppose Carol has the fish. Does Dan have the hamster?",
])
def test_negated_hypothetical_and_questions_assign_nothing(text: str) -> None:
    found, _ = extract_assignments(PARAMS, text)
    assert found.empty(), found.statements


# ---------------------------------------------------------------- reasoning, preamble, final answer

def test_think_block_is_ignored() -> None:
    text = ("<think>Maybe Alice has the dog? Then Bob has the cat... no. Alice: dog, Bob: cat.</think>\n"
            "Alice has the cat, Bob has the dog, Carol has the fish, Dan has the hamster.")
    verdict = _grade(text)
    assert verdict.status == "pass", verdict.reason


def test_answer_only_inside_think_is_not_graded() -> None:
    text = "<think>Alice: cat, Bob: dog, Carol: fish, Dan: hamster.</think>\nI worked it out above."
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.reason == "no assignments found in the response"


def test_truncated_think_block_is_not_graded() -> None:
    text = "<think>Alice: cat, Bob: dog, Carol: fish, Dan: hamster. Let me verify clue 2 and"
    assert _grade(text).status == "fail"


def test_stray_closing_tag_drops_the_reasoning_before_it() -> None:
    text = ("Alice: dog, Bob: cat maybe... checking.\n</think>\n"
            "Alice: cat\nBob: dog\nCarol: fish\nDan: hamster")
    assert _grade(text).status == "pass"


def test_final_answer_section_wins_over_the_working_out() -> None:
    text = """Let's test Alice with the dog first: Alice has the dog, Bob has the cat.
That breaks clue 2, so swap them.

**Final answer:**
- Alice: cat
- Bob: dog
- Carol: fish
- Dan: hamster"""
    verdict = _grade(text)
    assert verdict.status == "pass", verdict.reason
    assert verdict.details["method"] == "final-section"


def test_final_answer_section_that_is_wrong_fails_even_if_the_working_out_was_right() -> None:
    text = """Working: Alice has the cat, Bob has the dog, Carol has the fish, Dan has the hamster.

Final answer: Alice - dog, Bob - cat, Carol - fish, Dan - hamster."""
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.details["method"] == "final-section"
    assert verdict.details["extracted"]["Alice"] == "dog"


def test_final_answer_section_that_leaves_one_out_fails() -> None:
    text = """Alice has the cat, Bob has the dog, Carol has the fish, Dan has the hamster.

## Answer
Alice: cat, Bob: dog, Carol: fish."""
    verdict = _grade(text)
    assert verdict.status == "fail"
    assert verdict.reason == "no value stated for Dan"


def test_list_at_the_end_after_prose_reasoning() -> None:
    text = """Clue 1 says Bob keeps the dog or the fish. Clue 4 rules out the fish for him.
So Bob has the dog. Carol could have the fish or the hamster, and clue 2 leaves her the fish.

Alice: cat
Bob: dog
Carol: fish
Dan: hamster

Hope this helps!"""
    verdict = _grade(text)
    assert verdict.status == "pass", verdict.reason
    assert verdict.details["method"].startswith("last-")


def test_preamble_and_closing_chatter_are_harmless() -> None:
    text = ("Sure! Here is the solution:\n\nAlice -> cat\nBob -> dog\nCarol -> fish\nDan -> hamster\n\n"
            "Let me know if you want the reasoning.")
    assert _grade(text).status == "pass"


def test_verification_lines_after_the_answer_do_not_confuse_it() -> None:
    text = """**Solution**
| Person | Pet |
|---|---|
| Alice | cat |
| Bob | dog |
| Carol | fish |
| Dan | hamster |

Check: clue 1 (the dog is not Alice's) ✓; clue 2 (Carol does not have the hamster) ✓;
clue 3: if Dan had the fish, Bob would have the cat, which is not the case ✓."""
    verdict = _grade(text)
    assert verdict.status == "pass", (verdict.reason, verdict.details)


# ---------------------------------------------------------------- words, not substrings

def test_names_and_values_match_whole_words_only() -> None:
    params = AssignmentsParams(subjects=["Ann", "Ed"], values=["cat", "ant"], solution={"Ann": "cat", "Ed": "ant"})
    # "Annabel", "category", "Edward" and "want" must not count as mentions.
    assert grade_assignments(params, "Annabel's category: Edward wants a cat. Ann: cat. Ed: ant.").status == "pass"
    assert grade_assignments(params, "Ann: cat. Edward: ant.").reason == "no value stated for Ed"


def test_multi_word_values() -> None:
    params = AssignmentsParams(subjects=["Ann", "Ed"], values=["guinea pig", "pig"],
                               solution={"Ann": "guinea pig", "Ed": "pig"})
    assert grade_assignments(params, "Ann has the guinea pig and Ed has the pig.").status == "pass"
    assert grade_assignments(params, "Ann: guinea  pig\nEd: pig").status == "pass"
    assert grade_assignments(params, "Ann: pig\nEd: guinea pig").status == "fail"


# ---------------------------------------------------------------- parameters

def test_params_reject_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        AssignmentsParams.model_validate({"subjects": ["A"], "values": ["x"], "solution": {"A": "x"}, "answer": 1})


@pytest.mark.parametrize("data, message", [
    ({"subjects": ["A", "B"], "values": ["x", "y"], "solution": {"A": "x"}}, "one value per subject"),
    ({"subjects": ["A"], "values": ["x"], "solution": {"A": "z"}}, "not in values"),
    ({"subjects": ["A", "a"], "values": ["x", "y"], "solution": {"A": "x", "a": "y"}}, "unique"),
    ({"subjects": ["A"], "values": ["x"], "solution": {"A": "x"}, "synonyms": {"q": ["w"]}}, "unknown values"),
    ({"subjects": ["A"], "values": ["x"], "solution": {"A": "x"}, "synonyms": {"x": ["A"]}}, "different words"),
    ({"subjects": [], "values": ["x"], "solution": {}}, "at least 1"),
])
def test_params_are_checked(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AssignmentsParams.model_validate(data)


def test_details_always_carry_extracted_and_expected() -> None:
    verdict = _grade("Alice: cat")
    assert verdict.details["extracted"] == {"Alice": "cat", "Bob": None, "Carol": None, "Dan": None}
    assert verdict.details["expected"] == RIGHT
    assert verdict.details["method"] in ("whole", "final-section") or verdict.details["method"].startswith("last-")


async def test_through_the_registry() -> None:
    data = {"subjects": ["Alice", "Bob", "Carol", "Dan"], "values": ["cat", "dog", "fish", "hamster"],
            "solution": RIGHT}
    params = registry.parse_params("assignments", data)
    ok = await registry.grade("assignments", params, "<think>hmm</think>Cat: Alice, Dog: Bob, Fish: Carol, Hamster: Dan")
    assert ok.status == "pass", ok.reason
    bad = await registry.grade("assignments", params, "Cat: Bob, Dog: Alice, Fish: Carol, Hamster: Dan")
    assert bad.status == "fail"
    with pytest.raises(ValueError):
        registry.parse_params("assignments", {**data, "solution": {"Alice": "cat"}})
