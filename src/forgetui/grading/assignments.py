"""Grade a one-to-one assignment (a logic puzzle's "who has which pet") whatever the wording.

Models state the same answer in many shapes: "Alice has the cat", "Cat: Alice", "Alice -> cat",
"Alice owns a cat", "The cat belongs to Alice", a markdown table (one row per person, one column
per person, or a grid with check marks), a JSON object. Requiring one exact format would grade the
formatting, not the reasoning, so the grader reads statements instead:

1. Reasoning blocks (``<think>``) and lead-in chatter are removed.
2. The part of the response that holds the answer is chosen. A final-answer section ("Final
   answer:", "**Solution**", "## Answer", "The assignments are:") wins when it pairs anything.
   Otherwise the shortest run of closing paragraphs that states a value for every subject is
   used (a list at the end after the working-out), and the whole response as a last resort.
3. That part is cut into clauses (at line ends, ``. , ; ! ?`` and words such as "and", "but",
   "because"). A clause that names exactly one subject and one value pairs them; one subject
   with several values ("Alice: cat or dog", "Alice: cat, dog") names several values for it.
   A negation ("not", "doesn't", "neither", "rules out") drops the rest of its clause, and a
   parenthesis holding one is dropped ("Alice has the cat (not the dog)"). A hypothetical
   ("if", "suppose", "could", "maybe") drops the rest of its sentence up to a colon, and
   questions are skipped, so the working-out of a puzzle asserts nothing.
4. Per subject, the last statement decides: a hedge in the working-out that a later sentence
   settles is fine, but a final statement naming several values, or two definite statements
   that disagree ("Alice has the cat." ... "Alice has the dog."), name several values.
5. Every subject must have exactly one value: a subject left out, or named with several
   different values, fails, so a hedged answer ("Tomasz has the cat or the tortoise") or a list
   of every option never passes. Otherwise every value must be the solution's.

``details`` always carries the extracted mapping (``None`` for a subject left out, a list for a
subject named with several values), the expected mapping and which part of the response was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, model_validator

from forgetui.config import StrictModel

from .extract import strip_preamble, strip_reasoning
from .verdict import Verdict

__all__ = ["AssignmentsParams", "extract_assignments", "grade_assignments"]


class AssignmentsParams(StrictModel):
    """Parameters of the ``assignments`` grader.

    ``subjects`` are the things being assigned to (people), ``values`` what they get (pets),
    ``solution`` the right value per subject, ``synonyms`` other words for a value
    (``{"tortoise": ["turtle"]}``). Plurals ("cats") are recognised without synonyms.
    """

    subjects: list[str] = Field(min_length=1, description="Who gets something (e.g. the four people).")
    values: list[str] = Field(min_length=1, description="What they get (e.g. the four pets).")
    solution: dict[str, str] = Field(description="The right value for every subject.")
    synonyms: dict[str, list[str]] = Field(default_factory=dict, description="Other words for a value.")

    @model_validator(mode="after")
    def _consistent(self) -> AssignmentsParams:
        for label, items in (("subjects", self.subjects), ("values", self.values)):
            if any(not item.strip() for item in items):
                raise ValueError(f"{label} must not be empty strings")
            lowered = [item.strip().lower() for item in items]
            if len(set(lowered)) != len(lowered):
                raise ValueError(f"{label} must be unique")
        if set(self.solution) != set(self.subjects):
            missing = sorted(set(self.subjects) - set(self.solution))
            extra = sorted(set(self.solution) - set(self.subjects))
            raise ValueError(f"solution must give exactly one value per subject (missing {missing}, unknown {extra})")
        unknown = sorted({v for v in self.solution.values() if v not in self.values})
        if unknown:
            raise ValueError(f"solution uses values that are not in values: {unknown}")
        unknown = sorted(set(self.synonyms) - set(self.values))
        if unknown:
            raise ValueError(f"synonyms for unknown values: {unknown}")
        words = [w.strip().lower() for w in self.subjects + self.values]
        words += [s.strip().lower() for syns in self.synonyms.values() for s in syns]
        if len(set(words)) != len(words):
            raise ValueError("subjects, values and synonyms must all be different words")
        return self


# --------------------------------------------------------------------------- text shapes

# A hypothetical or hedged stretch ("If Alice has the cat, ...", "Bob could have the dog") is
# ignored up to the next colon or the sentence's end: "the only arrangement that could fit: Alice
# has the cat" still counts after the colon.
_HEDGE = re.compile(r"\b(?:if|suppose|supposing|assume|assuming|assumption|hypothetically|"
                    r"let's say|lets say|let us say|try|trying|whether|unless|otherwise|"
                    r"would|could|might|maybe|perhaps)\b[^:\n]*", re.IGNORECASE)
# Negation starts a skipped stretch that runs to the end of the clause.
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none|nobody|cannot|without|except|"
                       r"instead of|rather than|other than|excluding|eliminat\w*|rule[sd]? out|"
                       r"\w+n't|\w+n\u2019t)\b", re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n")
_CLAUSE_SPLIT = re.compile(r"[,;!]|\.(?=\s|$)|\s(?:and|but|while|whereas|because|since|so|hence|thus|"
                           r"therefore|then|plus|also|whilst|meaning)\s|\s&\s", re.IGNORECASE)
# "Final answer:", "**Solution**", "## Answer", "The assignments are:", "Here is the final
# assignment -", "In summary:". Only a few lead words are allowed, so "Let me find the
# solution:" (the start of the working-out) is not taken for the answer.
_MARKER = re.compile(
    r"^[^\w\n]*(?:(?:so|thus|therefore|hence|here's|here\u2019s|here is|here are|in|and|my|our)[,]?\s+)?"
    r"(?:the\s+)?(?:(?:final|complete|full|unique|correct|only)\s+)?"
    r"(?:answer|solution|assignments?|result|conclusion|summary|pairings?|mapping|matching|matches)"
    r"(?:\s+(?:is|are))?\s*(?:[:\-\u2013\u2014=]|\*\*|$)",
    re.IGNORECASE | re.MULTILINE,
)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_CHECK = re.compile(r"^(?:\u2713|\u2714|\u2705|\u2611|yes|y|true|o)$", re.IGNORECASE)


@dataclass
class Extracted:
    """What one part of a response says: per subject, its statements in order, each the list of
    values one statement names ("Alice has the cat" -> ["cat"]; "Alice: cat or dog" -> ["cat",
    "dog"])."""

    statements: dict[str, list[list[str]]] = field(default_factory=dict)

    def add(self, subject: str, values: list[str]) -> None:
        self.statements.setdefault(subject, []).append(list(dict.fromkeys(values)))

    def extend_last(self, subject: str, value: str) -> None:
        """A bare value after a statement ("Alice: cat, dog") joins that statement."""
        last = self.statements.setdefault(subject, [[]])[-1]
        if value not in last:
            last.append(value)

    def values_for(self, subject: str) -> list[str]:
        """The values the part commits to for ``subject``: one when it is definite.

        The last statement decides, so a hedge in the working-out ("Priya has the parrot or the
        tortoise") is settled by a later definite statement ("Priya keeps the parrot"). A final
        statement that names several values, or definite statements that disagree, give all
        the values named.
        """
        said = self.statements.get(subject, [])
        if not said:
            return []
        if len(said[-1]) > 1:
            return list(said[-1])
        definite = [vals[0] for vals in said if len(vals) == 1]
        return list(dict.fromkeys(definite))

    def complete(self, subjects: list[str]) -> bool:
        return all(self.values_for(s) for s in subjects)

    def empty(self) -> bool:
        return not any(self.statements.values())

    def mapping(self, subjects: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in subjects:
            vals = self.values_for(s)
            out[s] = None if not vals else vals[0] if len(vals) == 1 else vals
        return out


class _Lexicon:
    """Finds subject and value mentions (longest alias first, whole words, any case)."""

    def __init__(self, params: AssignmentsParams) -> None:
        aliases: list[tuple[str, str, str]] = []  # (alias, kind, canonical)
        for s in params.subjects:
            aliases.append((s, "s", s))
        for v in params.values:
            aliases.append((v, "v", v))
            for syn in params.synonyms.get(v, []):
                aliases.append((syn, "v", v))
        aliases.sort(key=lambda a: -len(a[0]))
        parts = []
        self._lookup: dict[str, tuple[str, str]] = {}
        for alias, kind, canonical in aliases:
            words = r"\s+".join(re.escape(w) for w in alias.split())
            # Plurals ("cats", "tortoises"); a possessive "Alice's" matches as "Alice".
            parts.append(rf"{words}(?:e?s)?")
            self._lookup[alias.lower()] = (kind, canonical)
        self._pattern = re.compile(r"(?<![\w-])(" + "|".join(parts) + r")(?![\w-])", re.IGNORECASE)
        self._aliases = sorted(self._lookup, key=len, reverse=True)

    def remove(self, text: str) -> str:
        """``text`` without its mentions."""
        return self._pattern.sub(" ", text)

    def mentions(self, text: str) -> list[tuple[int, str, str]]:
        """(offset, kind "s"/"v", canonical) for every mention, in order."""
        out = []
        for m in self._pattern.finditer(text):
            word = " ".join(m.group(1).lower().split())
            hit = self._lookup.get(word)
            if hit is None:
                for alias in self._aliases:
                    if word.startswith(alias) and word[len(alias):] in ("s", "es"):
                        hit = self._lookup[alias]
                        break
            if hit is not None:
                out.append((m.start(), hit[0], hit[1]))
        return out


_FILLER = re.compile(r"^(?:[\W_]|\b(?:the|a|an|or|either)\b)*$", re.IGNORECASE)


def _clause(lex: _Lexicon, text: str, found: Extracted, previous: str | None) -> str | None:
    """Read one clause; returns its subject when it paired exactly one (for a following bare
    value: "Alice: cat, dog" names two values for Alice)."""
    neg = _NEGATION.search(text)
    if neg:
        text = text[:neg.start()]
    mentions = lex.mentions(text)
    subjects = list(dict.fromkeys(c for _, k, c in mentions if k == "s"))
    values = list(dict.fromkeys(c for _, k, c in mentions if k == "v"))
    if previous and not subjects and len(mentions) == 1:
        rest = lex.remove(text)
        if _FILLER.match(rest):
            found.extend_last(previous, values[0])
            return previous
    if not subjects or not values:
        return None
    if len(subjects) == 1:
        found.add(subjects[0], values)  # one value pairs; several name several for it
    elif len(values) > 1:
        # "Alice cat Bob dog" with no separators: pair strictly alternating mentions.
        kinds = [k for _, k, _ in mentions]
        if len(mentions) % 2 == 0 and all(kinds[i] != kinds[i + 1] for i in range(len(kinds) - 1)):
            for i in range(0, len(mentions), 2):
                a, b = mentions[i], mentions[i + 1]
                subject, value = (a[2], b[2]) if a[1] == "s" else (b[2], a[2])
                found.add(subject, [value])
    # Several subjects and one value ("Alice or Bob has the cat"): says nothing definite.
    return subjects[0] if len(subjects) == 1 else None


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [c.strip().strip("*_`").strip() for c in body.split("|")]


def _table(lex: _Lexicon, rows: list[str], found: Extracted) -> None:
    """Markdown tables: a row per subject, a column per subject, or a grid of check marks."""
    subject_cols: dict[int, str] = {}
    value_cols: dict[int, str] = {}
    for line in rows:
        if _TABLE_RULE.match(line):
            continue
        cells = _cells(line)
        kinds = []
        for cell in cells:
            m = lex.mentions(cell)
            kinds.append({(k, c) for _, k, c in m})
        only_s = {i: next(iter(k))[1] for i, k in enumerate(kinds) if len(k) == 1 and next(iter(k))[0] == "s"}
        only_v = {i: next(iter(k))[1] for i, k in enumerate(kinds) if len(k) == 1 and next(iter(k))[0] == "v"}
        if len(only_s) >= 2 and not only_v:
            subject_cols = only_s  # header naming subjects: values follow in their columns
            continue
        if len(only_v) >= 2 and not only_s and not subject_cols:
            value_cols = only_v  # header naming values: a grid of check marks follows
            continue
        if subject_cols and len(only_s) == 0:
            for i, subject in subject_cols.items():
                if i < len(cells) and i in only_v:
                    found.add(subject, [only_v[i]])
            continue
        if value_cols and len(only_s) == 1 and not only_v:
            subject = next(iter(only_s.values()))
            for i, value in value_cols.items():
                if i < len(cells) and _CHECK.match(cells[i]):
                    found.add(subject, [value])
            continue
        # A row per subject: "| Alice | cat |" reads as the clause "Alice cat".
        _sentence(lex, " ".join(cells), found)


def _sentence(lex: _Lexicon, sentence: str, found: Extracted) -> None:
    stripped = sentence.strip()
    if not stripped or stripped.endswith("?"):
        return
    stripped = _HEDGE.sub(" , ", stripped)
    # A parenthesis that negates ("(not the dog)") is dropped; one that informs ("(cat)") stays.
    stripped = re.sub(r"\(([^()]*)\)",
                      lambda m: " , " if _NEGATION.search(m.group(1)) else f" {m.group(1)} ", stripped)
    previous: str | None = None
    for clause in _CLAUSE_SPLIT.split(stripped):
        if clause and clause.strip():
            previous = _clause(lex, clause, found, previous)


def _read(lex: _Lexicon, text: str) -> Extracted:
    found = Extracted()
    table: list[str] = []
    for line in text.splitlines() + [""]:
        if line.count("|") >= 2 or (table and line.strip().startswith("|")):
            table.append(line)
            continue
        if table:
            _table(lex, table, found)
            table = []
        for sentence in _SENTENCE_SPLIT.split(line):
            _sentence(lex, sentence, found)
    return found


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def extract_assignments(params: AssignmentsParams, text: str) -> tuple[Extracted, str]:
    """What the response assigns, and which part was read ("final-section", "last-N-paragraphs",
    "whole")."""
    lex = _Lexicon(params)
    body = strip_preamble(strip_reasoning(text))
    markers = list(_MARKER.finditer(body))
    if markers:
        section = _read(lex, body[markers[-1].start():])
        if not section.empty():
            return section, "final-section"
    paragraphs = _paragraphs(body)
    for k in range(1, len(paragraphs) + 1):
        part = _read(lex, "\n\n".join(paragraphs[-k:]))
        if part.complete(params.subjects):
            return part, ("whole" if k == len(paragraphs) else f"last-{k}-paragraphs")
    return _read(lex, body), "whole"


def grade_assignments(params: AssignmentsParams, text: str) -> Verdict:
    """Pass when every subject is given exactly one value and all of them are right."""
    found, method = extract_assignments(params, text)
    mapping = found.mapping(params.subjects)
    details: dict[str, Any] = {
        "extracted": mapping,
        "expected": dict(params.solution),
        "method": method,
    }
    missing = [s for s in params.subjects if mapping[s] is None]
    several = [s for s in params.subjects if isinstance(mapping[s], list)]
    if found.empty():
        return Verdict.failed("no assignments found in the response", details)
    if several:
        first = several[0]
        return Verdict.failed(
            f"several values named for {first}: {', '.join(mapping[first])}"
            + (f" (and for {', '.join(several[1:])})" if len(several) > 1 else ""), details)
    if missing:
        return Verdict.failed(f"no value stated for {', '.join(missing)}", details)
    wrong = [s for s in params.subjects if mapping[s] != params.solution[s]]
    if wrong:
        shown = "; ".join(f"{s}: {mapping[s]} (expected {params.solution[s]})" for s in wrong)
        return Verdict.failed(f"{len(wrong)} of {len(params.subjects)} wrong: {shown}", details)
    return Verdict.passed(f"all {len(params.subjects)} assignments correct", details)
