"""The CSV rendering of a report (``build_report``'s dict): one row per model and category, and one
summary row per model (``row`` = ``model``, ``category`` empty), the model's row first.

Columns (``COLUMNS``):

| column | meaning |
|---|---|
| ``run_id``, ``model`` | the run, and the model's label in the report |
| ``row`` | ``model`` (all its cases) or ``category`` |
| ``category`` | the category; empty on a model row |
| ``pass``, ``fail``, ``graded`` | counts; ``graded`` = pass + fail, the pass rate's denominator |
| ``errors``, ``skipped`` | cases kept out of the pass rate (request or judge failures; skipped) |
| ``pass_rate`` | pass / graded, 0..1 (4 decimals); empty when nothing was graded |
| ``pass_rate_text`` | ``89% (54/61)`` |
| ``ci_low``, ``ci_high`` | the 95 % Wilson interval, 0..1 |
| ``hard_pass``, ``hard_graded``, ``hard_rate`` | model rows: the same on the hard cases |
| ``decode_tps``, ``ttft_s`` | model rows: medians over the clean measured speed requests |
| ``tokens_in``, ``tokens_out``, ``tokens_reasoning`` | model rows: tokens (out includes reasoning) |
| ``cost_usd`` | model rows: cost at the provider's prices; empty without prices |
| ``recoveries`` | model rows: re-asks with thinking off that brought an answer back |

Empty cells mean "not known" or "not applicable", never zero.
"""

from __future__ import annotations

import csv
import io
from typing import Any

COLUMNS = ["run_id", "model", "row", "category", "pass", "fail", "graded", "errors", "skipped", "pass_rate",
           "pass_rate_text", "ci_low", "ci_high", "hard_pass", "hard_graded", "hard_rate", "decode_tps", "ttft_s",
           "tokens_in", "tokens_out", "tokens_reasoning", "cost_usd", "recoveries"]


def _rates(block: dict[str, Any]) -> dict[str, Any]:
    low, high = block["interval"] or (None, None)
    return {"pass": block["pass"], "fail": block["fail"], "graded": block["graded"], "pass_rate": block["rate"],
            "pass_rate_text": block["rate_text"], "ci_low": low, "ci_high": high}


def csv_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows as dicts keyed by ``COLUMNS`` (missing keys are empty cells)."""
    rows: list[dict[str, Any]] = []
    for m in report["models"]:
        tokens = m.get("tokens") or {}
        rows.append({
            "run_id": m["run_id"], "model": m["model"], "row": "model", "category": "", **_rates(m),
            "errors": m["errors"], "skipped": m["skipped"],
            "hard_pass": m["hard"]["pass"], "hard_graded": m["hard"]["graded"], "hard_rate": m["hard"]["rate"],
            "decode_tps": m["decode_tps"], "ttft_s": m["ttft_s"], "tokens_in": tokens.get("input"),
            "tokens_out": tokens.get("output"), "tokens_reasoning": tokens.get("reasoning"),
            "cost_usd": m["cost_usd"], "recoveries": m["recoveries"],
        })
        for cat in m["categories"]:
            rows.append({"run_id": m["run_id"], "model": m["model"], "row": "category", "category": cat["category"],
                         **_rates(cat), "errors": cat["errors"], "skipped": cat["skipped"]})
    return rows


def render_csv(report: dict[str, Any]) -> str:
    """The report as CSV text (header row first, ``\\n`` line ends)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, restval="", lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(report):
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()
