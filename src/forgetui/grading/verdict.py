"""The outcome of grading one response: a status, one readable reason, and the evidence.

``fail`` means the model got it wrong; ``error`` means the grading itself broke (a bad case, the
sandbox crashing) and says nothing about the model; ``skipped`` means the case could not be graded
here at all (no sandbox on this machine). Keeping the last two apart from ``fail`` is what stops an
infrastructure problem from showing up as a worse model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Every status a verdict can have.
STATUSES = ("pass", "fail", "error", "skipped")


@dataclass(frozen=True)
class Verdict:
    """One graded response.

    ``reason`` is a single line a person understands ("NameError: name 'x' is not defined");
    ``details`` holds what it was decided from (the extracted answer, the expected one, the
    sandbox's output) so a reviewer can tell an extraction failure from a wrong answer.
    """

    status: str  # "pass" | "fail" | "error" | "skipped"
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")
        # A reason is shown on one line in tables; a multi-line reason would break them.
        object.__setattr__(self, "reason", " ".join(str(self.reason).split()))

    @classmethod
    def passed(cls, reason: str = "passed", details: Mapping[str, Any] | None = None) -> Verdict:
        """The answer is right."""
        return cls("pass", reason, dict(details or {}))

    @classmethod
    def failed(cls, reason: str, details: Mapping[str, Any] | None = None) -> Verdict:
        """The answer is wrong, missing or misbehaved; the model is to blame."""
        return cls("fail", reason, dict(details or {}))

    @classmethod
    def error(cls, reason: str, details: Mapping[str, Any] | None = None) -> Verdict:
        """Grading broke (bad case, sandbox failure); the model is not to blame."""
        return cls("error", reason, dict(details or {}))

    @classmethod
    def skipped(cls, reason: str, details: Mapping[str, Any] | None = None) -> Verdict:
        """The case cannot be graded here (e.g. no sandbox); it counts as n/a, not as a failure."""
        return cls("skipped", reason, dict(details or {}))

    @property
    def ok(self) -> bool:
        """True only for a pass."""
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for run files)."""
        return {"status": self.status, "reason": self.reason, "details": dict(self.details)}
