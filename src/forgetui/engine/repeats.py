"""Repeats: a profile's ``[cases] repeats = k`` asks every case k times.

With k = 1 (the default) nothing here changes a run: records keep the key ``<model>|case|<id>`` and
case rows have no ``repeat``. With k > 1, attempt r (0-based) of a case is its own row with the key
``<model>|case|<id>|r<r>`` and ``case["repeat"] = r``, so resume, ``forgetui recover`` and
``forgetui judge`` (which all work per key) handle each attempt on its own.

In ``run.json`` a model's ``cases`` keeps one entry per case: the first attempt's row (so every
consumer still sees one row per case, and a k > 1 run compares with a k = 1 run on the same
footing: pass/fail counts and scores come from the first attempt), with ``repeats`` inside it, one
short entry per attempt. ``cases_summary`` gains the repeat statistics beside the counts
(:func:`repeat_stats`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..report.stats import interval_text, pass_at_k, pass_hat_k, wilson_interval

#: The fields of an attempt kept in a row's ``repeats`` list.
ATTEMPT_FIELDS = ("repeat", "status", "reason", "tokens", "cost_usd", "outcome", "finish_reason",
                  "e2e_s", "recovered")


class Attempt:
    """One attempt (``repeat``) of a case; reads like the case itself (``.id``, ``.grader_kind``...)."""

    __slots__ = ("case", "repeat")

    def __init__(self, case: Any, repeat: int) -> None:
        self.case = case
        self.repeat = repeat

    def __getattr__(self, name: str) -> Any:
        return getattr(self.case, name)

    def __repr__(self) -> str:
        return f"Attempt({self.case.id!r}, {self.repeat})"


def as_attempt(case: Any, repeat: int | None) -> Any:
    """The case itself when ``repeat`` is None (k = 1), else an :class:`Attempt`."""
    return case if repeat is None else Attempt(case, repeat)


def unpack(item: Any) -> tuple[Any, int | None]:
    """(case, repeat) of a planned item: a plain case is (case, None)."""
    if isinstance(item, Attempt):
        return item.case, item.repeat
    return item, None


def attempt_key(model: str, case_id: str, repeat: int | None = None) -> str:
    """The record key of an attempt; with ``repeat`` None it is ``cases_run.case_key``'s."""
    key = f"{model}|case|{case_id}"
    return key if repeat is None else f"{key}|r{repeat}"


def item_key(model: str, item: Any) -> str:
    case, repeat = unpack(item)
    return attempt_key(model, case.id, repeat)


def plan_attempts(cases: list[Any], model: str, k: int, done: set[str]) -> list[Any]:
    """The attempts of ``model`` not stored yet: the cases themselves for k = 1, else
    ``Attempt(case, r)`` for r in 0..k-1, case by case."""
    if k <= 1:
        return [c for c in cases if attempt_key(model, c.id) not in done]
    return [Attempt(c, r) for c in cases for r in range(k) if attempt_key(model, c.id, r) not in done]


def fold_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case: rows without ``repeat`` pass through; the attempts of a case become its
    first attempt's row (lowest ``repeat``) with ``repeats`` (one entry per attempt, in order)
    inside, at the place of the case's first stored attempt."""
    if not any("repeat" in r for r in rows):
        return rows
    groups: dict[str, list[dict[str, Any]]] = {}
    order: list[Any] = []
    for row in rows:
        if "repeat" not in row:
            order.append(row)
            continue
        if row["case_id"] not in groups:
            groups[row["case_id"]] = []
            order.append(row["case_id"])
        groups[row["case_id"]].append(row)
    out = []
    for item in order:
        if isinstance(item, dict):
            out.append(item)
            continue
        attempts = sorted(groups[item], key=lambda r: r["repeat"])
        out.append({**attempts[0], "repeats": [{f: a.get(f) for f in ATTEMPT_FIELDS} for a in attempts]})
    return out


def repeats_of(meta: dict[str, Any], rows: Iterable[dict[str, Any]]) -> int:
    """k: the profile's ``cases.repeats``, else the most attempts any row has."""
    k = ((meta.get("profile") or {}).get("cases") or {}).get("repeats")
    if isinstance(k, int) and k >= 1:
        return k
    return max((len(r.get("repeats") or []) for r in rows), default=1) or 1


def repeat_stats(rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """The repeat statistics of folded rows (those with ``repeats``).

    Only graded attempts count (pass or fail; an ``error`` or ``skipped`` attempt is kept apart, as
    for cases). For case i with n_i graded attempts and c_i passes:
    ``pass_at_1`` is the mean of c_i / n_i over cases with n_i > 0, with the Wilson interval of all
    attempts pooled (sum c / sum n) and the standard error of c_i / n_i across cases;
    ``pass_hat_k`` (all k pass) and ``pass_at_k`` (at least one of k passes) are means over the cases
    whose k attempts were all graded (``complete``)."""
    per_case = []
    for row in rows:
        attempts = row.get("repeats")
        if not attempts:
            continue
        graded = [a for a in attempts if a.get("status") in ("pass", "fail")]
        per_case.append((len(graded), sum(1 for a in graded if a["status"] == "pass")))
    counted = [(n, c) for n, c in per_case if n > 0]
    complete = [(n, c) for n, c in per_case if n == k]
    passed, attempts = sum(c for _, c in counted), sum(n for n, _ in counted)
    rates = [c / n for n, c in counted]
    mean = sum(rates) / len(rates) if rates else None
    std_error = None
    if len(rates) > 1 and mean is not None:
        std_error = math.sqrt(sum((r - mean) ** 2 for r in rates) / (len(rates) - 1) / len(rates))
    low, high = wilson_interval(passed, attempts) if attempts else (None, None)

    def mean_of(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    return {
        "repeats": k,
        "pass_at_1": {"value": mean, "low": low, "high": high, "std_error": std_error,
                      "passed": passed, "attempts": attempts, "cases": len(counted)},
        "pass_hat_k": {"value": mean_of([pass_hat_k(k, c, k) for _, c in complete]), "cases": len(complete)},
        "pass_at_k": {"value": mean_of([pass_at_k(k, c, k) for _, c in complete]), "cases": len(complete)},
        "incomplete": len(per_case) - len(complete),
    }


def fold_models_cases(rows: list[dict[str, Any]], k: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(one row per case, the repeat statistics or None when the rows have no repeats)."""
    folded = fold_rows(rows)
    if not any("repeats" in r for r in folded):
        return folded, None
    return folded, repeat_stats(folded, k)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{round(100 * value)}%"


def repeats_line(summary: dict[str, Any] | None) -> str | None:
    """``pass@1 62% [51%, 72%] over 5 attempts; pass^5 30%`` from a ``cases_summary``, or None
    when the run asked each case once."""
    if not summary or not isinstance(summary.get("pass_at_1"), dict):
        return None
    k, p1 = summary.get("repeats"), summary["pass_at_1"]
    line = f"pass@1 {_pct(p1.get('value'))} {interval_text(p1.get('passed') or 0, p1.get('attempts') or 0)}"
    line += f" over {k} attempts; pass^{k} {_pct((summary.get('pass_hat_k') or {}).get('value'))}"
    if summary.get("incomplete"):
        line += f" ({summary['incomplete']} case(s) without {k} graded attempts left out of pass^{k})"
    return line
