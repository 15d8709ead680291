"""Two models side by side (from one run or two): pass rates, speed medians, cases that differ.

Pure functions over run documents (docs/results-format.md); the TUI's compare screen renders the
result. No statistics yet: the numbers are counts, rates, medians and ratios.
"""

from __future__ import annotations

from typing import Any

from forgetui.store.summary import speed_headline

STATUSES = ("pass", "fail", "error", "skipped")


def find_model(doc: dict[str, Any], label: str) -> dict[str, Any] | None:
    """The ``models[]`` entry of ``doc`` whose ``model`` is ``label``."""
    return next((m for m in doc.get("models") or [] if m.get("model") == label), None)


def pick_models(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> tuple[str | None, str | None]:
    """Which models to compare across two runs: the first label both share, else each run's first."""
    labels_a = [m.get("model") for m in doc_a.get("models") or []]
    labels_b = [m.get("model") for m in doc_b.get("models") or []]
    shared = next((label for label in labels_a if label in labels_b), None)
    if shared is not None:
        return shared, shared
    return (labels_a[0] if labels_a else None), (labels_b[0] if labels_b else None)


def pass_rate(counts: dict[str, int]) -> float | None:
    """Passed / (passed + failed + errors); skipped cases do not count. None when nothing counted."""
    graded = counts["pass"] + counts["fail"] + counts["error"]
    return counts["pass"] / graded if graded else None


def _counts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, Any] = dict.fromkeys(STATUSES, 0)
    for case in cases:
        status = case.get("status")
        counts[status if status in counts else "error"] += 1
    counts["rate"] = pass_rate(counts)
    return counts


def _by_category(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        grouped.setdefault(str(case.get("category") or "?"), []).append(case)
    return {cat: _counts(items) for cat, items in grouped.items()}


def ratio(a: float | None, b: float | None) -> float | None:
    """b / a, or None when either is missing or a is zero."""
    if a is None or b is None or a == 0:
        return None
    return b / a


def _speed_rows(model_a: dict[str, Any], model_b: dict[str, Any]) -> list[dict[str, Any]]:
    def per_prompt(model: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
        speed = model.get("speed") or {}
        return {p.get("name"): speed_headline({"prompts": [p]}) for p in speed.get("prompts") or []}

    prompts_a, prompts_b = per_prompt(model_a), per_prompt(model_b)
    names = list(prompts_a) + [n for n in prompts_b if n not in prompts_a]
    pairs = [(name, prompts_a.get(name), prompts_b.get(name)) for name in names]
    if pairs:
        pairs.append(("all", speed_headline(model_a.get("speed")), speed_headline(model_b.get("speed"))))
    rows = []
    for name, a, b in pairs:
        a, b = a or {}, b or {}
        rows.append({
            "prompt": name,
            "a_decode_tps": a.get("decode_tps"), "b_decode_tps": b.get("decode_tps"),
            "decode_ratio": ratio(a.get("decode_tps"), b.get("decode_tps")),
            "a_ttft_s": a.get("ttft_s"), "b_ttft_s": b.get("ttft_s"),
            "ttft_ratio": ratio(a.get("ttft_s"), b.get("ttft_s")),
        })
    return rows


def _side(doc: dict[str, Any], label: str) -> dict[str, Any]:
    fingerprint = doc.get("fingerprint") or {}
    return {"run_id": doc.get("run_id"), "name": doc.get("name"), "created_at": doc.get("created_at"),
            "model": label, "case_set_revision": fingerprint.get("case_set_revision")}


def compare_models(doc_a: dict[str, Any], model_a: str, doc_b: dict[str, Any], model_b: str) -> dict[str, Any]:
    """Model ``model_a`` of run ``doc_a`` (A) against ``model_b`` of ``doc_b`` (B).

    Returns ``a``/``b`` (run id, name, created_at, model, case_set_revision), ``warnings`` (lines for
    a person), ``revision_mismatch``, ``categories`` (per category: ``a``/``b`` status counts and
    ``rate``, None where that side has no case of the category), ``overall`` (same, all cases),
    ``speed`` (per prompt and ``all``: median decode tok/s and TTFT of the clean measured requests
    for A and B, with ratios B/A), ``differing`` (cases whose status differs, or that only one side
    has, as ``case_id``, ``category``, ``a``, ``b``; a missing side is None) and ``common_cases``.
    """
    a, b = _side(doc_a, model_a), _side(doc_b, model_b)
    warnings: list[str] = []
    mismatch = a["case_set_revision"] != b["case_set_revision"]
    if mismatch:
        warnings.append(f"different case-set revisions ({a['case_set_revision'] or 'none'} vs "
                        f"{b['case_set_revision'] or 'none'}): the same case id may not be the same case")
    entries = []
    for side, doc, label in (("A", doc_a, model_a), ("B", doc_b, model_b)):
        entry = find_model(doc, label)
        if entry is None:
            warnings.append(f"{side}: run {doc.get('run_id')} has no model {label}")
            entry = {}
        elif entry.get("error"):
            warnings.append(f"{side}: {label} was not benchmarked: {entry['error']}")
        entries.append(entry)
    entry_a, entry_b = entries
    cases_a = {c.get("case_id"): c for c in entry_a.get("cases") or []}
    cases_b = {c.get("case_id"): c for c in entry_b.get("cases") or []}
    cats_a, cats_b = _by_category(list(cases_a.values())), _by_category(list(cases_b.values()))
    categories = [{"category": cat, "a": cats_a.get(cat), "b": cats_b.get(cat)}
                  for cat in sorted(set(cats_a) | set(cats_b))]
    differing = []
    for case_id in list(cases_a) + [cid for cid in cases_b if cid not in cases_a]:
        ca, cb = cases_a.get(case_id), cases_b.get(case_id)
        status_a = ca.get("status") if ca else None
        status_b = cb.get("status") if cb else None
        if status_a != status_b:
            differing.append({"case_id": case_id, "category": (ca or cb or {}).get("category"),
                              "a": status_a, "b": status_b})
    return {
        "a": a,
        "b": b,
        "warnings": warnings,
        "revision_mismatch": mismatch,
        "categories": categories,
        "overall": {"a": _counts(list(cases_a.values())) if cases_a else None,
                    "b": _counts(list(cases_b.values())) if cases_b else None},
        "speed": _speed_rows(entry_a, entry_b),
        "differing": differing,
        "common_cases": len(set(cases_a) & set(cases_b)),
    }
