"""Which model for which job: rank models by the categories a job needs, with speed as second axis.

Pure functions over run documents (docs/results-format.md); ``forgetui recommend`` prints
``recommend_text``. docs/reports.md ("Recommend") explains the statistics.

- A job is a weighting of case categories (``JOBS``). A model's job score is the weighted mean of
  its per-category pass rates, pass / (pass + fail): errors and skipped cases are counted apart and
  never lower a score. Categories the model has no answered case in are left out of its mean.
- The 95 % interval is Wilson's, on the effective sample size of the weighted mean
  (``n_eff = (sum w)^2 / sum(w^2 / n_c)``; with one category it is that category's exact Wilson
  interval).
- Neighbours in the ranking are compared with McNemar's exact test on the cases both answered in
  the job's categories; when that is not significant (alpha 0.05) they "cannot be told apart".
- The Pareto front of (decode tok/s, job score) names the models that are never the right choice.
"""

from __future__ import annotations

from typing import Any

from forgetui.report.chart import Point, pareto_front, text_chart
from forgetui.report.stats import mcnemar_exact, wilson_interval
from forgetui.store.summary import speed_headline

ALPHA = 0.05
ALL_CATEGORIES = ("coding", "math", "reasoning", "tooluse", "injection", "longctx", "instruct", "agent", "chat")

#: job -> {category: weight}. Weights are relative; a category absent from a job does not count.
JOBS: dict[str, dict[str, float]] = {
    "coding": {"coding": 1.0},
    "tools": {"tooluse": 1.0, "agent": 0.5},
    "agent": {"agent": 1.0, "tooluse": 0.5, "instruct": 0.25},
    "long-context": {"longctx": 1.0},
    "instructions": {"instruct": 1.0},
    "reasoning": {"reasoning": 1.0, "math": 0.5},
    "math": {"math": 1.0},
    "injection": {"injection": 1.0},
    "chat": {"chat": 1.0, "instruct": 0.5},
    "general": dict.fromkeys(ALL_CATEGORIES, 1.0),
}
JOB_CHOICES = (*JOBS, "weights")


def weights_text() -> str:
    """The table of jobs and their category weights (``--job weights``)."""
    lines = ["Jobs and the category weights of their score (weighted mean of per-category pass rates):"]
    for job, weights in JOBS.items():
        parts = ", ".join(f"{cat} {w:g}" for cat, w in weights.items())
        lines.append(f"  {job:<13} {parts}")
    return "\n".join(lines)


