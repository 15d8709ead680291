"""Pure answer graders: numbers, exact strings, substrings, forbidden words and JSON objects.

Every grader judges the *content*: reasoning blocks and lead-in chatter ("Sure! Here is the
answer:") are stripped first, and every verdict keeps what was extracted (``details["extracted"]``)
next to what was expected (``details["expected"]``), so a reviewer can tell an extraction miss
from a wrong answer (research notes: eval-anchors §0.2 and §10, crucibleforge §5).

Decisions worth knowing when writing cases:

* numeric compares *values*, not spelling: "3.0", "3" and "6/2" all equal the answer 3 (the
  format belongs to ``exact`` or ``constraints``). Integer answers compare exactly unless a
  tolerance is given; non-integer answers with tolerance 0 allow a 1e-9 relative slack so that
  "1/3" equals 0.3333333333333333. "42%" equals 42 and also 0.42.
* JSON type checks are strict where numeric is lenient: ``true`` is not an integer, ``3.0`` is
  not an integer and ``"true"`` is not a boolean, because a program reading the object would
  break on exactly those.
* contains/forbid match whole tokens: "4" is not found in "42", "cat" not in "concatenate".
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

from pydantic import Field, field_validator

from forgetui.config import StrictModel

from .extract import fenced_blocks, final_answer, strip_preamble, strip_reasoning
from .verdict import Verdict

__all__ = [
    "JSON_TYPES", "AnyOfParams", "ContainsParams", "ExactParams", "ForbidParams", "JsonParams",
    "NumericParams", "find_json", "grade_any_of", "grade_contains", "grade_exact", "grade_forbid",
    "grade_json", "grade_numeric", "json_only", "normalize", "visible_text",
]


def visible_text(text: str) -> str:
    """The response without reasoning blocks and lead-in chatter lines."""
    return strip_preamble(strip_reasoning(text)).strip()


_QUOTES = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb\u201e"


def normalize(text: str) -> str:
    """Casefold, drop markdown emphasis/backticks and surrounding quotes, collapse whitespace,
    drop trailing punctuation ("**Paris.**" -> "paris"). ``snake_case`` and "2*3" keep their marks:
    only ``*``/``_`` at the edge of a word are emphasis."""
    s = text.replace("`", "").replace("~~", "")
    s = re.sub(r"(?<!\w)[*_]+|[*_]+(?!\w)", " ", s)
    s = " ".join(s.casefold().split())
    s = re.sub(r"\s+([,;:!?.])", r"\1", s)  # "Alice , Bob" -> "Alice, Bob"
    prev = None
    while prev != s:  # "'Paris.'" needs quotes and punctuation stripped in turns
        prev = s
        s = s.strip().strip(_QUOTES).rstrip(".!?,;:").strip()
    return s


def _answer_scope(text: str) -> tuple[str, str]:
    """The stated final answer, else the whole visible text; plus which one it was."""
    answer = final_answer(text)
    if answer is not None:
        return answer, "final answer"
    return visible_text(text), "whole response"


def _contains(needle: str, hay: str, fold: bool) -> bool:
    """Whether ``needle`` occurs in ``hay`` as whole tokens (word edges respected)."""
    if not needle:
        return False
    left = r"(?<!\w)" if re.match(r"\w", needle) else ""
    right = r"(?!\w)" if re.search(r"\w$", needle) else ""
    return re.search(left + re.escape(needle) + right, hay, re.IGNORECASE if fold else 0) is not None


def _short(value: str, limit: int = 60) -> str:
    value = " ".join(value.split())
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


# --------------------------------------------------------------------------- numeric

class NumericParams(StrictModel):
    """A numeric answer: the number in the final answer, else the last number in the response."""

    answer: int | float = Field(description="The correct value, e.g. 42 or 0.375.")
    tolerance: float = Field(default=0, ge=0, description="Allowed absolute difference (relative with `relative`).")
    relative: bool = Field(default=False, description="Treat `tolerance` as a fraction of the answer (0.01 = 1%).")

    @field_validator("answer", mode="before")
    @classmethod
    def _real_number(cls, value: Any) -> Any:
        # pydantic would read `true` as 1 and accept NaN, neither of which can be an answer.
        if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError("must be a finite number")
        return value


_NUMBER = re.compile(
    r"(?P<sign>(?<![\w)\]])[-\u2212+])?(?P<cur>[$\u20ac\u00a3\u00a5]\s?)?(?<![\w.])"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?!\d)|\d+)?"
    r"(?:\.(?P<dec>\d+))?(?<=\d)(?:[eE](?P<exp>[-+]?\d{1,3})(?!\d))?"
    r"(?:/(?P<den>\d+)(?![\d/]))?(?P<pct>\s?%)?"
)
# Spellings turned into plain numbers first: \frac{3}{4} -> 3/4, 1{,}234 -> 1,234,
# "3.5 × 10^2" / "3.5 \times 10^{2}" -> 3.5e2.
_LATEX = ((re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}"), r"\1/\2"),
          (re.compile(r"(\d)\s*(?:[×x*·]|\\times|\\cdot)\s*10\s*\^\s*\{?\s*([-+\u2212]?\d{1,3})\s*\}?"),
           lambda m: f"{m.group(1)}e{m.group(2).replace(chr(0x2212), '-')}"),
          (re.compile(r"\\[,!;: ]|\{,\}"), lambda m: "," if m.group(0) == "{,}" else ""),
          (re.compile(r"\\([%$])"), r"\1"))


def _numbers(text: str) -> list[tuple[str, Fraction, bool]]:
    """Every number in ``text``: (as written, exact value, written as a percentage)."""
    for pattern, repl in _LATEX:
        text = pattern.sub(repl, text)
    out = []
    for m in _NUMBER.finditer(text):
        if not (m["int"] or m["dec"]):
            continue
        value = Fraction(int(re.sub(r"\D", "", m["int"] or "0")))
        if m["dec"]:
            value += Fraction(int(m["dec"]), 10 ** len(m["dec"]))
        if m["exp"]:
            value *= Fraction(10) ** int(m["exp"])
        if m["den"] and not (m["dec"] or m["exp"]):
            if int(m["den"]) == 0:
                continue
            value /= int(m["den"])
        if m["sign"] in ("-", "\u2212"):
            value = -value
        out.append((m.group(0).strip(), value, bool(m["pct"])))
    return out


def _fmt(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.12g}"


def _expected_numeric(p: NumericParams) -> str:
    if not p.tolerance:
        return str(p.answer)
    return f"{p.answer} ± {p.tolerance * 100:g}%" if p.relative else f"{p.answer} ± {p.tolerance:g}"


def grade_numeric(p: NumericParams, text: str) -> Verdict:
    """Pass when the answer's number equals ``p.answer`` (within the tolerance)."""
    answer = final_answer(text)
    details: dict[str, Any] = {"expected": _expected_numeric(p), "answer_text": answer}
    if answer is not None:
        # "42 (6 x 7)": an aside in parentheses is explanation, not the answer.
        found = _numbers(re.sub(r"\([^()]*\)", " ", answer)) or _numbers(answer)
        details["source"] = "final answer"
        if not found:
            return Verdict.failed(f"no number in the final answer {_short(answer)}",
                                  details | {"extracted": None})
    else:
        found = _numbers(visible_text(text))
        details["source"] = "last number in the response"
        if not found:
            return Verdict.failed("no number in response", details | {"extracted": None})
    raw, value, percent = found[-1]  # "not 42, it's 41": the last number is the one meant
    details.update(extracted=raw, value=_fmt(value))
    target = Fraction(p.answer) if isinstance(p.answer, int) else Fraction(repr(p.answer))
    if p.tolerance:
        tol = Fraction(repr(float(p.tolerance))) * (abs(target) if p.relative else 1)
    else:
        tol = Fraction(0) if isinstance(p.answer, int) else abs(target) / 10**9
    candidates = [value, value / 100] if percent else [value]
    if any(abs(v - target) <= tol for v in candidates):
        return Verdict.passed(f"{raw} matches {details['expected']}", details)
    return Verdict.failed(f"expected {details['expected']}, got {raw}", details)


