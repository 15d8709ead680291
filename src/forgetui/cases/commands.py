"""``forgetui cases list|show|verify``: browse the library and prove every case is right.

``verify`` grades each case's reference answer (it must pass; code runs in the real sandbox),
each listed wrong answer (each must fail: the tests have teeth), and re-derives answers with the
case's brute-force program where it has one. A case that cannot be verified is a problem.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, TextIO

from ..errors import ExitCode
from .loader import CaseLibrary, describe_case, library_dirs, load_library
from .schema import Case


def library_for_cli() -> CaseLibrary:
    from ..config import load_config
    from ..paths import locations

    return load_library(library_dirs(load_config(locations().config_file)))


def run_list(out: TextIO, category: str | None = None, hard: bool = False) -> int:
    lib = library_for_cli()
    rows = [c for c in lib.cases if (category is None or c.category == category) and (not hard or c.hard)]
    for case in rows:
        print(f"{case.id:<40} {case.category:<10} {'hard' if case.hard else 'easy':<5} "
              f"{case.grader_kind:<12} {','.join(case.sets)}", file=out)
    print(f"{len(rows)} case(s); revision {lib.revision}; sets: "
          + ", ".join(f"{k} {v}" for k, v in lib.sets().items()), file=out)
    for problem in lib.problems:
        print(f"problem: {problem}", file=out)
    return int(ExitCode.OK if not lib.problems else ExitCode.FAILURES)


def show_text(case: Case, max_message_chars: int | None = None) -> str:
    """One case as ``forgetui cases show`` prints it: header, messages, grader, reference.

    With ``max_message_chars`` a longer message keeps its start and end around a note (the TUI
    uses this for long-context prompts; the CLI prints everything)."""
    info = describe_case(case)
    parts = [f"{info['id']}  [{info['category']}, {'hard' if info['hard'] else 'easy'}]  {info['source']}",
             f"sets: {', '.join(info['sets'])}   tags: {', '.join(info['tags']) or '-'}   max_tokens: {info['max_tokens']}"]
    for message in info["messages"]:
        content = message["content"]
        if max_message_chars is not None and len(content) > max_message_chars:
            content = _clip_middle(content, max_message_chars, case.id)
        parts.append(f"\n--- {message['role']} ---\n{content}")
    parts.append("\n--- grader ---\n" + json.dumps(info["grader"], indent=2, ensure_ascii=False))
    if info["verify"]["reference"]:
        parts.append("\n--- reference answer ---\n" + info["verify"]["reference"])
    return "\n".join(parts)


def _clip_middle(text: str, limit: int, case_id: str) -> str:
    """The first two thirds and the last third of ``limit`` characters, cut at line ends."""
    head = text[: limit * 2 // 3]
    head = head[: head.rfind("\n")] if "\n" in head else head
    tail = text[len(text) - (limit - limit * 2 // 3):]
    tail = tail[tail.find("\n") + 1:] if "\n" in tail else tail
    left_out = len(text) - len(head) - len(tail)
    return (f"{head}\n\n[... {left_out:,} characters not shown; forgetui cases show {case_id} "
            f"prints them all ...]\n\n{tail}")


def run_show(out: TextIO, case_id: str) -> int:
    lib = library_for_cli()
    case = lib.by_id(case_id)
    if case is None:
        print(f"no case {case_id!r} (forgetui cases list)", file=out)
        return int(ExitCode.USAGE)
    print(show_text(case), file=out)
    return int(ExitCode.OK)


async def verify_case(case: Case, sandbox: Any) -> tuple[list[str], dict[str, int]]:
    """Problems found and counts (references, rederived, wrong_rejected) for one case."""
    from ..grading import registry

    problems: list[str] = []
    counts = {"references": 0, "rederived": 0, "wrong_rejected": 0}
    where = f"{case.source}:{case.line} {case.id}"
    spec_problems = getattr(case.params, "problems", None)
    if callable(spec_problems):
        problems += [f"{where}: {p}" for p in spec_problems()]
    if case.grader_kind == "judge":
        return problems, counts  # judged against a reference by a model: nothing to execute
    if case.grader_kind == "tool_calls":
        return problems + await _verify_tool_case(case, where, counts), counts
    if case.generated is not None:
        return problems + await _verify_generated(case, where, counts), counts
    if not case.verify.reference:
        problems.append(f"{where}: no verify.reference answer")
    else:
        verdict = await registry.grade(case.grader_kind, case.params, case.verify.reference, sandbox=sandbox)
        counts["references"] += 1
        if verdict.status != "pass":
            problems.append(f"{where}: the reference answer does not pass: {verdict.status}: {verdict.reason}")
    if not case.verify.wrong and case.category != "chat":
        problems.append(f"{where}: no verify.wrong answers (a case needs proof its checks have teeth)")
    caught: set[int] = set()  # constraint checks that some wrong answer violates
    for index, wrong in enumerate(case.verify.wrong):
        verdict = await registry.grade(case.grader_kind, case.params, wrong, sandbox=sandbox)
        if verdict.status == "fail":
            counts["wrong_rejected"] += 1
        else:
            problems.append(f"{where}: wrong answer #{index + 1} is not rejected ({verdict.status}: {verdict.reason})")
        for number, check in enumerate(verdict.details.get("checks") or []):
            if case.grader_kind == "constraints" and not check.get("ok", True):
                caught.add(number)
    if case.grader_kind == "constraints" and case.verify.wrong:
        untested = [n + 1 for n in range(len(case.params.checks)) if n not in caught]
        if untested:
            problems.append(f"{where}: no wrong answer violates constraint check(s) {untested}: "
                            "add a crafted violation for each, so every check is proven to have teeth")
    if case.verify.brute_force:
        derived = await _rederive(case, sandbox)
        counts["rederived"] += 1
        if derived is not None:
            problems.append(f"{where}: {derived}")
    return problems, counts


async def _verify_generated(case: Case, where: str, counts: dict[str, int]) -> list[str]:
    """Rebuild a long-context case from its seed; its answer must pass and near misses must fail."""
    from ..grading import registry
    from .longctx import GenerateSpec, check

    problems = [f"{where}: {p}" for p in check(GenerateSpec.model_validate(case.generate), case.generated)]
    counts["rederived"] += 1
    answer = case.generated.answer
    reference = case.verify.reference or f"I went through the whole text.\n\nFinal answer: {answer}"
    verdict = await registry.grade(case.grader_kind, case.params, reference)
    counts["references"] += 1
    if verdict.status != "pass":
        problems.append(f"{where}: the reference answer does not pass: {verdict.reason}")
    for wrong in case.verify.wrong or [f"Final answer: {answer + 1}", f"Final answer: {answer - 1}"]:
        verdict = await registry.grade(case.grader_kind, case.params, wrong)
        if verdict.status == "fail":
            counts["wrong_rejected"] += 1
        else:
            problems.append(f"{where}: wrong answer {wrong[-40:]!r} is not rejected")
    return problems


def as_tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """{name, arguments} as written in a case file -> the shape the client records."""
    return [{"index": i, "id": f"call_{i}", "type": "function", "name": c.get("name"),
             "arguments": json.dumps(c.get("arguments", {})), "arguments_parsed": c.get("arguments", {})}
            for i, c in enumerate(calls)]


async def _verify_tool_case(case: Case, where: str, counts: dict[str, int]) -> list[str]:
    """The reference calls pass, every wrong call list fails (schemas were checked at load)."""
    from ..grading import registry

    problems = []
    if case.verify.reference_calls is None:
        return [f"{where}: no verify.reference_calls (use [] for a no-call trap)"]
    verdict = await registry.grade(case.grader_kind, case.params, case.verify.reference or "",
                                   tool_calls=as_tool_calls(case.verify.reference_calls))
    counts["references"] += 1
    if verdict.status != "pass":
        problems.append(f"{where}: the reference calls do not pass: {verdict.reason}")
    if not case.verify.wrong_calls:
        problems.append(f"{where}: no verify.wrong_calls (a case needs proof its checks have teeth)")
    for index, wrong in enumerate(case.verify.wrong_calls):
        verdict = await registry.grade(case.grader_kind, case.params, "", tool_calls=as_tool_calls(wrong))
        if verdict.status == "fail":
            counts["wrong_rejected"] += 1
        else:
            problems.append(f"{where}: wrong calls #{index + 1} are not rejected ({verdict.reason})")
    # Multi-step: right calls, wrong final answers (e.g. computed from the model's own belief).
    for index, wrong in enumerate(case.verify.wrong):
        verdict = await registry.grade(case.grader_kind, case.params, wrong,
                                       tool_calls=as_tool_calls(case.verify.reference_calls))
        if verdict.status == "fail":
            counts["wrong_rejected"] += 1
        else:
            problems.append(f"{where}: wrong final answer #{index + 1} is not rejected ({verdict.reason})")
    return problems


async def _rederive(case: Case, sandbox: Any) -> str | None:
    """Run the brute-force program in the sandbox; None when it agrees with the case's answer."""
    result = await sandbox.run("python", case.verify.brute_force or "")
    if result.status != "ok":
        return f"brute_force program failed: {result.reason}"
    printed = result.stdout.strip()
    params = case.params
    if hasattr(params, "solution"):
        try:
            return None if json.loads(printed) == params.solution else f"brute force found {printed}, case says {params.solution}"
        except json.JSONDecodeError:
            return f"brute_force printed no JSON: {printed[:80]!r}"
    if hasattr(params, "answer"):
        try:
            value = float(printed.splitlines()[-1])
        except (ValueError, IndexError):
            return f"brute_force printed no number: {printed[:80]!r}"
        return None if abs(value - float(params.answer)) <= getattr(params, "tolerance", 0) else \
            f"brute force found {printed}, case says {params.answer}"
    if hasattr(params, "expected"):
        return None if printed == str(params.expected) else f"brute force found {printed!r}, case says {params.expected!r}"
    return "brute_force given but this grader has no answer to compare with"


