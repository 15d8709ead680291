"""Turn decoded SSE events of an OpenAI-style chat stream into one response.

Real servers differ in small ways that break naive clients (see research notes, part B3): the role
chunk has ``content: null``, usage arrives in a final chunk with ``choices: []`` (sometimes unasked),
reasoning comes as ``reasoning_content``, ``reasoning`` or inline ``<think>`` tags, tool calls arrive
as fragments keyed by index (sometimes without one), and errors can arrive inside a 200 stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .sse import SSEEvent

_OPEN, _CLOSE = "<think>", "</think>"


class ThinkSplitter:
    """Moves a leading ``<think>...</think>`` block out of content, across chunk boundaries."""

    def __init__(self) -> None:
        self._state = "start"  # start -> (thinking ->) content
        self._held = ""

    @property
    def thinking(self) -> bool:
        """Inside a think block: held-back text is reasoning, not yet-undecided text."""
        return self._state == "thinking"

    def feed(self, text: str) -> tuple[str, str]:
        """Return (reasoning, content) for this piece; a possible partial tag is held back."""
        text = self._held + text
        self._held = ""
        reasoning = content = ""
        while text:
            if self._state == "start":
                stripped = text.lstrip()
                if stripped.startswith(_OPEN):
                    self._state = "thinking"
                    text = stripped[len(_OPEN):]
                elif _OPEN.startswith(stripped):  # could still become "<think>"
                    self._held = text
                    return reasoning, content
                else:
                    self._state = "content"
            elif self._state == "thinking":
                end = text.find(_CLOSE)
                if end >= 0:
                    reasoning += text[:end]
                    text = text[end + len(_CLOSE):]
                    self._state = "content"
                    continue
                keep = _partial_suffix(text, _CLOSE)
                reasoning += text[: len(text) - keep]
                self._held = text[len(text) - keep:]
                return reasoning, content
            else:
                content += text
                text = ""
        return reasoning, content

    def flush(self) -> tuple[str, str]:
        """End of stream: whatever was held back is returned as what it most likely was."""
        held, self._held = self._held, ""
        return (held, "") if self._state == "thinking" else ("", held)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


@dataclass
class ToolCallBuilder:
    """One tool call assembled from fragments."""

    index: int
    id: str | None = None
    type: str = "function"
    name: str = ""
    arguments: str = ""

    def as_dict(self) -> dict[str, Any]:
        parsed: Any
        try:
            parsed = json.loads(self.arguments) if self.arguments else {}
        except json.JSONDecodeError:
            parsed = None  # kept raw below; graders decide what a bad argument string means
        return {
            "index": self.index,
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "arguments": self.arguments,
            "arguments_parsed": parsed,
        }


@dataclass
class Accumulated:
    """Everything a stream said, plus the times (perf_counter_ns) at which it said it."""

    response_id: str | None = None
    # Text arrives in thousands of small pieces; ``str +=`` on an attribute copies the whole string
    # each time (quadratic for long answers), so pieces are kept and joined when read.
    content_parts: list[str] = field(default_factory=list, repr=False)
    reasoning_parts: list[str] = field(default_factory=list, repr=False)
    content_chars: int = 0
    reasoning_chars: int = 0
    tool_calls: list[ToolCallBuilder] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    server_error: str | None = None
    #: Server-specific extras kept raw (LM Studio "stats", "model_info", "runtime"; Ollama's
    #: native durations) for dialects to interpret after the stream.
    native: dict[str, Any] = field(default_factory=dict)
    done: bool = False  # saw [DONE] (or Ollama's "done": true)
    data_events: int = 0  # events with data that parsed
    token_events: int = 0  # events that carried generated text or tool-call fragments
    malformed: list[str] = field(default_factory=list)
    t_first_event_ns: int | None = None
    t_first_token_ns: int | None = None
    t_first_reasoning_ns: int | None = None
    t_first_content_ns: int | None = None
    t_last_token_ns: int | None = None

    @property
    def content(self) -> str:
        return _joined(self.content_parts)

    @property
    def reasoning(self) -> str:
        return _joined(self.reasoning_parts)

    def add_content(self, text: str) -> None:
        self.content_parts.append(text)
        self.content_chars += len(text)

    def add_reasoning(self, text: str) -> None:
        self.reasoning_parts.append(text)
        self.reasoning_chars += len(text)

    @property
    def ended_cleanly(self) -> bool:
        return self.finish_reason is not None and self.server_error is None


def _joined(parts: list[str]) -> str:
    """Join in place, so repeated reads while streaming stay cheap."""
    if len(parts) > 1:
        parts[:] = ["".join(parts)]
    return parts[0] if parts else ""


class ChatAccumulator:
    """Feeds SSE events (with the time their network read arrived) into an ``Accumulated``."""

    def __init__(self, split_think: bool = True) -> None:
        self.result = Accumulated()
        self._think = ThinkSplitter() if split_think else None
        # Time of a token event whose text the splitter held back before knowing whether it opens
        # a think block; it becomes the first reasoning or first content time once decided.
        self._pending_ns: int | None = None

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        """Process one event. Sets ``result.done`` on ``[DONE]``."""
        data = event.data
        if not data.strip():
            return  # relay keep-alive frames: liveness only
        if data.strip() == "[DONE]":
            self.result.done = True
            return
        r = self.result
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            if event.event == "error":  # `event: error` with a plain-text message
                r.t_first_event_ns = r.t_first_event_ns or now_ns
                r.server_error = data.strip()[:500]
            else:
                r.malformed.append(data[:200])
            return
        r.data_events += 1
        if r.t_first_event_ns is None:
            r.t_first_event_ns = now_ns
        if event.event == "error" or chunk.get("error"):
            err = chunk.get("error", chunk)
            message = err.get("message") if isinstance(err, dict) else str(err)
            r.server_error = str(message or err)[:500]
            return
        if chunk.get("id") and r.response_id is None:
            r.response_id = str(chunk["id"])
        if isinstance(chunk.get("usage"), dict):
            r.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            r.timings = chunk["timings"]
        for key in ("stats", "model_info", "runtime", "system_fingerprint"):
            if chunk.get(key):
                r.native[key] = chunk[key]
        if "done" in chunk and "choices" not in chunk and (
            isinstance(chunk.get("message"), dict) or "eval_count" in chunk or "done_reason" in chunk
        ):
            self._ollama_chunk(chunk, now_ns)
            return
        choices = chunk.get("choices") or []
        if not isinstance(choices, list) or not choices:
            return
        choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            return
        delta = choice.get("delta") or choice.get("message") or {}
        got_reasoning = got_content = held = False
        for key in ("reasoning_content", "reasoning", "thinking"):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                r.add_reasoning(piece)
                got_reasoning = True
        piece = delta.get("content")
        if isinstance(piece, str) and piece:
            was_thinking = self._think is not None and self._think.thinking
            if self._think is not None:
                thought, said = self._think.feed(piece)
            else:
                thought, said = "", piece
            if thought:
                r.add_reasoning(thought)
                got_reasoning = True
            if said:
                r.add_content(said)
                got_content = True
            if not thought and not said:
                # Tokens did arrive; a partial "</think>" inside a think block is reasoning,
                # anything else held back is undecided until the next piece.
                if was_thinking:
                    got_reasoning = True
                else:
                    held = True
        if isinstance(delta.get("tool_calls"), list) and delta["tool_calls"]:
            self._tool_fragments(delta["tool_calls"])
            got_content = True
        if got_reasoning or got_content or held:
            r.token_events += 1
            if r.t_first_token_ns is None:
                r.t_first_token_ns = now_ns
            if held and self._pending_ns is None:
                self._pending_ns = now_ns
            self._mark_first(got_reasoning, got_content, now_ns)
            r.t_last_token_ns = now_ns
        if choice.get("finish_reason"):
            r.finish_reason = str(choice["finish_reason"])

    def _ollama_chunk(self, chunk: dict[str, Any], now_ns: int) -> None:
        """Ollama's native /api/chat line: message.content/thinking/tool_calls, then done + stats."""
        r = self.result
        message = chunk.get("message") if isinstance(chunk.get("message"), dict) else {}
        got_reasoning = got_content = False
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            r.add_reasoning(message["thinking"])
            got_reasoning = True
        if isinstance(message.get("content"), str) and message["content"]:
            r.add_content(message["content"])
            got_content = True
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            args = fn.get("arguments")
            builder = ToolCallBuilder(index=len(r.tool_calls), id=call.get("id"), name=str(fn.get("name") or ""))
            builder.arguments = args if isinstance(args, str) else json.dumps(args or {})
            r.tool_calls.append(builder)
            got_content = True
        if got_reasoning or got_content:
            r.token_events += 1
            if r.t_first_token_ns is None:
                r.t_first_token_ns = now_ns
            self._mark_first(got_reasoning, got_content, now_ns)
            r.t_last_token_ns = now_ns
        if chunk.get("done"):
            r.done = True
            r.finish_reason = str(chunk.get("done_reason") or "stop")
            prompt_n, eval_n = chunk.get("prompt_eval_count"), chunk.get("eval_count")
            if isinstance(eval_n, int):
                r.usage = {"prompt_tokens": prompt_n if isinstance(prompt_n, int) else None,
                           "completion_tokens": eval_n}
            r.native["ollama"] = {k: v for k, v in chunk.items() if k.endswith(("_count", "_duration"))}

    def _mark_first(self, reasoning: bool, content: bool, now_ns: int) -> None:
        r = self.result
        first_r = first_c = now_ns
        if self._pending_ns is not None and (reasoning or content):
            # The held-back text went wherever the first decided text goes.
            if reasoning:
                first_r = self._pending_ns
            else:
                first_c = self._pending_ns
            self._pending_ns = None
        if reasoning and r.t_first_reasoning_ns is None:
            r.t_first_reasoning_ns = first_r
        if content and r.t_first_content_ns is None:
            r.t_first_content_ns = first_c

    def finish(self) -> Accumulated:
        """End of stream: flush held-back text."""
        if self._think is not None:
            thought, said = self._think.flush()
            self.result.add_reasoning(thought)
            self.result.add_content(said)
            if self._pending_ns is not None:
                self._mark_first(bool(thought), bool(said) and not thought, self._pending_ns)
        return self.result

    def _tool_fragments(self, fragments: list[Any]) -> None:
        calls = self.result.tool_calls
        for frag in fragments:
            if not isinstance(frag, dict):
                continue
            index = frag.get("index")
            call: ToolCallBuilder | None = None
            if frag.get("id") and not any(c.id == frag["id"] for c in calls):
                # A new id is a new call even when the index repeats or is missing.
                call = ToolCallBuilder(index=index if isinstance(index, int) else len(calls))
                call.id = str(frag["id"])
                calls.append(call)
            elif isinstance(index, int):
                call = next((c for c in reversed(calls) if c.index == index), None)
                if call is None:
                    call = ToolCallBuilder(index=index)
                    calls.append(call)
            elif frag.get("id"):
                call = next(c for c in calls if c.id == frag["id"])
            elif calls:
                call = calls[-1]  # no id, no index: continues the current call
            else:
                call = ToolCallBuilder(index=0)
                calls.append(call)
            fn = frag.get("function") or {}
            if frag.get("type"):
                call.type = str(frag["type"])
            if isinstance(fn.get("name"), str) and fn["name"] and not call.name:
                call.name = fn["name"]
            if isinstance(fn.get("arguments"), str):
                call.arguments += fn["arguments"]
