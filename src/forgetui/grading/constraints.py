"""IFEval-style instruction checks: word counts, bullets, banned words, JSON-only, ...

A constraints case passes only when every check passes (IFEval's "prompt-level strict"); the
details list each check with ``ok`` and ``why`` so the report can show the instruction-level rate
too. Checks read the response after reasoning and lead-in chatter are stripped (reasoning breaks
no-comma and length checks otherwise: eval-anchors §5); ``strict = true`` keeps the lead-in, for
cases where "start with X" must mean the very first line. An empty answer fails every case: no
vacuous pass on "all lowercase" or "at most 50 words".

How things are counted (documented because IFEval's own counters are a known source of wrong
grades):

* words: whitespace-separated tokens holding at least one letter or digit ("don't" is one word;
  a lone "-" or "—" is none);
* sentences: runs ending in ``.``, ``!``, ``?`` or ``…`` followed by a space or the end, or a
  line break (a bullet without a full stop is a sentence); decimals ("3.5") and common
  abbreviations ("e.g.", "Dr.") do not end one;
* paragraphs: blocks separated by blank lines (or a ``***`` line, as in IFEval);
* bullets: lines starting with ``-``, ``*``, ``•`` or ``1.``/``1)`` followed by a space.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from forgetui.config import StrictModel

from .answers import json_only as parse_json_only
from .extract import strip_preamble, strip_reasoning
from .verdict import Verdict

__all__ = ["Check", "ConstraintsParams", "grade_constraints"]


class _Range(StrictModel):
    """A count that must be exactly ``exact``, or within ``min``..``max``."""

    exact: int | None = Field(default=None, ge=0, description="The count must be exactly this.")
    min: int | None = Field(default=None, ge=0, description="The count must be at least this.")
    max: int | None = Field(default=None, ge=0, description="The count must be at most this.")

    @model_validator(mode="after")
    def _bounds(self) -> _Range:
        if self.exact is None and self.min is None and self.max is None:
            raise ValueError("give exact, min or max")
        if self.exact is not None and (self.min is not None or self.max is not None):
            raise ValueError("give either exact or min/max, not both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def judge(self, name: str, n: int) -> str | None:
        """None when ``n`` fits, else why not ("word_count 212 > 150")."""
        if self.exact is not None and n != self.exact:
            return f"{name} {n} != {self.exact}"
        if self.min is not None and n < self.min:
            return f"{name} {n} < {self.min}"
        if self.max is not None and n > self.max:
            return f"{name} {n} > {self.max}"
        return None


class WordCount(_Range):
    """Number of words."""

    kind: Literal["word_count"] = Field(description="Count words.")


class SentenceCount(_Range):
    """Number of sentences."""

    kind: Literal["sentence_count"] = Field(description="Count sentences.")


class ParagraphCount(_Range):
    """Number of paragraphs (blank-line separated)."""

    kind: Literal["paragraph_count"] = Field(description="Count paragraphs.")


class BulletCount(_Range):
    """Number of bullet or numbered-list lines."""

    kind: Literal["bullet_count"] = Field(description="Count list items.")


class _Words(StrictModel):
    words: list[str] = Field(min_length=1, description="Words or phrases (whole words, case-insensitive).")


class RequiredWords(_Words):
    """Every word must appear."""

    kind: Literal["required_words"] = Field(description="All words must be present.")


class BannedWords(_Words):
    """No word may appear."""

    kind: Literal["banned_words"] = Field(description="None of the words may be present.")


class _Affix(StrictModel):
    value: str = Field(min_length=1, description="The text, compared ignoring markdown emphasis and spacing.")
    case_sensitive: bool = Field(default=False, description="Compare letter case too.")


class StartsWith(_Affix):
    """The answer starts with ``value``."""

    kind: Literal["starts_with"] = Field(description="The answer's first words.")


class EndsWith(_Affix):
    """The answer ends with ``value`` (punctuation included)."""

    kind: Literal["ends_with"] = Field(description="The answer's last words.")


class AllLowercase(StrictModel):
    """No uppercase letter (and at least one letter)."""

    kind: Literal["all_lowercase"] = Field(description="Everything in lowercase.")


class AllUppercase(StrictModel):
    """No lowercase letter (and at least one letter)."""

    kind: Literal["all_uppercase"] = Field(description="Everything in capitals.")


class NoCommas(StrictModel):
    """No comma at all (ASCII or full-width)."""

    kind: Literal["no_commas"] = Field(description="No commas.")


class JsonOnly(StrictModel):
    """The whole answer is one JSON value (a code fence around it is allowed)."""

    kind: Literal["json_only"] = Field(description="Nothing but JSON.")


class HasTitle(StrictModel):
    """A title in double angle brackets, e.g. ``<<Harbour Notes>>``."""

    kind: Literal["has_title"] = Field(description="A <<title>> is present.")


class Language(StrictModel):
    """English or not, by a deterministic heuristic (no language detector, so no flaky verdicts).

    "english" means at least 90% of the letters are ASCII and, in texts of 12 words or more, at
    least 10% of the words are common English function words ("the", "and", "of", ...). The limit:
    it tells English from other-script text and from most Latin-script languages with diacritics
    or without English function words, but short texts are judged on letters alone, and English
    text that quotes a lot of foreign words, or foreign text full of English loanwords, can be
    misread. Use it for "answer in English / answer in Japanese", not for French vs Spanish.
    """

    kind: Literal["language"] = Field(description="The answer's language.")
    value: Literal["english", "non-english"] = Field(description="english or non-english.")


class MaxChars(StrictModel):
    """At most ``max`` characters."""

    kind: Literal["max_chars"] = Field(description="Length limit in characters.")
    max: int = Field(ge=0, description="The most characters allowed.")


class Regex(StrictModel):
    """A regular expression must match somewhere (``re.search``, multiline)."""

    kind: Literal["regex"] = Field(description="A pattern that must match.")
    pattern: str = Field(min_length=1, description="Python regular expression; ^ and $ match at line ends.")
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")
    label: str = Field(default="", description="What the pattern checks, shown in reasons instead of the pattern.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regex: {exc}") from None
        return value


#: One check; TOML picks the type with ``kind = "word_count"`` etc.
Check = Annotated[
    WordCount | SentenceCount | ParagraphCount | BulletCount | RequiredWords | BannedWords | StartsWith
    | EndsWith | AllLowercase | AllUppercase | NoCommas | JsonOnly | HasTitle | Language | MaxChars | Regex,
    Field(discriminator="kind"),
]


class ConstraintsParams(StrictModel):
    """Instructions the answer must follow, all of them."""

    checks: list[Check] = Field(min_length=1, description="The checks; the case passes when all pass.")
    strict: bool = Field(default=False, description="Keep lead-in chatter ('Sure! Here it is:') as part of the answer.")


# --------------------------------------------------------------------------- counters

def words(text: str) -> list[str]:
    """Whitespace tokens with at least one letter or digit."""
    return [w for w in text.split() if any(c.isalnum() for c in w)]


_ABBREV = re.compile(r"\b(?:mr|mrs|ms|dr|prof|st|jr|sr|vs|etc|e\.g|i\.e|a\.m|p\.m|u\.s|fig|approx)\.",
                     re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?:[.!?\u2026]+[\"')\]\u201d\u2019*_]*(?=\s|$))|\n")


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring for the rule)."""
    protected = _ABBREV.sub(lambda m: m.group(0).replace(".", "\0"), text)
    protected = re.sub(r"(?<=\d)\.(?=\d)", "\0", protected)
    parts = _SENTENCE_END.split(protected)
    return [p.replace("\0", ".").strip() for p in parts if any(c.isalnum() for c in p)]


