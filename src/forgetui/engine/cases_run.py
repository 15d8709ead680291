"""Ability cases for one model: ask each selected case, grade the answer, store the verdict.

Cases of one model run concurrently up to the provider's ``concurrency`` (speed runs never do).
A request that failed (connection, HTTP, stall) is an ``error`` with the client's reason, never a
``fail``: the model was not wrong, the server was. Each case result is appended to the run's
records (fsynced) before it is reported, like speed requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Awaitable, Callable

from ..cases.schema import Case
from ..grading import registry
from ..grading.judge import judge_case
from ..profile import Target
from . import recovery
from .repeats import attempt_key, unpack
from .client import ChatRequest, StreamClient, StreamProgress
from .control import RunStopped
from .events import CaseFinished, RequestStarted
from .limiter import account_case, limited_client
from .metrics import NS
from .rundoc import SCHEMA_VERSION, now_iso


def _follow_up(request: ChatRequest, result: Any, scripted: dict[str, Any]) -> ChatRequest:
    """The next turn: the assistant's calls and one tool message per call with its scripted result."""
    calls = [c.as_dict() for c in result.acc.tool_calls]
    messages = list(request.messages)
    messages.append({
        "role": "assistant",
        "content": result.acc.content or None,
        "tool_calls": [{"id": c["id"] or f"call_{i}", "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(calls)],
    })
    for i, call in enumerate(calls):
        content = scripted.get(call["name"], {"error": f"unknown tool {call['name']}"})
        messages.append({"role": "tool", "tool_call_id": call["id"] or f"call_{i}",
                         "content": content if isinstance(content, str) else json.dumps(content)})
    return dataclasses.replace(request, messages=messages)


def case_key(model: str, case_id: str) -> str:
    return f"{model}|case|{case_id}"


class CaseRunner:
    """Runs the cases of one target and writes one ``case_result`` record per case."""

    def __init__(self, *, client: StreamClient, dialect: Any, target: Target, sandbox: Any,
                 append: Callable[[dict[str, Any]], dict[str, Any]], emit: Callable[[Any], None],
                 counter: Callable[[], int], total: int, max_tokens_cap: int | None = None,
                 checkpoint: Callable[[], Awaitable[None]] | None = None, judge: Any = None) -> None:
        self.client = limited_client(client, target, dialect, emit)  # 429: wait, lower concurrency, resend
        self.dialect = dialect
        self.target = target
        self.sandbox = sandbox
        self.append = append
        self.emit = emit
        self.counter = counter
        self.total = total
        self.max_tokens_cap = max_tokens_cap
        self.checkpoint = checkpoint
        self.judge = judge  # grading.judge.JudgeGate, or None: judged cases stay skipped

    async def run(self, cases: list[Case]) -> None:
        gate = self.client.gate  # the provider's adaptive limiter (engine/limiter.py)

        stopped = False

        async def one(case: Case) -> None:
            nonlocal stopped
            async with gate:
                if self.checkpoint is not None:
                    try:
                        await self.checkpoint()
                    except RunStopped:
                        # Let the cases already in flight finish; skip the ones not started.
                        stopped = True
                        return
                await self.run_case(case)

        await asyncio.gather(*(one(case) for case in cases))
        if stopped:
            raise RunStopped()

    async def run_case(self, case: Case) -> None:
        case, repeat = unpack(case)  # an engine.repeats.Attempt when the profile asks k > 1 times
        prov = self.target.provider
        request = ChatRequest(
            base_url=prov.base_url, model=self.target.model_id, messages=case.chat_messages(),
            max_tokens=min(case.max_tokens, self.max_tokens_cap or case.max_tokens), temperature=0.0, extra_body=dict(prov.extra_body),
            api_key=prov.api_key(),
        )
        if case.grader_kind == "tool_calls":
            request.extra_body.setdefault("tools", case.params.tools)
        plain = request  # before the dialect reshapes it (Ollama builds its own body from messages)
        request = self.dialect.prepare(plain, "case")
        progress = StreamProgress()
        index = self.counter()
        self.emit(RequestStarted(self.target.label, "case", case.id, repeat or 0, index, self.total, progress))
        result = await self.client.chat_stream(request, progress)
        await self.dialect.finalize(request, result)
        all_calls = [c.as_dict() for c in result.acc.tool_calls]
        steps = 1
        scripted = getattr(case.params, "results", None) if case.grader_kind == "tool_calls" else None
        while scripted and result.ok and result.acc.tool_calls and steps < case.params.max_steps:
            # Multi-step tool case: send the scripted results back and let the model go on.
            plain = _follow_up(plain, result, scripted)
            request = self.dialect.prepare(plain, "case")
            result = await self.client.chat_stream(request, progress)
            await self.dialect.finalize(request, result)
            all_calls += [c.as_dict() for c in result.acc.tool_calls]
            steps += 1
        # A thinking model that spent its whole budget thinking: ask once more with thinking off.
        redo = await recovery.reask_if_lost(self.dialect, plain, request, result,
                                            lambda req: self.client.chat_stream(req, progress),
                                            self.emit, self.target.label, case.id)
        if redo is not None:
            request, result = redo.request, redo.result
            all_calls += [c.as_dict() for c in result.acc.tool_calls]
        acc = result.acc
        usage = acc.usage or {}
        details_tokens = usage.get("completion_tokens_details") or {}
        if result.outcome == "finished" or (result.outcome == "truncated" and acc.finish_reason):
            verdict = await registry.grade(
                case.grader_kind, case.params, acc.content,
                finish_reason=acc.finish_reason,
                completion_tokens=usage.get("completion_tokens"),
                reasoning_tokens=details_tokens.get("reasoning_tokens"),
                sandbox=self.sandbox,
                tool_calls=all_calls,
            )
            if case.grader_kind == "judge":
                verdict = await judge_case(self.judge, case, verdict)
            status, reason, details = verdict.status, verdict.reason, dict(verdict.details)
        else:
            status, reason, details = "error", f"request failed: {result.outcome}: {result.error}", {}
        t0 = result.t_sent_ns
        record = {
            "schema_version": SCHEMA_VERSION,
            "kind": "case_result",
            "key": attempt_key(self.target.label, case.id, repeat),
            "counted": True,
            "ts": now_iso(),
            "model": self.target.label,
            "case": {
                "case_id": case.id,
                "category": case.category,
                "hard": case.hard,
                "tags": case.tags,
                "grader": case.grader_kind,
                "status": status,
                "reason": reason,
                "prompt": request.messages,
                "response": acc.content,
                "reasoning": acc.reasoning,
                "tool_calls": all_calls,
                "steps": steps,
                "extracted": details.pop("extracted", None),
                "expected": details.pop("expected", None),
                "details": details,
                "usage": acc.usage,
                "timings": acc.timings,
                "response_id": acc.response_id,
                "finish_reason": acc.finish_reason,
                "outcome": result.outcome,
                "error": result.error,
                "ttft_s": (acc.t_first_token_ns - t0) / NS if t0 and acc.t_first_token_ns else None,
                "e2e_s": (acc.t_last_token_ns - t0) / NS if t0 and acc.t_last_token_ns else None,
            },
        }
        if repeat is not None:
            record["case"]["repeat"] = repeat
        if redo is not None:
            redo.annotate(record["case"])
        account_case(record, prov)  # tokens, cost_usd, rate_limited
        stored = self.append(record)
        self.emit(CaseFinished(self.target.label, case.id, index, self.total, stored))