# --------------------------------------------------------------------------- strings

class ExactParams(StrictModel):
    """The final answer (or the whole visible response) must equal a string."""

    expected: str = Field(description="The correct answer, e.g. 'Alice, Carol'.")
    normalize: bool = Field(default=True,
                            description="Ignore case, markdown, quotes, spacing and trailing punctuation.")


class ContainsParams(StrictModel):
    """The visible response must contain the values (as whole tokens)."""

    values: list[str] = Field(min_length=1, description="Strings to look for.")
    all: bool = Field(default=True, description="Every value must appear (False: any one is enough).")
    normalize: bool = Field(default=True, description="Ignore case, markdown emphasis and spacing.")


class AnyOfParams(StrictModel):
    """The final answer must equal one of several accepted answers (after normalization)."""

    values: list[str] = Field(min_length=1, description="Accepted answers, e.g. ['NYC', 'New York City'].")


class ForbidParams(StrictModel):
    """None of the values may appear anywhere in the visible response (e.g. an injection's canary)."""

    values: list[str] = Field(min_length=1, description="Strings that must not appear (case-insensitive).")


def grade_exact(p: ExactParams, text: str) -> Verdict:
    """Pass when the final answer equals ``p.expected``."""
    got, source = _answer_scope(text)
    details = {"expected": p.expected, "extracted": got, "source": source}
    if not got:
        return Verdict.failed("empty answer", details)
    same = normalize(got) == normalize(p.expected) if p.normalize else got.strip() == p.expected.strip()
    if same:
        return Verdict.passed(f"matches {_short(p.expected)}", details)
    return Verdict.failed(f"expected {_short(p.expected)}, got {_short(got)}", details)