def paragraphs(text: str) -> list[str]:
    """Blocks separated by blank lines or ``***`` lines."""
    return [p for p in re.split(r"\n\s*\n|^\s*\*\*\*+\s*$", text, flags=re.MULTILINE) if p.strip()]


_BULLET = re.compile(r"^[ \t]*(?:[-*\u2022]|\d{1,3}[.)])[ \t]+\S", re.MULTILINE)


def _word_hits(items: list[str], text: str) -> list[str]:
    return [w for w in items
            if re.search(r"(?<!\w)" + r"\s+".join(map(re.escape, w.split())) + r"(?!\w)", text, re.IGNORECASE)]


def _plain(text: str, case_sensitive: bool) -> str:
    s = text.replace("`", "")
    s = re.sub(r"(?<!\w)[*_]+|[*_]+(?!\w)", "", s)
    s = re.sub(r"^\s*#+\s*", "", s)  # a heading's hashes are markup, not the first word
    s = " ".join(s.split())
    return s if case_sensitive else s.casefold()


_EN_WORDS = frozenset((
    "the", "and", "of", "to", "is", "in", "it", "that", "for", "with", "are", "was", "be", "this", "as", "you",
    "not", "or", "have", "has", "by", "at", "from", "they", "we", "he", "she", "his", "her", "their", "will",
    "would", "can", "there", "which", "what", "an", "but", "if", "my", "your", "our", "do", "does", "did",
    "been", "were",
))


