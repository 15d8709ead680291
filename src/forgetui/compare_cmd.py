"""``forgetui compare`` and ``forgetui recommend``: load stored runs, print the report/ results.

compare: ``RUN_A RUN_B [--model-a M] [--model-b M]`` (the same model across two runs: by default
the first model both share) or ``RUN --model-a A --model-b B`` (two models of one run). recommend:
``RUN... [--job JOB]``. Text on stdout, ``--json`` for the dict. Exit codes: 0 (also when the
comparison is indistinguishable), 2 usage (missing or unknown model, unknown job), 4 unknown run.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .errors import ExitCode, ForgetuiError
from .paths import locations
from .store import RunStore


def _labels(doc: dict[str, Any]) -> list[str]:
    return [m.get("model") for m in doc.get("models") or [] if m.get("model")]


def _check(doc: dict[str, Any], label: str | None, flag: str) -> str:
    if label is None:
        raise ForgetuiError(f"run {doc.get('run_id')} has no model to compare; give {flag}")
    if label not in _labels(doc):
        raise ForgetuiError(f"run {doc.get('run_id')} has no model {label} ({flag}); it has: "
                            f"{', '.join(_labels(doc)) or 'none'}")
    return label


def run_compare(runs: list[str], model_a: str | None, model_b: str | None, as_json: bool = False,
                out: TextIO | None = None) -> int:
    """Compare two runs, or two models of one run; print text or JSON."""
    from .report.compare import compare_models, compare_text, pick_models

    out = out or sys.stdout
    if len(runs) not in (1, 2):
        raise ForgetuiError("compare takes RUN_A RUN_B, or one RUN with --model-a and --model-b")
    store = RunStore(locations().runs_dir)
    docs = [store.load_run(r) for r in runs]
    doc_a, doc_b = docs[0], docs[-1]
    if len(docs) == 1:
        if not model_a or not model_b:
            raise ForgetuiError("two models of one run need both --model-a and --model-b "
                                f"(run {runs[0]} has: {', '.join(_labels(doc_a)) or 'none'})")
    else:
        picked_a, picked_b = pick_models(doc_a, doc_b)
        model_a = model_a or (model_b if model_b in _labels(doc_a) else picked_a)
        model_b = model_b or (model_a if model_a in _labels(doc_b) else picked_b)
    result = compare_models(doc_a, _check(doc_a, model_a, "--model-a"), doc_b,
                            _check(doc_b, model_b, "--model-b"))
    print(json.dumps(result, indent=2, default=str) if as_json else compare_text(result), file=out)
    return int(ExitCode.OK)


def run_recommend(runs: list[str], job: str, as_json: bool = False, out: TextIO | None = None) -> int:
    """Rank the models of the given runs for a job; ``weights`` prints the job table."""
    from .report.recommend import JOBS, recommend, recommend_text, weights_text

    out = out or sys.stdout
    if job == "weights":
        print(json.dumps(JOBS, indent=2) if as_json else weights_text(), file=out)
        return int(ExitCode.OK)
    if job not in JOBS:
        raise ForgetuiError(f"unknown job {job}; one of {', '.join(JOBS)}, or weights")
    if not runs:
        raise ForgetuiError("recommend needs at least one RUN (see 'forgetui runs')")
    store = RunStore(locations().runs_dir)
    result = recommend([store.load_run(r) for r in runs], job)
    print(json.dumps(result, indent=2, default=str) if as_json else recommend_text(result), file=out)
    return int(ExitCode.OK)