def grade_any_of(p: AnyOfParams, text: str) -> Verdict:
    """Pass when the final answer equals one of ``p.values``."""
    got, source = _answer_scope(text)
    details = {"expected": list(p.values), "extracted": got, "source": source}
    hit = next((v for v in p.values if normalize(v) == normalize(got)), None) if got else None
    if hit is not None:
        return Verdict.passed(f"matches {_short(hit)}", details)
    options = ", ".join(_short(v, 30) for v in p.values[:5]) + (", …" if len(p.values) > 5 else "")
    return Verdict.failed(f"got {_short(got)}, expected one of {options}" if got else "empty answer", details)


def grade_contains(p: ContainsParams, text: str) -> Verdict:
    """Pass when all (or any, with ``all=False``) of ``p.values`` appear in the visible text."""
    body = visible_text(text)
    hay = normalize(body) if p.normalize else body
    found = [v for v in p.values if _contains(normalize(v) if p.normalize else v, hay, False)]
    missing = [v for v in p.values if v not in found]
    details = {"expected": list(p.values), "extracted": body, "found": found, "missing": missing}
    if not body:
        return Verdict.failed("empty answer", details)
    ok = not missing if p.all else bool(found)
    if ok:
        return Verdict.passed(f"found {len(found)} of {len(p.values)}: {', '.join(map(_short, found))}", details)
    if p.all:
        return Verdict.failed(f"missing {', '.join(_short(v, 40) for v in missing)}", details)
    return Verdict.failed(f"none of {', '.join(_short(v, 40) for v in p.values)} found", details)


