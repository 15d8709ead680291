"""Long-context cases generated deterministically from a seed (12k-24k tokens).

A case file holds only the recipe (``[case.generate]``: kind, seed, size); the loader builds the
haystack, hides the needles at recorded depths, writes the question, and fills in the grader's
expected answer, so the library stays small and reviewable while the prompt is long. The same
seed always gives the same prompt (Python's ``random.Random`` is stable across versions for
``randrange``/``choice`` on the same inputs), and ``forgetui cases verify`` rebuilds every case
and checks that each needle occurs exactly once, at its recorded depth.

Kinds:

* ``needle``: one fact ("The vault code of the Orrin archive is 48213.") in a long record of
  unrelated town entries; the question asks for it.
* ``multi_key``: several similar facts (locker numbers of named people); the question needs
  three of them combined (their sum), so finding one is not enough.
* ``count``: a long service log; the question asks how many ERROR lines one service wrote, so
  every line matters, not just one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_PLACES = ["Orrin", "Vellmar", "Tasko", "Brinley", "Quarrow", "Essel", "Marrowgate", "Lunde", "Hathley", "Corva"]
_THINGS = ["bakery", "ferry office", "library", "boatyard", "school", "market hall", "weather station",
           "post office", "mill", "clinic", "choir", "museum"]
_EVENTS = ["repainted its front", "changed its opening hours", "hired two apprentices", "held an open day",
           "replaced its roof tiles", "published a short newsletter", "moved its entrance to the side street",
           "hosted a visiting orchestra", "ordered new shelving", "planted lime trees by the door",
           "started a Sunday reading circle", "repaired the clock on its tower"]
_NAMES = ["Adaeze", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiroshi", "Ines", "Jonah",
          "Kalani", "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin"]
_SERVICES = ["auth", "billing", "search", "mailer", "gateway", "scheduler"]
_LEVELS = ["INFO"] * 14 + ["WARN"] * 3 + ["ERROR"] * 2 + ["DEBUG"] * 4


class GenerateSpec(BaseModel):
    """The recipe of a generated case (``[case.generate]``)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["needle", "multi_key", "count"]
    seed: int = Field(description="Same seed, same prompt.")
    tokens: int = Field(ge=1000, le=200_000, description="Approximate prompt length in tokens (4 characters each).")
    depth: float = Field(default=0.5, ge=0.0, le=1.0, description="needle: where the fact sits (0 start, 1 end).")


@dataclass
class Generated:
    prompt: str
    answer: int
    needles: list[tuple[str, float]] = field(default_factory=list)  # (exact sentence, depth 0..1)


def _filler(rng: random.Random, day: int) -> str:
    return (f"Day {day}: the {rng.choice(_THINGS)} in {rng.choice(_PLACES)} {rng.choice(_EVENTS)}, "
            f"and the {rng.choice(_THINGS)} in {rng.choice(_PLACES)} {rng.choice(_EVENTS)}.")


def _haystack(rng: random.Random, chars: int) -> list[str]:
    lines, total, day = [], 0, 1
    while total < chars:
        line = _filler(rng, day)
        lines.append(line)
        total += len(line) + 1
        day += 1
    return lines


def _insert(lines: list[str], sentence: str, depth: float) -> float:
    index = min(len(lines), max(0, round(depth * len(lines))))
    lines.insert(index, sentence)
    return index / max(1, len(lines) - 1)


def generate(spec: GenerateSpec) -> Generated:
    """Build the prompt, the answer and the needles' positions from the recipe."""
    rng = random.Random(spec.seed)
    chars = spec.tokens * 4
    if spec.kind == "needle":
        lines = _haystack(rng, chars)
        place = rng.choice(_PLACES)
        code = rng.randrange(10_000, 100_000)
        sentence = f"Note for the record: the vault code of the {place} archive is {code}."
        depth = _insert(lines, sentence, spec.depth)
        question = (f"What is the vault code of the {place} archive, according to the record above? "
                    "End with 'Final answer: <code>'.")
        return Generated("\n".join(["Town record:", *lines, "", question]), code, [(sentence, depth)])
    if spec.kind == "multi_key":
        lines = _haystack(rng, chars)
        people = rng.sample(_NAMES, 8)
        lockers = {name: rng.randrange(100, 1000) for name in people}
        needles = []
        for name in people:
            sentence = f"Note for the record: locker number {lockers[name]} was assigned to {name}."
            needles.append((sentence, _insert(lines, sentence, rng.random())))
        asked = rng.sample(people, 3)
        question = (f"Add up the locker numbers assigned to {asked[0]}, {asked[1]} and {asked[2]} in the record "
                    "above. End with 'Final answer: <sum>'.")
        needles = [(s, _depth_of(lines, s)) for s, _ in needles]
        return Generated("\n".join(["Town record:", *lines, "", question]), sum(lockers[n] for n in asked), needles)
    lines, total, second = [], 0, 0
    target = rng.choice(_SERVICES)
    count = 0
    while total < chars:
        service, level = rng.choice(_SERVICES), rng.choice(_LEVELS)
        second += rng.randrange(1, 30)
        line = (f"2027-02-11T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d} "
                f"{level:<5} [{service}] request {rng.randrange(10**6):06d} handled in {rng.randrange(2, 900)} ms")
        count += service == target and level == "ERROR"
        lines.append(line)
        total += len(line) + 1
    question = (f"How many ERROR lines did the [{target}] service write in the log above? Count carefully; "
                "WARN and other services do not count. End with 'Final answer: <count>'.")
    return Generated("\n".join(["Service log:", *lines, "", question]), count, [])


def _depth_of(lines: list[str], sentence: str) -> float:
    return lines.index(sentence) / max(1, len(lines) - 1)


def check(spec: GenerateSpec, recorded: Generated) -> list[str]:
    """Rebuild from the seed and check it matches, with every needle exactly once where recorded."""
    rebuilt = generate(spec)
    problems = []
    if rebuilt.prompt != recorded.prompt or rebuilt.answer != recorded.answer:
        problems.append("rebuilding from the seed gives a different prompt or answer")
    lines = rebuilt.prompt.splitlines()[1:-2]
    for sentence, depth in recorded.needles:
        found = rebuilt.prompt.count(sentence)
        if found != 1:
            problems.append(f"needle found {found} times: {sentence!r}")
        elif abs(_depth_of(lines, sentence) - depth) > 1e-9:
            problems.append(f"needle at depth {_depth_of(lines, sentence):.3f}, recorded {depth:.3f}")
    approx = len(rebuilt.prompt) // 4
    if not 0.9 * spec.tokens <= approx <= 1.1 * spec.tokens:
        problems.append(f"about {approx} tokens, recipe says {spec.tokens}")
    return problems


def apply_to(case_data: dict[str, Any]) -> Generated:
    """Fill a case's prompt and numeric answer from its recipe (the loader calls this)."""
    spec = GenerateSpec.model_validate(case_data["generate"])
    made = generate(spec)
    case_data["prompt"] = made.prompt
    grader = dict(case_data.get("grader") or {})
    grader.setdefault("kind", "numeric")
    grader["answer"] = made.answer
    case_data["grader"] = grader
    return made
