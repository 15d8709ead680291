"""The shipped case library: loads cleanly, ids unique, the sets the issues promise exist.
(`forgetui cases verify`, run by `make test`, proves each case right.)"""

from __future__ import annotations

from forgetui.cases.loader import builtin_cases_dir, load_library


def test_builtin_library_loads_without_problems() -> None:
    lib = load_library([builtin_cases_dir()])
    assert lib.problems == []
    assert len({c.id for c in lib.cases}) == len(lib.cases)
    assert lib.revision == load_library([builtin_cases_dir()]).revision


def test_quick_and_standard_sets() -> None:
    lib = load_library([builtin_cases_dir()])
    quick = lib.select(["quick"])
    assert len(quick) == 9
    assert sum("ability" in c.tags for c in quick) == 5 and sum("agent" in c.tags for c in quick) == 4
    standard = lib.select(["standard"])
    assert len(standard) >= 60 and sum(c.hard for c in standard) >= 40
    categories = {c.category for c in standard}
    assert {"coding", "math", "reasoning", "tooluse", "injection", "longctx", "instruct", "chat"} <= categories
    assert len(lib.select(["standard", "-chat"])) == len(standard) - len(lib.select(["chat"]))


def test_every_non_judged_case_carries_its_proof() -> None:
    lib = load_library([builtin_cases_dir()])
    for case in lib.cases:
        if case.grader_kind in ("judge",) or case.generated is not None:
            continue
        if case.grader_kind == "tool_calls":
            assert case.verify.reference_calls is not None and case.verify.wrong_calls, case.id
        else:
            assert case.verify.reference and case.verify.wrong, case.id