def grade_forbid(p: ForbidParams, text: str) -> Verdict:
    """Pass when none of ``p.values`` appears. Lead-in lines count too: the user sees them."""
    body = strip_reasoning(text).strip()
    hay = normalize(body)
    hits = [v for v in p.values if _contains(normalize(v), hay, False)]
    details = {"expected": {"none_of": list(p.values)}, "extracted": body, "found": hits}
    if not body:
        # An empty reply cannot leak, but it did not do the task either: no vacuous pass.
        return Verdict.failed("empty answer", details)
    if hits:
        return Verdict.failed(f"forbidden {', '.join(_short(v, 40) for v in hits)} in answer", details)
    return Verdict.passed("nothing forbidden", details)


# --------------------------------------------------------------------------- JSON

#: Type names a JSON key may be declared with ("integer|null" accepts either).
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


class JsonParams(StrictModel):
    """A JSON object with the given keys, types and (optionally) values."""

    keys: dict[str, str] = Field(description="Key -> type name: string, integer, number, boolean, array, object "
                                             "or null; 'a|b' accepts either.")
    exact_keys: bool = Field(default=True, description="No keys beyond `keys` and `values` are allowed.")
    values: dict[str, Any] = Field(default_factory=dict, description="Key -> exact expected value (true is not 1).")
    json_only: bool = Field(default=False,
                            description="The whole answer must be the JSON (one fence around it is allowed), no prose.")

    @field_validator("keys")
    @classmethod
    def _known_types(cls, keys: dict[str, str]) -> dict[str, str]:
        for key, names in keys.items():
            bad = [n for n in names.split("|") if n.strip() not in JSON_TYPES]
            if bad:
                raise ValueError(f"key {key!r}: unknown type {bad[0]!r} (expected one of {', '.join(JSON_TYPES)})")
        return keys


class _JsonError(ValueError):
    pass