def latest_models(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One entry per model label across ``docs``, from the newest run that has it (by
    ``created_at``), as ``{"model", "run_id", "entry"}``; plus notes on what was superseded."""
    chosen: dict[str, dict[str, Any]] = {}
    seen: dict[str, list[str]] = {}
    for doc in sorted(docs, key=lambda d: str(d.get("created_at") or "")):
        for entry in doc.get("models") or []:
            label = entry.get("model")
            if not label or entry.get("error"):
                continue
            seen.setdefault(label, []).append(str(doc.get("run_id")))
            chosen[label] = {"model": label, "run_id": doc.get("run_id"), "entry": entry}
    notes = [f"{label} is in runs {', '.join(runs)}: using the newest, {runs[-1]}"
             for label, runs in seen.items() if len(runs) > 1]
    return list(chosen.values()), notes


def _answered(entry: dict[str, Any], weights: dict[str, float]) -> dict[str, bool]:
    """case_id -> passed, for the answered (pass/fail) cases in the job's categories."""
    return {c.get("case_id"): c.get("status") == "pass" for c in entry.get("cases") or []
            if c.get("category") in weights and c.get("status") in ("pass", "fail")}


def job_score(entry: dict[str, Any], weights: dict[str, float]) -> dict[str, Any]:
    """Weighted pass rate of one model on a job: ``score`` (None without an answered case),
    ``low``/``high`` (Wilson), ``n_eff``, ``passed``/``answered`` (raw cases), ``errors``,
    ``skipped`` and ``per_category`` (pass, answered)."""
    per: dict[str, list[int]] = {}
    errors = skipped = 0
    for case in entry.get("cases") or []:
        cat, status = case.get("category"), case.get("status")
        if cat not in weights:
            continue
        if status in ("pass", "fail"):
            counts = per.setdefault(cat, [0, 0])
            counts[0] += status == "pass"
            counts[1] += 1
        elif status == "skipped":
            skipped += 1
        else:
            errors += 1
    result: dict[str, Any] = {"per_category": {c: {"pass": p, "answered": n} for c, (p, n) in sorted(per.items())},
                              "passed": sum(p for p, _ in per.values()),
                              "answered": sum(n for _, n in per.values()),
                              "errors": errors, "skipped": skipped,
                              "score": None, "low": None, "high": None, "n_eff": 0.0}
    if not per:
        return result
    total_w = sum(weights[c] for c in per)
    score = sum(weights[c] * p / n for c, (p, n) in per.items()) / total_w
    n_eff = total_w ** 2 / sum(weights[c] ** 2 / n for c, (_, n) in per.items())
    low, high = wilson_interval(min(max(score * n_eff, 0.0), n_eff), n_eff)
    result.update(score=score, low=low, high=high, n_eff=n_eff)
    return result


def _sentence(row: dict[str, Any], rows: list[dict[str, Any]], job: str, dominated_by: str | None) -> str:
    """The trade-off of one model in one sentence."""
    if row["score"] is None:
        return f"no answered case in the {job} categories: cannot be rated for this job"
    pct = f"{round(100 * row['score'])}%"
    scored = [r for r in rows if r["score"] is not None]
    best = max(r["score"] for r in scored)
    timed = [r for r in scored if r["decode_tps"] is not None]
    fastest = max(timed, key=lambda r: r["decode_tps"]) if timed else None
    is_best = row["score"] == best
    is_fastest = fastest is not None and row["decode_tps"] == fastest["decode_tps"]
    if row["decode_tps"] is None:
        return f"{'best' if is_best else 'scores'} {pct} on {job}; no speed measured, so no trade-off to state"
    if dominated_by is not None:
        return f"dominated by {dominated_by}: slower and no better ({pct} on {job} at {row['decode_tps']:.1f} tok/s)"
    if best == 0:
        return (f"passes none of the {job} cases (like every model here); "
                f"{row['decode_tps']:.1f} tok/s: no model is fit for this job yet")
    if is_best and is_fastest:
        return f"best on {job} ({pct}) and fastest ({row['decode_tps']:.1f} tok/s): the clear choice"
    if is_best:
        factor = fastest["decode_tps"] / row["decode_tps"] if row["decode_tps"] else float("inf")
        return f"most accurate on {job} ({pct}), but {factor:.1f}x slower than {fastest['model']}"
    leader = next(r for r in scored if r["score"] == best)
    if is_fastest:
        return (f"fastest ({row['decode_tps']:.1f} tok/s), but only {pct} on {job} "
                f"against {round(100 * best)}% for {leader['model']}")
    return (f"a middle choice: {pct} on {job} at {row['decode_tps']:.1f} tok/s, "
            f"behind {leader['model']} ({round(100 * best)}%) but faster than it")


def recommend(docs: list[dict[str, Any]], job: str) -> dict[str, Any]:
    """Rank the models of ``docs`` for ``job`` (a key of JOBS).

    Returns ``job``, ``weights``, ``notes`` (superseded runs), ``ranking`` (best first: ``model``,
    ``run_id``, the ``job_score`` fields, ``decode_tps``, ``on_front``, ``dominated_by``,
    ``sentence``), ``ties`` (neighbours the data cannot separate: ``a``, ``b``, ``n`` cases both
    answered, ``p_value``, ``line``) and ``chart`` (text chart of job score against decode rate).
    """
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; one of {', '.join(JOBS)}")
    weights = JOBS[job]
    models, notes = latest_models(docs)
    rows = []
    for item in models:
        speed = speed_headline(item["entry"].get("speed")) or {}
        rows.append({"model": item["model"], "run_id": item["run_id"], **job_score(item["entry"], weights),
                     "decode_tps": speed.get("decode_tps"), "_answers": _answered(item["entry"], weights)})
    rows.sort(key=lambda r: (r["score"] is None, -(r["score"] or 0.0), -(r["decode_tps"] or 0.0), r["model"]))
    points = [Point(r["model"], r["decode_tps"], r["score"]) for r in rows
              if r["score"] is not None and r["decode_tps"] is not None]
    front = {p.label for p in pareto_front(points)}
    for r in rows:
        r["on_front"] = r["model"] in front
        r["dominated_by"] = None
        if r["score"] is not None and r["decode_tps"] is not None and not r["on_front"]:
            beaters = [q for q in points if q.speed >= r["decode_tps"] and q.score >= r["score"] and q.label != r["model"]]
            r["dominated_by"] = max(beaters, key=lambda q: (q.score, q.speed)).label if beaters else None
    for r in rows:
        r["sentence"] = _sentence(r, rows, job, r["dominated_by"])
    ties = []
    scored = [r for r in rows if r["score"] is not None]
    for upper, lower in zip(scored, scored[1:]):
        common = sorted(set(upper["_answers"]) & set(lower["_answers"]))
        test = mcnemar_exact([(upper["_answers"][c], lower["_answers"][c]) for c in common])
        if test.p_value >= ALPHA or not common:
            why = (f"p = {test.p_value:.3g}, {test.only_a} vs {test.only_b} discordant" if common
                   else "no case both answered")
            ties.append({"a": upper["model"], "b": lower["model"], "n": len(common), "p_value": test.p_value,
                         "line": f"{upper['model']} and {lower['model']} cannot be told apart on {job} "
                                 f"with {len(common)} cases ({why})"})
    for r in rows:
        del r["_answers"]
    return {"job": job, "weights": dict(weights), "notes": notes, "ranking": rows, "ties": ties,
            "chart": text_chart(points)}


def recommend_text(result: dict[str, Any]) -> str:
    """A ``recommend`` result as plain text for a person."""
    weights = ", ".join(f"{c} {w:g}" for c, w in result["weights"].items())
    lines = [f"Job: {result['job']} (weights: {weights})", *(f"note: {n}" for n in result["notes"]), ""]
    if not result["ranking"]:
        return "\n".join([*lines, "No benchmarked model in these runs."])
    for n, r in enumerate(result["ranking"], 1):
        if r["score"] is None:
            rate = "no answered case"
        else:
            rate = (f"{round(100 * r['score'])}% [{round(100 * r['low'])}%, {round(100 * r['high'])}%] "
                    f"({r['passed']}/{r['answered']} cases)")
        speed = f"{r['decode_tps']:.1f} tok/s" if r["decode_tps"] is not None else "no speed"
        extra = f", {r['errors']} errors and {r['skipped']} skipped not counted" if r["errors"] or r["skipped"] else ""
        lines.append(f"{n}. {r['model']}: {rate}, {speed}{extra}")
        lines.append(f"   {r['sentence']}")
    lines.append("")
    lines += [t["line"] for t in result["ties"]] or ["Every neighbour in the ranking differs significantly."]
    lines += ["", f"{result['job']} pass rate against decode rate (* = Pareto front):", result["chart"]]
    return "\n".join(lines)