def run_verify(out: TextIO, only: list[str] | None = None) -> int:
    """Verify the library; non-zero exit on any problem."""
    from ..sandbox import Sandbox

    lib = library_for_cli()
    cases = lib.select(only) if only else lib.cases
    sandbox = Sandbox()
    check = sandbox.check()
    problems = list(lib.problems)
    if not check.ok:
        problems.append("sandbox unusable, code cases cannot be verified: " + "; ".join(check.problems))
    totals = {"references": 0, "rederived": 0, "wrong_rejected": 0}
    # Files that did not load are problems of cases that are not in the list: count them too.
    with_problems = len(lib.problems)

    async def all_cases() -> None:
        nonlocal with_problems
        for case in cases:
            found, counts = await verify_case(case, sandbox if check.ok else None)
            problems.extend(found)
            with_problems += bool(found)
            for key, value in counts.items():
                totals[key] += value

    asyncio.run(all_cases())
    for problem in problems:
        print(f"problem: {problem}", file=out)
    print(f"{len(cases)} cases checked, {with_problems} with problems ({totals['references']} reference "
          f"solutions executed, {totals['rederived']} answers re-derived, {totals['wrong_rejected']} wrong "
          f"solutions rejected)", file=out)
    return int(ExitCode.OK if not problems else ExitCode.FAILURES)
