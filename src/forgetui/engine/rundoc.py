"""Build the run document (``run.json``) from the run's metadata and its records.

``run.json`` is derived: it can always be rebuilt from ``records.jsonl`` plus the metadata, so a
crash between a record and the next ``run.json`` rewrite loses nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .costs import model_usage, run_usage
from .metrics import describe, summarize_requests
from .repeats import fold_models_cases, repeats_of
from .speed import baseline_from, prompt_text

SCHEMA_VERSION = 1


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def latest_per_key(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Case records with one record per ``key``: the one with the highest ``seq`` (a later
    ``forgetui recover`` or ``forgetui judge`` supersedes the earlier record, which stays in
    records.jsonl). Other records (speed requests) pass through unchanged, in their order."""
    best: dict[str, tuple[int, int]] = {}
    for i, rec in enumerate(records):
        if rec.get("kind") != "case_result":
            continue
        seq = rec.get("seq")
        rank = seq if isinstance(seq, int) else -1
        if rec.get("key") not in best or rank >= best[rec["key"]][0]:
            best[rec["key"]] = (rank, i)
    keep = {i for _, i in best.values()}
    return [r for i, r in enumerate(records) if r.get("kind") != "case_result" or i in keep]


def build_document(meta: dict[str, Any], records: list[dict[str, Any]], speed: Any,
                   model_errors: dict[str, str] | None = None) -> dict[str, Any]:
    """The whole run as one JSON document (the public results contract, docs/results-format.md)."""
    model_errors = model_errors or {}
    every_case = [r for r in records if r.get("kind") == "case_result"]  # superseded ones cost tokens too
    records = latest_per_key(records)
    by_model: dict[str, list[dict[str, Any]]] = {}
    cases_by_model: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("kind") == "speed_request":
            by_model.setdefault(rec["model"], []).append(rec)
        elif rec.get("kind") == "case_result":
            cases_by_model.setdefault(rec["model"], []).append(rec["case"])
    # Repeats (k > 1): one row per case, its first attempt, with every attempt under "repeats".
    k = repeats_of(meta, [])
    repeat_summaries: dict[str, Any] = {}
    for label, rows in cases_by_model.items():
        cases_by_model[label], repeat_summaries[label] = fold_models_cases(rows, k)
    prices = (meta.get("fingerprint") or {}).get("prices") or {}
    models = []
    for target in meta["targets"]:
        label = target["model"]
        recs = by_model.get(label, [])
        models.append({
            "model": label,
            "provider": target["provider"],
            "model_id": target["model_id"],
            "error": model_errors.get(label) or target.get("error"),
            "model_info": target.get("model_info"),
            "lifecycle": target.get("lifecycle"),
            "speed": _speed_section(recs, speed),
            "cases": cases_by_model.get(label, []),
            "cases_summary": _with_repeats(cases_summary(cases_by_model.get(label, [])), repeat_summaries.get(label)),
            **model_usage([r["case"] for r in every_case if r.get("model") == label], [r["request"] for r in recs],
                          prices.get(target["provider"]), prices),
        })
    requests = [r["request"] for r in records if r.get("kind") == "speed_request" and r.get("counted")]
    doc = {k: v for k, v in meta.items() if k != "targets"}
    doc["schema_version"] = SCHEMA_VERSION
    doc["updated_at"] = now_iso()
    doc["models"] = models
    doc["totals"] = {
        "requests": len(requests),
        "ok": sum(1 for r in requests if r.get("ok")),
        "errors": sum(1 for r in requests if not r.get("ok")),
        "completion_tokens": sum(r.get("completion_tokens") or 0 for r in requests),
        "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in requests),
        "cases": sum(len(v) for v in cases_by_model.values()),
        "cases_passed": sum(1 for v in cases_by_model.values() for c in v if c["status"] == "pass"),
        "cases_failed": sum(1 for v in cases_by_model.values() for c in v if c["status"] in ("fail", "error")),
        **run_usage(models),
    }
    return doc


def _with_repeats(summary: dict[str, Any] | None, repeats: dict[str, Any] | None) -> dict[str, Any] | None:
    return {**summary, **repeats} if summary is not None and repeats else summary


def cases_summary(cases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Pass/fail/error/skipped per category, and the quick set's two scores (tags ability, agent)."""
    if not cases:
        return None
    by_category: dict[str, dict[str, int]] = {}
    for case in cases:
        counts = by_category.setdefault(case["category"], {"pass": 0, "fail": 0, "error": 0, "skipped": 0})
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    scores = {}
    # bench-llm's two scores: five ability checks and three agent checks. Cases tagged "variant"
    # (the agent task with real log lines and exact counts) are reported beside, not inside, them.
    for tag, name in (("ability", "ability_score"), ("agent", "agent_fitness_score")):
        tagged = [c for c in cases if tag in (c.get("tags") or []) and "variant" not in (c.get("tags") or [])]
        if tagged:
            scores[name] = {"passed": sum(1 for c in tagged if c["status"] == "pass"), "of": len(tagged)}
    variants = [c for c in cases if "variant" in (c.get("tags") or [])]
    if variants:
        scores["variants"] = {c["case_id"]: c["status"] for c in variants}
    return {
        "total": len(cases),
        "passed": sum(1 for c in cases if c["status"] == "pass"),
        # A recovery brought an answer back (the thinking-off re-ask said something); a re-ask that
        # came back empty again is counted as a re-ask only.
        "recoveries": sum(1 for c in cases if c.get("recovered") and (c.get("response") or c.get("tool_calls"))),
        "reasks": sum(1 for c in cases if c.get("recovered")),
        "by_category": dict(sorted(by_category.items())),
        **scores,
    }


def _speed_section(recs: list[dict[str, Any]], speed: Any) -> dict[str, Any] | None:
    if not speed.enabled:
        return None
    baseline_reqs = [r["request"] for r in recs if r["phase"] == "baseline"]
    baseline = baseline_from(baseline_reqs)
    prompts = []
    for name in speed.prompts:
        measured = sorted(
            (r for r in recs if r["prompt"] == name and r["phase"] == "measure"),
            key=lambda r: r["repeat"],
        )
        warmups = [r["request"] for r in recs if r["prompt"] == name and r["phase"] == "warmup"]
        reqs = [r["request"] for r in measured]
        prompts.append({
            "name": name,
            "prompt_chars": len(prompt_text(name, speed)),
            "requests": reqs,
            "warmup": warmups,
            "summary": summarize_requests(reqs, speed.max_tokens),
        })
    return {
        "baseline": {
            "requests": baseline_reqs,
            "prompt_tokens": baseline[0] if baseline else None,
            "ttft_s": baseline[1] if baseline else None,
            "ttft_summary": describe(r.get("ttft_s") for r in baseline_reqs if r.get("ok")),
        },
        "prompts": prompts,
    }
