"""Grading: turn a model's response into a Verdict.

``extract`` finds the gradable part (code, final answer) in a response; ``exec_grader`` runs code
with the case's tests in the sandbox; ``verdict`` is the shared result type. Extraction is pure and
importable anywhere; the execution grader imports ``forgetui.sandbox``.
"""

from __future__ import annotations

from .exec_grader import ExecSpec, build_program, grade_exec, new_sentinel
from .extract import (
    CodeBlock,
    Extraction,
    extract_code,
    fenced_blocks,
    final_answer,
    normalize_language,
    strip_preamble,
    strip_reasoning,
)
from .verdict import STATUSES, Verdict

__all__ = [
    "STATUSES",
    "CodeBlock",
    "ExecSpec",
    "Extraction",
    "Verdict",
    "build_program",
    "extract_code",
    "fenced_blocks",
    "final_answer",
    "grade_exec",
    "new_sentinel",
    "normalize_language",
    "strip_preamble",
    "strip_reasoning",
]
