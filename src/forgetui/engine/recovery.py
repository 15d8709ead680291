"""Thinking models that lose their answer: see it, ask once more with thinking off, keep both.

A reasoning model can spend its whole token budget thinking and end with no visible answer:
nothing in ``content``, no tool call, reasoning present, and ``finish_reason`` "length" (or a stream
cut at the token cap). Grading that as a plain fail says nothing about what the model knows, so the
case is asked again, the same messages and budget, with the model's thinking switched off by the
server's own switch (:meth:`Dialect.no_thinking`): ``chat_template_kwargs.enable_thinking=false``
for llama.cpp, vLLM and SGLang, ``think: false`` for Ollama, ``reasoning_effort`` for hosted
OpenAI-style APIs. Where the server documents no switch (LM Studio's OpenAI endpoint,
llama-cpp-python), or the switch is already set and the model thought anyway, the Qwen3-style soft
switch is used instead: ``/no_think`` appended to the last user message.

Both attempts are kept: the first goes into ``case["attempts"]`` and the final fields are the
re-ask's, with ``recovered: true`` and ``recovery: {switch, first_finish, first_reasoning_tokens}``.
A re-ask that fails too is graded like any answer (it fails or errors with its own reason).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from .client import ChatRequest, StreamResult
from .events import Notice

NO_THINK_TAG = "/no_think"
#: The ``recovery.switch`` recorded when the prompt tag was used.
TAG_SWITCH = "prompt tag /no_think"


def reasoning_tokens(result: StreamResult) -> int | None:
    """The server's count of reasoning tokens (``usage.completion_tokens_details``), if it gave one."""
    details = (result.acc.usage or {}).get("completion_tokens_details") or {}
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) else None


def lost_answer(request: ChatRequest, result: StreamResult) -> bool:
    """True when the model thought and then had no budget left to answer.

    No visible content and no tool call, some reasoning (text or a reasoning-token count), and
    either ``finish_reason`` "length" or a stream that ended without a finish reason after using
    the whole ``max_tokens``. Connection failures and answers that stop on their own are not it.
    """
    acc = result.acc
    if acc.content.strip() or acc.tool_calls:
        return False
    if not (acc.reasoning.strip() or reasoning_tokens(result)):
        return False
    if acc.finish_reason == "length":
        return True
    used = (acc.usage or {}).get("completion_tokens")
    return result.outcome == "truncated" and isinstance(used, int) and used >= request.max_tokens


def with_no_think_tag(request: ChatRequest) -> ChatRequest:
    """The request with ``/no_think`` appended to its last user message (Qwen3's documented soft
    switch; other models read it as a harmless line of text)."""
    messages = [dict(m) for m in request.messages]
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [*content, {"type": "text", "text": NO_THINK_TAG}]
        else:
            message["content"] = f"{content or ''}\n{NO_THINK_TAG}".lstrip("\n")
        break
    else:
        messages.append({"role": "user", "content": NO_THINK_TAG})
    return dataclasses.replace(request, messages=messages)


def thinking_off(dialect: Any, plain: ChatRequest) -> tuple[ChatRequest, str]:
    """The request with thinking switched off, and the switch used, in words.

    The dialect's documented switch when it has one and it changes the request; otherwise (no
    switch, or the provider's ``extra_body`` already sets it and the model still thought) the
    prompt tag."""
    switched = dialect.no_thinking(plain) if hasattr(dialect, "no_thinking") else None
    if switched is not None and switched.extra_body != plain.extra_body:
        return switched, dialect.thinking_switch or "server switch"
    return with_no_think_tag(plain), TAG_SWITCH


def attempt_record(result: StreamResult, reason: str) -> dict[str, Any]:
    """One earlier attempt, in the shape of ``case["attempts"][i]`` (docs/results-format.md)."""
    acc = result.acc
    return {
        "outcome": result.outcome,
        "error": result.error,
        "finish_reason": acc.finish_reason,
        "response": acc.content,
        "reasoning": acc.reasoning,
        "usage": acc.usage,
        "reason": reason,
    }


@dataclass
class Recovery:
    """A re-ask with thinking off: the request and result that replace the lost answer."""

    request: ChatRequest
    result: StreamResult
    first: dict[str, Any]  # the lost attempt, as an ``attempts`` entry
    info: dict[str, Any]  # ``case["recovery"]``

    def annotate(self, case: dict[str, Any]) -> None:
        """Add ``attempts``, ``recovered`` and ``recovery`` to a case record's ``case`` dict."""
        case["attempts"] = [*(case.get("attempts") or []), self.first]
        case["recovered"] = True
        case["recovery"] = self.info


async def reask_if_lost(dialect: Any, plain: ChatRequest, request: ChatRequest, result: StreamResult,
                        ask: Callable[[ChatRequest], Awaitable[StreamResult]],
                        emit: Callable[[Any], None] | None = None, model: str | None = None,
                        case_id: str = "") -> Recovery | None:
    """None when the answer was not lost; else ask again with thinking off and return both.

    ``plain`` is the request before ``dialect.prepare`` (the switch is applied to it and the
    result prepared again), ``request``/``result`` the attempt that lost its answer, ``ask`` sends
    a prepared request (the caller's own client, so its limits and retries apply).
    """
    if not lost_answer(request, result):
        return None
    first_reasoning = reasoning_tokens(result)
    used = (result.acc.usage or {}).get("completion_tokens")
    switched, switch = thinking_off(dialect, plain)
    spent = f"{used} tokens" if used is not None else "the whole budget"
    if first_reasoning is not None:
        spent += f" ({first_reasoning} reasoning)"
    reason = (f"no visible answer: thinking used {spent}, finish {result.acc.finish_reason or result.outcome}; "
              f"asked again with thinking off ({switch})")
    if emit is not None:
        emit(Notice("info", f"{case_id}: {reason}", model))
    again = dialect.prepare(switched, "case")
    redo = await ask(again)
    await dialect.finalize(again, redo)
    info = {"switch": switch, "first_finish": result.acc.finish_reason, "first_outcome": result.outcome,
            "first_reasoning_tokens": first_reasoning, "first_completion_tokens": used}
    return Recovery(request=again, result=redo, first=attempt_record(result, reason), info=info)
