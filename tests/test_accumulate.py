"""Tests for forgetui.engine.accumulate (research notes B3 / B5).

Every stream is a list of chunks (dicts are JSON-encoded, strings are sent as raw data) fed with
fake, strictly increasing nanosecond timestamps: event ``i`` arrives at ``T0 + i * STEP``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from forgetui.engine.accumulate import Accumulated, ChatAccumulator, ThinkSplitter
from forgetui.engine.sse import SSEEvent

T0 = 1_000_000
STEP = 1_000


def t(i: int) -> int:
    """Timestamp of the i-th event fed by ``run``."""
    return T0 + i * STEP


def ev(chunk: Any, event: str = "message") -> SSEEvent:
    return SSEEvent(data=chunk if isinstance(chunk, str) else json.dumps(chunk), event=event)


def run(items: list[Any], split_think: bool = True) -> Accumulated:
    acc = ChatAccumulator(split_think=split_think)
    for i, item in enumerate(items):
        acc.on_event(item if isinstance(item, SSEEvent) else ev(item), t(i))
    return acc.finish()


def delta(finish: str | None = None, index: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": fields, "finish_reason": finish}],
    }


def content(text: str | None) -> dict[str, Any]:
    return delta(content=text)


ROLE = delta(role="assistant", content=None)


def tc(**frag: Any) -> dict[str, Any]:
    return delta(tool_calls=[frag])


# --------------------------------------------------------------------------- basics


def test_role_chunk_with_null_content_is_not_a_token_event() -> None:
    r = run([ROLE])
    assert r.data_events == 1
    assert r.t_first_event_ns == t(0)
    assert r.t_first_token_ns is None
    assert r.t_first_content_ns is None
    assert r.t_first_reasoning_ns is None
    assert r.t_last_token_ns is None
    assert r.token_events == 0
    assert r.content == ""


def test_role_chunk_then_content_timestamps() -> None:
    r = run([ROLE, content("Hello"), content(" world"), delta(finish="stop")])
    assert r.content == "Hello world"
    assert r.t_first_event_ns == t(0)
    assert r.t_first_token_ns == t(1)
    assert r.t_first_content_ns == t(1)
    assert r.t_last_token_ns == t(2)
    assert r.t_first_reasoning_ns is None
    assert r.token_events == 2
    assert r.data_events == 4
    assert r.finish_reason == "stop"
    assert r.ended_cleanly


def test_empty_string_content_is_not_a_token() -> None:
    r = run([ROLE, content(""), content("x")])
    assert r.token_events == 1
    assert r.t_first_token_ns == t(2)


def test_single_space_is_a_real_token() -> None:
    r = run([ROLE, content(" "), delta(finish="stop")])
    assert r.content == " "
    assert r.token_events == 1
    assert r.t_first_token_ns == t(1)
    assert r.t_last_token_ns == t(1)


def test_single_space_is_content_without_think_splitting() -> None:
    r = run([ROLE, content(" "), content("Hi")], split_think=False)
    assert r.content == " Hi"
    assert r.token_events == 2
    assert r.t_first_token_ns == t(1)
    assert r.t_first_content_ns == t(1)
    assert r.t_first_reasoning_ns is None


def test_leading_space_then_text_is_content() -> None:
    r = run([ROLE, content(" "), content("Hi")])
    assert r.content == " Hi"
    assert r.reasoning == ""
    assert r.token_events == 2
    assert r.t_first_token_ns == t(1)


def test_held_back_leading_space_is_not_timed_as_reasoning() -> None:
    r = run([ROLE, content(" "), content("Hi"), delta(finish="stop")])
    assert r.reasoning == ""
    assert r.t_first_reasoning_ns is None


def test_held_back_angle_bracket_is_not_timed_as_reasoning() -> None:
    r = run([ROLE, content("<"), content("b>bold</b>")])
    assert r.content == "<b>bold</b>"
    assert r.t_first_reasoning_ns is None


def test_usage_only_final_chunk_and_null_usage() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    chunks: list[Any] = [
        {**ROLE, "usage": None},
        {**content("a"), "usage": None},
        {**content("bc"), "usage": None},
        {**delta(finish="stop"), "usage": None},
        {"id": "chatcmpl-1", "choices": [], "usage": usage},
        "[DONE]",
    ]
    r = run(chunks)
    assert r.usage == usage
    assert r.content == "abc"
    assert r.token_events == 2
    assert r.t_last_token_ns == t(2)  # the usage chunk is not a token event
    assert r.finish_reason == "stop"
    assert r.done
    assert r.data_events == 5
    assert r.malformed == []


def test_null_usage_after_usage_does_not_erase_it() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1}
    r = run([{**content("a"), "usage": usage}, {**delta(finish="stop"), "usage": None}])
    assert r.usage == usage


def test_choices_missing_or_null() -> None:
    r = run([{"id": "x"}, {"id": "x", "choices": None}, content("ok")])
    assert r.content == "ok"
    assert r.data_events == 3
    assert r.token_events == 1


def test_done_marker() -> None:
    r = run([content("x"), "[DONE]"])
    assert r.done
    assert r.data_events == 1  # [DONE] is not a data event
    assert r.malformed == []


def test_done_marker_with_surrounding_whitespace() -> None:
    r = run([content("x"), " [DONE] \n"])
    assert r.done
    assert r.malformed == []


def test_no_done_marker() -> None:
    r = run([content("x"), delta(finish="stop")])
    assert not r.done
    assert r.ended_cleanly


@pytest.mark.parametrize("data", ["", "\n", "   "])
def test_empty_data_keepalive_is_ignored(data: str) -> None:
    r = run([SSEEvent(data=data), content("a"), SSEEvent(data=data), content("b")])
    assert r.content == "ab"
    assert r.data_events == 2
    assert r.malformed == []
    assert r.t_first_event_ns == t(1)  # the keep-alive is not an event that parses
    assert r.t_first_token_ns == t(1)
    assert r.t_last_token_ns == t(3)


def test_keepalive_only_stream_sets_nothing() -> None:
    r = run([SSEEvent(data=""), SSEEvent(data="")])
    assert r.data_events == 0
    assert r.t_first_event_ns is None
    assert not r.done


def test_malformed_json_recorded_not_raised() -> None:
    r = run([content("a"), "{not json", content("b")])
    assert r.content == "ab"
    assert r.malformed == ["{not json"]
    assert r.data_events == 2
    assert r.token_events == 2


@pytest.mark.parametrize("data", ["[1, 2]", '"text"', "42", "null", "true"])
def test_non_object_json_recorded_as_malformed(data: str) -> None:
    r = run([data, content("a")])
    assert r.malformed == [data]
    assert r.data_events == 1
    assert r.content == "a"
    assert r.t_first_event_ns == t(1)


def test_malformed_is_truncated_to_200_chars() -> None:
    data = "{" + "x" * 500
    r = run([data])
    assert r.malformed == [data[:200]]


# --------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_fields(key: str) -> None:
    r = run(
        [
            ROLE,
            delta(**{key: "Let me", "content": ""}),
            delta(**{key: " think", "content": None}),
            content("Answer"),
            delta(finish="stop"),
        ]
    )
    assert r.reasoning == "Let me think"
    assert r.content == "Answer"
    assert r.token_events == 3
    assert r.t_first_event_ns == t(0)
    assert r.t_first_token_ns == t(1)
    assert r.t_first_reasoning_ns == t(1)
    assert r.t_first_content_ns == t(3)
    assert r.t_last_token_ns == t(3)


def test_reasoning_only_stream_never_sets_content_time() -> None:
    r = run([ROLE, delta(reasoning_content="hmm"), delta(finish="stop")])
    assert r.reasoning == "hmm"
    assert r.content == ""
    assert r.t_first_content_ns is None
    assert r.t_first_reasoning_ns == t(1)


def test_reasoning_and_content_in_one_event_sets_both_times() -> None:
    r = run([delta(reasoning="r", content="c")])
    assert r.reasoning == "r"
    assert r.content == "c"
    assert r.token_events == 1
    assert r.t_first_reasoning_ns == r.t_first_content_ns == t(0)


# --------------------------------------------------------------------------- inline <think>

THINK = "<think>abc</think>answer"


def _feed_pieces(pieces: list[str]) -> Accumulated:
    return run([ROLE, *(content(p) for p in pieces), delta(finish="stop")])


@pytest.mark.parametrize("cut", range(len(THINK) + 1))
def test_think_tags_every_two_way_split(cut: int) -> None:
    r = _feed_pieces([THINK[:cut], THINK[cut:]])
    assert (r.reasoning, r.content) == ("abc", "answer")


@pytest.mark.parametrize(
    "cuts",
    [(1, 2), (3, 9), (6, 7), (7, 10), (4, 12), (10, 14), (11, 17), (17, 18), (0, 20), (2, 23), (8, 16)],
)
def test_think_tags_three_way_split(cuts: tuple[int, int]) -> None:
    a, b = cuts
    r = _feed_pieces([THINK[:a], THINK[a:b], THINK[b:]])
    assert (r.reasoning, r.content) == ("abc", "answer")


def test_think_tags_one_char_per_chunk() -> None:
    r = _feed_pieces(list(THINK))
    assert (r.reasoning, r.content) == ("abc", "answer")
    assert r.token_events == len(THINK)


@pytest.mark.parametrize("cut", range(len(THINK) + 1))
def test_think_splitter_direct_every_split(cut: int) -> None:
    s = ThinkSplitter()
    r1, c1 = s.feed(THINK[:cut])
    r2, c2 = s.feed(THINK[cut:])
    r3, c3 = s.flush()
    assert (r1 + r2 + r3, c1 + c2 + c3) == ("abc", "answer")


def test_think_timestamps() -> None:
    r = _feed_pieces(["<think>", "abc", "</think>", "answer"])
    assert (r.reasoning, r.content) == ("abc", "answer")
    assert r.t_first_token_ns == t(1)
    assert r.t_first_reasoning_ns == t(1)
    assert r.t_first_content_ns == t(4)
    assert r.token_events == 4


@pytest.mark.parametrize("prefix", [" ", "\n", "\n\n", " \t\n"])
def test_think_after_leading_whitespace(prefix: str) -> None:
    r = _feed_pieces([prefix + THINK])
    assert (r.reasoning, r.content) == ("abc", "answer")


def test_think_after_leading_whitespace_in_own_chunk() -> None:
    r = _feed_pieces(["\n", "<thi", "nk>abc</think>answer"])
    assert (r.reasoning, r.content) == ("abc", "answer")


def test_angle_bracket_content_that_is_not_think_stays_content() -> None:
    r = _feed_pieces(["<b>bold</b>"])
    assert (r.reasoning, r.content) == ("", "<b>bold</b>")
    r = _feed_pieces(["<", "b>bold</b>"])
    assert (r.reasoning, r.content) == ("", "<b>bold</b>")
    r = _feed_pieces(["<thin", "g>"])
    assert (r.reasoning, r.content) == ("", "<thing>")


def test_close_tag_without_open_tag_stays_content() -> None:
    text = "Use the </think> tag to end reasoning."
    r = _feed_pieces([text])
    assert (r.reasoning, r.content) == ("", text)
    r = _feed_pieces(["Hello", " </think> world"])
    assert (r.reasoning, r.content) == ("", "Hello </think> world")


def test_think_later_in_content_stays_content() -> None:
    r = _feed_pieces(["Answer: ", "<think>x</think>"])
    assert (r.reasoning, r.content) == ("", "Answer: <think>x</think>")


def test_think_not_split_when_disabled() -> None:
    r = run([content(THINK)], split_think=False)
    assert (r.reasoning, r.content) == ("", THINK)


def test_unterminated_think_flushes_as_reasoning() -> None:
    r = _feed_pieces(["<think>abc</th"])
    assert (r.reasoning, r.content) == ("abc</th", "")


def test_think_splitter_flush_while_thinking_returns_reasoning() -> None:
    s = ThinkSplitter()
    assert s.feed("<think>abc</thi") == ("abc", "")
    assert s.flush() == ("</thi", "")
    assert s.flush() == ("", "")


def test_think_splitter_flush_before_decision_returns_content() -> None:
    s = ThinkSplitter()
    assert s.feed("<thi") == ("", "")
    assert s.flush() == ("", "<thi")
    s = ThinkSplitter()
    assert s.feed("  ") == ("", "")
    assert s.flush() == ("", "  ")


def test_think_splitter_flush_in_content_state_returns_nothing_held() -> None:
    s = ThinkSplitter()
    assert s.feed("<think>a</think>b") == ("a", "b")
    assert s.flush() == ("", "")


def test_think_splitter_keeps_lone_angle_in_reasoning() -> None:
    s = ThinkSplitter()
    assert s.feed("<think>a < b") == ("a < b", "")
    assert s.feed("<") == ("", "")
    assert s.feed("c</think>") == ("<c", "")
    assert s.feed("d") == ("", "d")


# --------------------------------------------------------------------------- tool calls


def _args(r: Accumulated) -> list[dict[str, Any]]:
    return [c.as_dict() for c in r.tool_calls]


def test_tool_call_id_only_on_first_fragment() -> None:
    r = run(
        [
            ROLE,
            tc(index=0, id="call_1", type="function", function={"name": "get_weather", "arguments": ""}),
            tc(index=0, function={"arguments": '{"city": '}),
            tc(index=0, function={"arguments": '"Paris"}'}),
            delta(finish="tool_calls"),
        ]
    )
    assert _args(r) == [
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "arguments_parsed": {"city": "Paris"},
        }
    ]
    assert r.finish_reason == "tool_calls"
    assert r.token_events == 3
    assert r.t_first_token_ns == t(1)
    assert r.t_first_content_ns == t(1)  # tool-call tokens count as visible output
    assert r.t_last_token_ns == t(3)


def test_tool_call_arguments_split_inside_string_escape() -> None:
    whole = json.dumps({"s": 'a"b\\c\nd\u00e9'})
    assert "\\" in whole
    cut = whole.index("\\") + 1  # split right after a backslash
    r = run(
        [
            tc(index=0, id="c1", function={"name": "f", "arguments": whole[:cut]}),
            tc(index=0, function={"arguments": whole[cut:]}),
        ]
    )
    (call,) = _args(r)
    assert call["arguments"] == whole
    assert call["arguments_parsed"] == {"s": 'a"b\\c\nd\u00e9'}


def test_tool_call_unicode_escape_split() -> None:
    r = run(
        [
            tc(index=0, id="c1", function={"name": "f", "arguments": '{"s": "\\u00'}),
            tc(index=0, function={"arguments": 'e9"}'}),
        ]
    )
    assert _args(r)[0]["arguments_parsed"] == {"s": "\u00e9"}


def test_two_tool_calls_interleaved_by_index() -> None:
    r = run(
        [
            tc(index=0, id="a", type="function", function={"name": "fa", "arguments": ""}),
            tc(index=1, id="b", type="function", function={"name": "fb", "arguments": ""}),
            tc(index=0, function={"arguments": '{"x"'}),
            tc(index=1, function={"arguments": '{"y"'}),
            tc(index=1, function={"arguments": ": 2}"}),
            tc(index=0, function={"arguments": ": 1}"}),
            delta(finish="tool_calls"),
        ]
    )
    calls = _args(r)
    assert [(c["index"], c["id"], c["name"], c["arguments_parsed"]) for c in calls] == [
        (0, "a", "fa", {"x": 1}),
        (1, "b", "fb", {"y": 2}),
    ]


def test_two_tool_calls_in_one_event() -> None:
    r = run(
        [
            delta(
                tool_calls=[
                    {"index": 0, "id": "a", "function": {"name": "fa", "arguments": "{}"}},
                    {"index": 1, "id": "b", "function": {"name": "fb", "arguments": '{"k": [1]}'}},
                ]
            )
        ]
    )
    assert [(c["name"], c["arguments_parsed"]) for c in _args(r)] == [("fa", {}), ("fb", {"k": [1]})]
    assert r.token_events == 1


def test_fragment_without_index_or_id_continues_current_call() -> None:
    r = run(
        [
            tc(id="call_9", type="function", function={"name": "lookup", "arguments": '{"q":'}),
            tc(function={"arguments": ' "x"'}),
            tc(function={"arguments": "}"}),
        ]
    )
    (call,) = _args(r)
    assert call["id"] == "call_9"
    assert call["name"] == "lookup"
    assert call["arguments_parsed"] == {"q": "x"}
    assert call["index"] == 0


def test_fragment_without_index_or_id_with_no_call_starts_one() -> None:
    r = run([tc(function={"name": "f", "arguments": "{}"})])
    (call,) = _args(r)
    assert (call["index"], call["id"], call["name"], call["arguments_parsed"]) == (0, None, "f", {})


def test_new_id_is_new_call_even_without_index() -> None:
    r = run(
        [
            tc(id="a", function={"name": "fa", "arguments": "{}"}),
            tc(id="b", function={"name": "fb", "arguments": "{"}),
            tc(function={"arguments": "}"}),
        ]
    )
    calls = _args(r)
    assert [(c["index"], c["id"], c["name"], c["arguments"]) for c in calls] == [
        (0, "a", "fa", "{}"),
        (1, "b", "fb", "{}"),
    ]


def test_new_id_with_colliding_index_is_new_call() -> None:
    r = run(
        [
            tc(index=0, id="a", function={"name": "fa", "arguments": '{"n": 1}'}),
            tc(index=0, id="b", function={"name": "fb", "arguments": '{"n": '}),
            tc(index=0, function={"arguments": "2}"}),
        ]
    )
    assert [(c["id"], c["name"], c["arguments_parsed"]) for c in _args(r)] == [
        ("a", "fa", {"n": 1}),
        ("b", "fb", {"n": 2}),
    ]


def test_repeated_id_without_index_continues_that_call() -> None:
    r = run(
        [
            tc(id="a", function={"name": "fa", "arguments": "{"}),
            tc(id="b", function={"name": "fb", "arguments": "{}"}),
            tc(id="a", function={"arguments": "}"}),
        ]
    )
    assert [(c["id"], c["arguments"]) for c in _args(r)] == [("a", "{}"), ("b", "{}")]


def test_later_empty_name_does_not_erase_name() -> None:
    r = run(
        [
            tc(index=0, id="c1", type="function", function={"name": "search", "arguments": ""}),
            tc(index=0, function={"name": "", "arguments": '{"q": 1}'}),
            tc(index=0, function={"name": None, "arguments": ""}),
        ]
    )
    (call,) = _args(r)
    assert call["name"] == "search"
    assert call["arguments_parsed"] == {"q": 1}


def test_later_fragment_repeating_name_does_not_duplicate_it() -> None:
    r = run(
        [
            tc(index=0, id="c1", function={"name": "search", "arguments": "{"}),
            tc(index=0, function={"name": "search", "arguments": "}"}),
        ]
    )
    assert _args(r)[0]["name"] == "search"


def test_broken_arguments_parse_to_none_and_empty_to_empty_dict() -> None:
    r = run(
        [
            tc(index=0, id="a", function={"name": "fa", "arguments": '{"x": 1'}),
            tc(index=1, id="b", function={"name": "fb", "arguments": ""}),
        ]
    )
    a, b = _args(r)
    assert a["arguments"] == '{"x": 1'
    assert a["arguments_parsed"] is None
    assert b["arguments"] == ""
    assert b["arguments_parsed"] == {}


def test_non_dict_fragments_are_skipped() -> None:
    r = run([delta(tool_calls=["junk", None, {"index": 0, "id": "a", "function": {"name": "f"}}])])
    assert [c.id for c in r.tool_calls] == ["a"]


# --------------------------------------------------------------------------- finish, errors, ids


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter"])
def test_finish_reason_captured(reason: str) -> None:
    r = run([content("x"), delta(finish=reason)])
    assert r.finish_reason == reason
    assert r.ended_cleanly


def test_finish_reason_in_same_chunk_as_content() -> None:
    r = run([delta(finish="length", content="last")])
    assert r.content == "last"
    assert r.finish_reason == "length"


def test_no_finish_reason_is_not_clean() -> None:
    r = run([content("partial")])
    assert r.finish_reason is None
    assert not r.ended_cleanly


def test_error_object_in_stream_sets_server_error() -> None:
    r = run([ROLE, content("a"), {"error": {"message": "boom", "type": "server_error", "code": 500}}])
    assert r.server_error == "boom"
    assert r.content == "a"
    assert not r.ended_cleanly
    assert r.data_events == 3


def test_error_after_finish_reason_is_not_clean() -> None:
    r = run([delta(finish="stop", content="a"), {"error": {"message": "late"}}])
    assert r.finish_reason == "stop"
    assert r.server_error == "late"
    assert not r.ended_cleanly


def test_error_string_and_error_without_message() -> None:
    assert run([{"error": "plain"}]).server_error == "plain"
    assert run([{"error": {"code": 500}}]).server_error == str({"code": 500})


def test_error_first_event_sets_first_event_time_only() -> None:
    r = run([{"error": {"message": "boom"}}])
    assert r.server_error == "boom"
    assert r.t_first_event_ns == t(0)
    assert r.t_first_token_ns is None
    assert r.response_id is None


def test_error_message_truncated_to_500() -> None:
    r = run([{"error": {"message": "e" * 900}}])
    assert r.server_error == "e" * 500


def test_null_error_field_is_not_an_error() -> None:
    r = run([{**content("a"), "error": None}])
    assert r.server_error is None
    assert r.content == "a"


def test_event_type_error() -> None:
    r = run([content("a"), ev({"message": "overloaded"}, event="error")])
    assert r.server_error == "overloaded"
    assert r.content == "a"
    r = run([ev({"error": {"message": "nested"}}, event="error")])
    assert r.server_error == "nested"


def test_event_type_error_with_plain_text_data() -> None:
    r = run([content("a"), ev("Internal Server Error", event="error")])
    assert r.server_error == "Internal Server Error"


def test_response_id_from_first_chunk_that_has_one() -> None:
    r = run(
        [
            {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
            {"id": "", "choices": [{"index": 0, "delta": {"content": "a"}}]},
            {"id": "resp-1", "choices": [{"index": 0, "delta": {"content": "b"}}]},
            {"id": "resp-2", "choices": [{"index": 0, "delta": {"content": "c"}}]},
        ]
    )
    assert r.response_id == "resp-1"


def test_response_id_non_string_is_stringified() -> None:
    assert run([{"id": 7, "choices": []}]).response_id == "7"


def test_timings_captured() -> None:
    timings = {"prompt_n": 10, "prompt_ms": 5.5, "predicted_n": 3, "predicted_ms": 30.0, "cache_n": 2}
    r = run([content("abc"), {**delta(finish="stop"), "timings": timings}])
    assert r.timings == timings
    assert run([{**content("x"), "timings": None}]).timings is None


# --------------------------------------------------------------------------- counting


def test_token_events_count_events_not_tokens() -> None:
    r = run([ROLE, content("a b c"), delta(finish="stop")])
    assert r.token_events == 1
    assert r.content == "a b c"
    r = run([content("one two"), content(" three four five"), delta(reasoning="x y z")])
    assert r.token_events == 3


def test_tool_call_and_content_in_one_event_is_one_event() -> None:
    r = run([delta(content="hi", tool_calls=[{"index": 0, "id": "a", "function": {"name": "f"}}])])
    assert r.token_events == 1


def test_second_choice_is_ignored() -> None:
    r = run(
        [
            {"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}},
                                    {"index": 1, "delta": {"role": "assistant", "content": None}}]},
            delta(index=1, content="OTHER"),
            delta(index=0, content="mine"),
            delta(index=1, content=" OTHER2", reasoning="R1"),
            {"id": "x", "choices": [{"index": 1, "delta": {"content": "X"}},
                                    {"index": 0, "delta": {"content": " too"}}]},
            delta(index=1, finish="length"),
            delta(index=0, finish="stop"),
        ]
    )
    assert r.content == "mine too"
    assert r.reasoning == ""
    assert r.token_events == 2
    assert r.t_first_token_ns == t(2)
    assert r.t_last_token_ns == t(4)
    assert r.finish_reason == "stop"


def test_second_choice_finish_does_not_end_first() -> None:
    r = run([delta(index=0, content="a"), delta(index=1, finish="stop")])
    assert r.finish_reason is None


def test_choice_without_index_is_choice_zero() -> None:
    r = run([{"id": "x", "choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]}])
    assert r.content == "a"
    assert r.finish_reason == "stop"


def test_non_streaming_message_shape_is_accepted() -> None:
    r = run([{"id": "x", "choices": [{"index": 0, "message": {"content": "full"}, "finish_reason": "stop"}]}])
    assert r.content == "full"
    assert r.finish_reason == "stop"


def test_usage_packed_into_last_content_chunk() -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 2}
    r = run([content("a"), {**delta(finish="stop", content="b"), "usage": usage}])
    assert r.usage == usage
    assert r.content == "ab"
    assert r.token_events == 2
