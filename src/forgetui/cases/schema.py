"""What one case is. Cases are data (TOML under cases/), reviewed by people, verified by code.

A case file holds one or more ``[[case]]`` tables::

    [[case]]
    id = "quick.code.median"          # stable, unique, [a-z0-9._-]
    category = "coding"               # coding, math, reasoning, tooluse, injection, longctx, instruct, agent, chat
    hard = false
    tags = ["ability"]
    sets = ["quick"]                  # named sets a profile can select
    prompt = '''...'''                # or messages = [{ role = "user", content = "..." }]
    max_tokens = 2048
    [case.grader]
    kind = "exec"                     # see forgetui.grading.registry
    ...                               # the grader's parameters
    [case.verify]
    reference = '''a full answer that must pass'''
    wrong = ['''answers that must fail''']
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CATEGORIES = ("coding", "math", "reasoning", "tooluse", "injection", "longctx", "instruct", "agent", "chat")
Category = Literal["coding", "math", "reasoning", "tooluse", "injection", "longctx", "instruct", "agent", "chat"]
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,119}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class VerifySection(_Strict):
    """What ``forgetui cases verify`` needs to prove the case is right."""

    reference: str | None = Field(default=None, description="A full model-style answer that must pass.")
    wrong: list[str] = Field(default_factory=list, description="Answers that must fail (the tests' teeth).")
    brute_force: str | None = Field(
        default=None, description="Python that prints the expected answer, re-derived independently."
    )
    reference_calls: list[dict[str, Any]] | None = Field(
        default=None, description="Tool cases: the calls of the reference answer ({name, arguments})."
    )
    wrong_calls: list[list[dict[str, Any]]] = Field(
        default_factory=list, description="Tool cases: call lists that must fail."
    )


class Case(_Strict):
    """One case. ``grader`` holds the grader's kind and parameters, validated by the registry."""

    id: str
    category: Category
    hard: bool = False
    title: str = ""
    tags: list[str] = Field(default_factory=list)
    sets: list[str] = Field(default_factory=list)
    system: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    max_tokens: int = Field(default=2048, ge=1, le=200_000)
    generate: dict[str, Any] | None = None  # long-context recipe (cases/longctx.py); fills prompt and answer
    grader: dict[str, Any]
    verify: VerifySection = Field(default_factory=VerifySection)

    # Filled in by the loader (not written in files).
    source: str = Field(default="", exclude=True)
    line: int | None = Field(default=None, exclude=True)
    params: Any = Field(default=None, exclude=True)
    generated: Any = Field(default=None, exclude=True)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-' (at most 120)")
        return value

    @model_validator(mode="after")
    def _one_prompt(self) -> "Case":
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        if not isinstance(self.grader.get("kind"), str):
            raise ValueError("grader.kind is required")
        return self

    @property
    def grader_kind(self) -> str:
        return str(self.grader["kind"])

    def chat_messages(self) -> list[dict[str, str]]:
        """The messages to send."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        if self.messages is not None:
            out += [m.model_dump() for m in self.messages]
        else:
            out.append({"role": "user", "content": self.prompt or ""})
        return out

    def in_sets(self) -> set[str]:
        """Named sets, plus the implied ones: its category and "full"."""
        return {*self.sets, self.category, "full"}