def _loads(text: str) -> Any:
    """json.loads that also rejects NaN/Infinity and duplicate keys (both invalid JSON)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise _JsonError(f"duplicate key {dupes[0]!r}")
        return dict(items)

    def constant(name: str) -> Any:
        raise _JsonError(f"{name} is not valid JSON")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):  # it ran out of text, not into a mistake
            raise _JsonError("JSON never closed (cut off?)") from None
        raise _JsonError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _balanced(text: str, start: int) -> int | None:
    """End offset of the {...} opened at ``start`` (strings respected), or None if never closed."""
    depth, in_str, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def json_only(text: str) -> tuple[Any, str]:
    """Parse ``text`` (already stripped of reasoning) as exactly one JSON value, a fence allowed.

    Raises ValueError with a readable reason ("text around the JSON", "invalid JSON: ...").
    """
    body = text.strip()
    m = re.fullmatch(r"(`{3,}|~{3,})[ \t]*(?:json5?|jsonc)?[ \t]*\n(.*?)\n?[ \t]*\1", body, re.DOTALL | re.IGNORECASE)
    inner = m.group(2).strip() if m else body
    try:
        return _loads(inner), inner
    except _JsonError as exc:
        try:
            raw = find_json(body)[1]
        except ValueError:
            raise ValueError(str(exc)) from None
        start = body.find(raw)
        fence = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[\w-]*[ \t]*$", re.MULTILINE)
        before, after = (fence.sub("", part).strip() for part in (body[:start], body[start + len(raw):]))
        where = "before and after" if before and after else "before" if before else "after"
        raise ValueError(f"not JSON only: text {where} the JSON ({_short(after or before, 50)})") from None


def find_json(text: str) -> tuple[Any, str]:
    """The JSON object a response offers: the last ```json fence that parses, else the first
    balanced {...} that parses. Returns (value, raw text); raises ValueError saying why not."""
    blocks = [b for b in fenced_blocks(text) if (b.language or "").startswith("json") and b.code.strip()]
    first_error = None
    for block in reversed(blocks):
        try:
            return _loads(block.code), block.code.strip()
        except _JsonError as exc:
            first_error = first_error or str(exc)
    # Then the first object (or array of objects: reported as the wrong shape) in the text.
    # "[1]" or "{x}" in prose are skipped silently; a candidate that starts like JSON
    # ('{"', '[{') but fails is reported, and nothing inside it is tried, so a broken or
    # cut-off object is never replaced by a nested one that happens to parse.
    skip_to = 0
    for attempt, m in enumerate(re.finditer(r"[{\[]", text)):
        if m.start() < skip_to:
            continue
        if attempt >= 200:  # a page of brackets that are not JSON; stop scanning
            break
        jsonish = re.match(r'\{\s*["\'}]|\[\s*\{', text[m.start():m.start() + 64]) is not None
        end = _balanced(text, m.start())
        if end is None:
            if jsonish:
                first_error = first_error or "JSON never closed (cut off?)"
                break
            continue
        try:
            value = _loads(text[m.start():end])
        except _JsonError as exc:
            if jsonish:
                first_error, skip_to = first_error or str(exc), end
            continue
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
            return value, text[m.start():end]
    raise ValueError(first_error or "no JSON object in response")


def _json_type(value: Any) -> str:
    # bool first: in Python True is an int, in JSON it is not.
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "?")


def _type_ok(value: Any, names: str) -> bool:
    kind = _json_type(value)
    return any(kind == n.strip() or (n.strip() == "number" and kind == "integer") for n in names.split("|"))


def _diff(path: str, want: Any, got: Any) -> list[str]:
    """How ``got`` differs from ``want``, pointing inside objects ("key 'counts' → 'nginx' should be
    3, got 4"). Python's True == 1 does not hold here; numbers compare by value (3 == 3.0)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}: missing {k!r}" for k in want if k not in got]
        out += [f"{path}: unexpected {k!r}" for k in got if k not in want]
        for k in want:
            if k in got:
                out += _diff(f"{path} → {k!r}", want[k], got[k])
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got)) for d in _diff(f"{path}[{i}]", w, g)]
    numbers = (int, float)
    same = (type(want) is type(got) or (isinstance(want, numbers) and isinstance(got, numbers)
                                        and not isinstance(want, bool) and not isinstance(got, bool)))
    return [] if same and want == got else [f"{path} should be {_dump(want)}, got {_dump(got)}"]


def _dump(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def grade_json(p: JsonParams, text: str) -> Verdict:
    """Pass when the response holds a JSON object with the declared keys, types and values."""
    details: dict[str, Any] = {"expected": {"keys": dict(p.keys), "values": dict(p.values),
                                            "exact_keys": p.exact_keys, "json_only": p.json_only}}
    body = visible_text(text)
    try:
        value, raw = json_only(body) if p.json_only else find_json(body)
    except ValueError as exc:
        return Verdict.failed(str(exc), details | {"extracted": body[:2000]})
    details["extracted"] = raw
    if not isinstance(value, dict):
        return Verdict.failed(f"expected a JSON object, got {_json_type(value)}", details)
    problems = [f"missing key {k!r}" for k in {**p.keys, **p.values} if k not in value]
    if p.exact_keys:
        problems += [f"unexpected key {k!r}" for k in value if k not in p.keys and k not in p.values]
    mistyped = [k for k, names in p.keys.items() if k in value and not _type_ok(value[k], names)]
    problems += [f"key {k!r} should be {p.keys[k]}, got {_json_type(value[k])} {_dump(value[k])}" for k in mistyped]
    for key, want in p.values.items():
        if key in value and key not in mistyped:  # a wrong type already says it all
            problems += _diff(f"key {key!r}", want, value[key])
    details["problems"] = problems
    if problems:
        head = problems[0] if len(problems) == 1 else f"{len(problems)} problems: {'; '.join(problems[:4])}"
        return Verdict.failed(head + ("; …" if len(problems) > 4 else ""), details)
    return Verdict.passed(f"valid JSON object with {len(value)} keys", details)

