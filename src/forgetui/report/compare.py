"""Two models side by side (from one run or two): pass rates, speed medians, cases that differ.

Pure functions over run documents (docs/results-format.md); the TUI's compare screen renders the
result; ``forgetui compare`` prints ``compare_text`` of it.

The paired part: on the cases both sides answered (pass or fail on both; errors and skipped cases
are counted apart), McNemar's exact test says whether A and B differ beyond chance (alpha 0.05),
and the cases that flipped are listed. Speed: medians of the clean measured requests with their
standard deviation, per prompt and over all prompts.
"""

from __future__ import annotations

import statistics
from typing import Any

from forgetui.report.stats import mcnemar_exact, rate_text
from forgetui.store.summary import speed_headline

ALPHA = 0.05
ANSWERED = ("pass", "fail")

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
    """Passed / (passed + failed), as in ``forgetui report``: an error (the server, the judge) or a
    skipped case is not the model's answer and never lowers its rate. None when nothing was graded."""
    graded = counts["pass"] + counts["fail"]
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
    spread_a, spread_b = _spreads(model_a), _spreads(model_b)
    rows = []
    for name, a, b in pairs:
        a, b = a or {}, b or {}
        sa, sb = spread_a.get(name, {}), spread_b.get(name, {})
        rows.append({
            "a_decode_sd": sa.get("decode_tps"), "b_decode_sd": sb.get("decode_tps"),
            "a_ttft_sd": sa.get("ttft_s"), "b_ttft_sd": sb.get("ttft_s"),
            "prompt": name,
            "a_decode_tps": a.get("decode_tps"), "b_decode_tps": b.get("decode_tps"),
            "decode_ratio": ratio(a.get("decode_tps"), b.get("decode_tps")),
            "a_ttft_s": a.get("ttft_s"), "b_ttft_s": b.get("ttft_s"),
            "ttft_ratio": ratio(a.get("ttft_s"), b.get("ttft_s")),
        })
    return rows