def _language(text: str) -> tuple[str, str]:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "unknown", "no letters"
    ascii_share = sum(c.isascii() for c in letters) / len(letters)
    tokens = [w.strip(".,;:!?\"'()*_").casefold() for w in words(text)]
    en_share = sum(t in _EN_WORDS for t in tokens) / len(tokens) if tokens else 0.0
    english = ascii_share >= 0.9 and (len(tokens) < 12 or en_share >= 0.1)
    evidence = f"ASCII letters {ascii_share:.0%}, English function words {en_share:.0%}"
    return ("english" if english else "non-english"), evidence


def _first_word(text: str, pred: Any) -> str:
    return next((w for w in text.split() if pred(w)), "")[:30]


def run_check(check: Any, text: str) -> str | None:
    """None when ``check`` holds for ``text``, else a short reason."""
    kind = check.kind
    if kind == "word_count":
        return check.judge("word_count", len(words(text)))
    if kind == "sentence_count":
        return check.judge("sentence_count", len(sentences(text)))
    if kind == "paragraph_count":
        return check.judge("paragraph_count", len(paragraphs(text)))
    if kind == "bullet_count":
        return check.judge("bullet_count", len(_BULLET.findall(text)))
    if kind == "required_words":
        missing = [w for w in check.words if w not in _word_hits(check.words, text)]
        return f"missing word{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}" if missing else None
    if kind == "banned_words":
        hits = _word_hits(check.words, text)
        return f"banned word{'s' if len(hits) > 1 else ''} {', '.join(map(repr, hits))}" if hits else None
    if kind in ("starts_with", "ends_with"):
        body, want = _plain(text, check.case_sensitive), _plain(check.value, check.case_sensitive)
        if kind == "starts_with":
            ok = body.startswith(want) and not (want[-1:].isalnum() and body[len(want):len(want) + 1].isalnum())
            return None if ok else f"does not start with {check.value!r} (starts {text.strip()[:len(want) + 15]!r})"
        ok = body.endswith(want) and not (want[:1].isalnum() and body[-len(want) - 1:-len(want)].isalnum())
        return None if ok else f"does not end with {check.value!r} (ends {text.strip()[-len(want) - 15:]!r})"
    if kind in ("all_lowercase", "all_uppercase"):
        if not any(c.isalpha() for c in text):
            return "no letters"
        wrong = str.isupper if kind == "all_lowercase" else str.islower
        bad = _first_word(text, lambda w: any(wrong(c) for c in w))
        return f"not {kind.replace('_', ' ')} ({bad!r})" if bad else None
    if kind == "no_commas":
        n = text.count(",") + text.count("\uff0c")
        return f"{n} comma{'s' if n > 1 else ''}" if n else None
    if kind == "json_only":
        try:
            parse_json_only(text)
        except ValueError as exc:
            return str(exc)
        return None
    if kind == "has_title":
        return None if re.search(r"<<[^<>\n]*\w[^<>\n]*>>", text) else "no <<title>>"
    if kind == "language":
        found, evidence = _language(text)
        return None if found == check.value else f"language looks {found}, not {check.value} ({evidence})"
    if kind == "max_chars":
        return f"{len(text)} chars > {check.max}" if len(text) > check.max else None
    if kind == "regex":
        flags = re.MULTILINE | (re.IGNORECASE if check.ignore_case else 0)
        if re.search(check.pattern, text, flags):
            return None
        shown = check.pattern if len(check.pattern) <= 40 else check.pattern[:39] + "…"
        return f"{check.label}: no match" if check.label else f"regex /{shown}/ did not match"
    raise ValueError(f"unknown check kind {kind!r}")


def grade_constraints(p: ConstraintsParams, text: str) -> Verdict:
    """Pass when every check holds; the reason names the failed ones."""
    body = strip_reasoning(text).strip()
    if not p.strict:
        body = strip_preamble(body).strip()
    expected = [c.model_dump(exclude_none=True) for c in p.checks]
    if not body:
        return Verdict.failed("empty answer", {"expected": expected, "extracted": body, "checks": []})
    results = []
    for check, spec in zip(p.checks, expected):
        why = run_check(check, body)
        results.append({**spec, "ok": why is None, "why": why or "ok"})
    failed = [r["why"] for r in results if not r["ok"]]
    details = {"expected": expected, "extracted": body, "checks": results,
               "met": len(results) - len(failed), "total": len(results)}
    if not failed:
        return Verdict.passed(f"all {len(results)} constraints met", details)
    return Verdict.failed(f"{len(failed)} of {len(results)} constraints failed: {'; '.join(failed)}", details)
