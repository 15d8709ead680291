"""Long-context generation: deterministic, the right size, needles exactly once where recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from forgetui.cases.loader import load_library
from forgetui.cases.longctx import GenerateSpec, check, generate


@pytest.mark.parametrize("kind", ["needle", "multi_key", "count"])
def test_same_seed_same_prompt_and_size(kind: str) -> None:
    spec = GenerateSpec(kind=kind, seed=7, tokens=12000)
    a, b = generate(spec), generate(spec)
    assert a.prompt == b.prompt and a.answer == b.answer
    assert 0.9 * 12000 <= len(a.prompt) / 4 <= 1.1 * 12000
    assert check(spec, a) == []
    assert generate(GenerateSpec(kind=kind, seed=8, tokens=12000)).prompt != a.prompt


def test_needle_depth_and_answer() -> None:
    made = generate(GenerateSpec(kind="needle", seed=1, tokens=12000, depth=0.25))
    (sentence, depth), = made.needles
    assert str(made.answer) in sentence and made.prompt.count(sentence) == 1
    assert abs(depth - 0.25) < 0.01


def test_multi_key_needs_three_facts_and_count_matches_the_log() -> None:
    made = generate(GenerateSpec(kind="multi_key", seed=3, tokens=12000))
    assert len(made.needles) == 8
    counted = generate(GenerateSpec(kind="count", seed=3, tokens=12000))
    service = counted.prompt.rsplit("[", 1)[1].split("]", 1)[0]
    lines = counted.prompt.splitlines()[1:-2]  # the log, without the header and the question
    assert counted.answer == sum(1 for ln in lines if " ERROR " in ln and f"[{service}]" in ln)


def test_a_tampered_record_is_caught() -> None:
    spec = GenerateSpec(kind="needle", seed=2, tokens=12000)
    made = generate(spec)
    made.answer += 1
    assert check(spec, made)


def test_loader_fills_prompt_and_answer_and_refuses_both(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        '[[case]]\nid = "g.one"\ncategory = "longctx"\ngenerate = { kind = "needle", seed = 5, tokens = 12000 }\n'
        '[case.grader]\nkind = "numeric"\n\n'
        '[[case]]\nid = "g.two"\ncategory = "longctx"\nprompt = "x"\n'
        'generate = { kind = "needle", seed = 5, tokens = 12000 }\n[case.grader]\nkind = "numeric"\nanswer = 1\n')
    lib = load_library([tmp_path])
    case = lib.by_id("g.one")
    assert case is not None and case.params.answer == generate(GenerateSpec(kind="needle", seed=5, tokens=12000)).answer
    assert len(case.prompt) > 40000
    assert any("g.two" in p and "not both" in p for p in lib.problems)