def _sd(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def _spreads(model: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Standard deviation of decode tok/s and TTFT over the clean measured requests, per prompt
    name and over ``all`` prompts (the same requests ``speed_headline`` takes the median of)."""
    out: dict[str, dict[str, float | None]] = {}
    pooled: dict[str, list[float]] = {"decode_tps": [], "ttft_s": []}
    for prompt in (model.get("speed") or {}).get("prompts") or []:
        values: dict[str, list[float]] = {"decode_tps": [], "ttft_s": []}
        for req in prompt.get("requests") or []:
            if not isinstance(req, dict) or not req.get("ok"):
                continue
            for key, bucket in values.items():
                value = req.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    bucket.append(float(value))
                    pooled[key].append(float(value))
        out[prompt.get("name")] = {key: _sd(v) for key, v in values.items()}
    out["all"] = {key: _sd(v) for key, v in pooled.items()}
    return out


def _paired(cases_a: dict[str, dict[str, Any]], cases_b: dict[str, dict[str, Any]], tag_a: str,
            tag_b: str) -> dict[str, Any]:
    """McNemar on the cases both answered, the flipped cases, and what was left out and why."""
    pairs, flipped_ab, flipped_ba, excluded = [], [], [], []
    for case_id, ca in cases_a.items():
        cb = cases_b.get(case_id)
        if cb is None:
            continue
        sa, sb = ca.get("status"), cb.get("status")
        if sa not in ANSWERED or sb not in ANSWERED:
            excluded.append({"case_id": case_id, "category": ca.get("category"), "a": sa, "b": sb})
            continue
        pairs.append((sa == "pass", sb == "pass"))
        row = {"case_id": case_id, "category": ca.get("category") or cb.get("category")}
        if sa == "pass" and sb == "fail":
            flipped_ab.append({**row, "a_reason": ca.get("reason"), "b_reason": cb.get("reason")})
        elif sa == "fail" and sb == "pass":
            flipped_ba.append({**row, "a_reason": ca.get("reason"), "b_reason": cb.get("reason")})
    test = mcnemar_exact(pairs)
    verdict = test.verdict(ALPHA, tag_a, tag_b)
    line = (f"{verdict} (McNemar exact p = {test.p_value:.4g}; on {test.n} cases both answered, "
            f"{test.only_a} passed only by A, {test.only_b} only by B; alpha {ALPHA})")
    return {"n": test.n, "both_pass": test.both_pass, "only_a": test.only_a, "only_b": test.only_b,
            "both_fail": test.both_fail, "p_value": test.p_value, "alpha": ALPHA, "verdict": verdict,
            "verdict_line": line, "flipped_a_to_b": flipped_ab, "flipped_b_to_a": flipped_ba,
            "excluded": excluded}


def _fingerprint_warnings(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> list[str]:
    """Sampling settings and judge that differ between two runs (nothing for one run)."""
    if doc_a is doc_b:
        return []
    fa, fb = doc_a.get("fingerprint") or {}, doc_b.get("fingerprint") or {}
    warnings = []
    if (fa.get("sampling") or None) != (fb.get("sampling") or None):
        warnings.append(f"different sampling settings ({fa.get('sampling')} vs {fb.get('sampling')})")
    judge_a, judge_b = ((f.get("judge") or {}).get("model") for f in (fa, fb))
    if judge_a != judge_b:
        warnings.append(f"different judges ({judge_a or 'none'} vs {judge_b or 'none'}): judged cases "
                        f"may differ because of the judge")
    return warnings


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
    warnings += _fingerprint_warnings(doc_a, doc_b)
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
        "paired": _paired(cases_a, cases_b, "A", "B"),
    }


def _fmt(value: float | None, spec: str, sd: float | None = None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:{spec}}"
    return f"{text} +/- {sd:{spec}}{unit}" if sd is not None else f"{text}{unit}"


def _side_line(tag: str, side: dict[str, Any]) -> str:
    return (f"{tag}: {side['model']}  (run {side['run_id']}, {side['name'] or '-'}, "
            f"case set {side['case_set_revision'] or 'none'})")


def compare_text(result: dict[str, Any]) -> str:
    """A ``compare_models`` result as plain text for a person (``forgetui compare``)."""
    paired = result["paired"]
    lines = [_side_line("A", result["a"]), _side_line("B", result["b"])]
    lines += [f"WARNING: {w}" for w in result["warnings"]]
    lines += ["", f"Verdict: {paired['verdict_line']}"]
    if paired["excluded"]:
        lines.append(f"  {len(paired['excluded'])} case(s) both have were left out (an error or a skip on "
                     f"a side): " + ", ".join(f"{e['case_id']} ({e['a']}/{e['b']})" for e in paired["excluded"]))
    only = [d for d in result["differing"] if d["a"] is None or d["b"] is None]
    if only:
        lines.append(f"  {len(only)} case(s) only one side has were left out")
    for title, key in (("A passed, B failed", "flipped_a_to_b"), ("B passed, A failed", "flipped_b_to_a")):
        rows = paired[key]
        lines += ["", f"{title}: {len(rows)}"]
        loser = "B" if key == "flipped_a_to_b" else "A"
        lines += [f"  [{r['category'] or '?'}] {r['case_id']}: {loser} failed: {r[loser.lower() + '_reason'] or '-'}"
                  for r in rows]
    lines += ["", "Pass rate per category (passed / (passed + failed); errors and skipped apart):"]
    for item in [*result["categories"], {"category": "all", **result["overall"]}]:
        cells = []
        for side in ("a", "b"):
            c = item[side]
            errors = f", {c['error']} err" if c and c["error"] else ""
            cells.append(f"{rate_text(c['pass'], c['pass'] + c['fail'])}{errors}" if c else "-")
        lines.append(f"  {item['category']:<12} A {cells[0]:<14} B {cells[1]}")
    lines += ["", "Speed (median +/- stdev of clean measured requests; ratio B/A):"]
    if not result["speed"]:
        lines.append("  no speed results on either side")
    for row in result["speed"]:
        ratio_d = f"B/A {row['decode_ratio']:.2f}" if row["decode_ratio"] is not None else "B/A -"
        ratio_t = f"B/A {row['ttft_ratio']:.2f}" if row["ttft_ratio"] is not None else "B/A -"
        lines.append(f"  {row['prompt']:<10} decode A {_fmt(row['a_decode_tps'], '.1f', row['a_decode_sd'])} tok/s, "
                     f"B {_fmt(row['b_decode_tps'], '.1f', row['b_decode_sd'])} tok/s, {ratio_d}; "
                     f"TTFT A {_fmt(row['a_ttft_s'], '.3f', row['a_ttft_sd'], 's')}, "
                     f"B {_fmt(row['b_ttft_s'], '.3f', row['b_ttft_sd'], 's')}, {ratio_t}")
    return "\n".join(lines)
