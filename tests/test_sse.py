"""Tests for forgetui.engine.sse.

Every byte-level fixture goes through ``decode``, which feeds it whole, one byte
at a time, and in seeded random splits, and asserts all three agree.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from forgetui.engine.sse import SSEDecoder, SSEEvent

SEEDS = (0, 1, 2, 3, 4)


def _run(chunks: list[bytes]) -> tuple[list[SSEEvent], SSEEvent | None, SSEDecoder]:
    dec = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(dec.feed(chunk))
    return events, dec.close(), dec


def _random_splits(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(data):
        n = rng.randint(0, 7)  # 0 also exercises empty feeds
        chunks.append(data[i : i + n])
        i += n
    return chunks


def decode(data: bytes) -> tuple[list[SSEEvent], SSEEvent | None, SSEDecoder]:
    """Feed ``data`` three ways; assert identical results; return the whole-feed run."""
    whole = _run([data])
    ways = [_run([data[i : i + 1] for i in range(len(data))])]
    ways += [_run(_random_splits(data, seed)) for seed in SEEDS]
    for events, tail, dec in ways:
        assert events == whole[0]
        assert tail == whole[1]
        assert dec.comments == whole[2].comments
        assert dec.error_fields == whole[2].error_fields
    return whole


def events_of(data: bytes) -> list[SSEEvent]:
    events, tail, _ = decode(data)
    assert tail is None
    return events


# --- framing -----------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_endings(eol: bytes) -> None:
    raw = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert events_of(raw) == [SSEEvent("a\nb"), SSEEvent("c")]


def test_mixed_line_endings() -> None:
    raw = b"data: a\r\ndata: b\rdata: c\n\r\n"
    assert events_of(raw) == [SSEEvent("a\nb\nc")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    # If the LF were a second line end it would be a blank line: two events.
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\ndata: b\r") == []
    assert dec.feed(b"\n\r") == [SSEEvent("a\nb")]
    assert dec.feed(b"\n") == []
    assert dec.close() is None
    assert events_of(b"data: a\r\ndata: b\r\n\r\n") == [SSEEvent("a\nb")]


def test_cr_then_cr_is_two_line_ends() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\r") == [SSEEvent("a")]


def test_utf8_multibyte_split_across_chunks() -> None:
    text = "héllo €𝄞 世界"
    raw = f"data: {text}\n\n".encode()
    dec = SSEDecoder()
    cut = raw.index("€".encode()) + 1  # inside the 3-byte euro sign
    assert dec.feed(raw[:cut]) == []
    assert dec.feed(raw[cut:]) == [SSEEvent(text)]
    assert events_of(raw) == [SSEEvent(text)]


def test_invalid_utf8_becomes_replacement_char() -> None:
    assert events_of(b"data: a\xffb\xc3\n\n") == [SSEEvent("a\ufffdb\ufffd")]


def test_bom_at_stream_start_dropped() -> None:
    assert events_of(b"\xef\xbb\xbfdata: x\n\n") == [SSEEvent("x")]
    # Only one, and only at the start: a later BOM is part of the line.
    assert events_of(b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == [SSEEvent("x")]
    assert events_of(b"\xef\xbb\xbf\n\ndata: y\n\n") == [SSEEvent("y")]


# --- fields ------------------------------------------------------------------


def test_data_without_space_and_only_one_space_stripped() -> None:
    assert events_of(b"data:x\n\ndata:  y\n\n") == [SSEEvent("x"), SSEEvent(" y")]


def test_multiline_data() -> None:
    assert events_of(b"data: one\ndata: two\ndata: three\n\n") == [SSEEvent("one\ntwo\nthree")]


def test_value_may_contain_colons() -> None:
    assert events_of(b'data: {"a": "b:c"}\n\n') == [SSEEvent('{"a": "b:c"}')]


def test_line_without_colon_is_field_with_empty_value() -> None:
    # "data" alone appends an empty line; "event" alone resets the type.
    assert events_of(b"data: a\ndata\n\n") == [SSEEvent("a\n")]
    assert events_of(b"event: x\nevent\ndata: a\n\n") == [SSEEvent("a")]


def test_two_events_in_one_chunk() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: 1\n\ndata: 2\n\n") == [SSEEvent("1"), SSEEvent("2")]
    assert events_of(b"data: 1\n\ndata: 2\n\n") == [SSEEvent("1"), SSEEvent("2")]


def test_one_event_across_50_chunks() -> None:
    payload = "".join(chr(0x41 + i % 26) for i in range(492))  # raw is 500 bytes
    raw = f"data: {payload}\n\n".encode()
    size = -(-len(raw) // 50)
    chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
    assert len(chunks) == 50
    events, tail, _ = _run(chunks)
    assert events == [SSEEvent(payload)] and tail is None
    assert events_of(raw) == [SSEEvent(payload)]


def test_event_type_and_reset() -> None:
    raw = b"event: error\ndata: boom\n\ndata: next\n\n"
    assert events_of(raw) == [SSEEvent("boom", event="error"), SSEEvent("next")]


def test_empty_event_field_means_message() -> None:
    assert events_of(b"event:\ndata: x\n\n") == [SSEEvent("x", event="message")]


def test_id_persists_and_nul_id_ignored() -> None:
    raw = b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\nid\ndata: d\n\n"
    assert events_of(raw) == [
        SSEEvent("a", id="1"),
        SSEEvent("b", id="1"),
        SSEEvent("c", id="1"),
        SSEEvent("d", id=""),
    ]


def test_retry_remembered_without_event() -> None:
    assert events_of(b"retry: 3000\n\n") == []
    assert events_of(b"retry: 3000\n\ndata: x\n\n") == [SSEEvent("x", retry=3000)]


@pytest.mark.parametrize("bad", [b"3s", b"", b"-1", b" 5", b"1.5", "\u0663".encode()])
def test_invalid_retry_ignored(bad: bytes) -> None:
    raw = b"retry: 100\n\nretry: " + bad + b"\ndata: x\n\n"
    assert events_of(raw) == [SSEEvent("x", retry=100)]


def test_unknown_fields_ignored() -> None:
    assert events_of(b"foo: bar\nData: x\ndata: y\n\n") == [SSEEvent("y")]


def test_error_field_recorded() -> None:
    raw = b'error: {"message":"x"}\n\nerror:second\ndata: y\n\n'
    events, tail, dec = decode(raw)
    assert events == [SSEEvent("y")] and tail is None
    assert dec.error_fields == ['{"message":"x"}', "second"]


# --- comments and dispatch rules ----------------------------------------------


def test_ping_comment_between_events() -> None:
    raw = b"data: a\n\n: ping\n\ndata: b\n\n:\n"
    events, tail, dec = decode(raw)
    assert events == [SSEEvent("a"), SSEEvent("b")] and tail is None
    assert dec.comments == 2


def test_id_then_ping_does_not_dispatch_empty_event() -> None:
    # openai/openai-python#2722: the blank line after a comment must not
    # produce an event just because a last event id is set.
    raw = b"id: 1\ndata: a\n\n: ping\n\n"
    events, tail, dec = decode(raw)
    assert events == [SSEEvent("a", id="1")] and tail is None
    assert dec.comments == 1


def test_blank_line_with_empty_buffer_resets_event_type() -> None:
    assert events_of(b"event: x\n\ndata: y\n\n") == [SSEEvent("y")]


def test_empty_data_keepalive_dispatches_empty_string() -> None:
    # Spec: buffer is "\n", non-empty, dispatched with the trailing "\n" removed.
    assert events_of(b"data:\n\n") == [SSEEvent("")]
    assert events_of(b"data: \n\n") == [SSEEvent("")]


# --- EOF ---------------------------------------------------------------------


def test_done_with_trailing_blank_line() -> None:
    assert events_of(b"data: [DONE]\n\n") == [SSEEvent("[DONE]")]


@pytest.mark.parametrize("raw", [b"data: [DONE]\n", b"data: [DONE]"], ids=["eol", "no-eol"])
def test_done_without_trailing_blank_line_returned_by_close(raw: bytes) -> None:
    events, tail, _ = decode(raw)
    assert events == []
    assert tail == SSEEvent("[DONE]")


def test_close_returns_none_when_nothing_pending() -> None:
    assert decode(b"data: a\n\nid: 5\nevent: x\n: c\n")[1] is None
    assert decode(b"")[1] is None


def test_feed_after_close_raises() -> None:
    dec = SSEDecoder()
    dec.feed(b"data: a\n")
    assert dec.close() == SSEEvent("a")
    with pytest.raises(ValueError):
        dec.feed(b"\n")
    assert dec.close() is None


# --- performance and hygiene ---------------------------------------------------


def test_10mb_single_event_is_linear() -> None:
    # Byte-at-a-time would be 10M feed() calls, so this fixture is fed whole,
    # in 64 KiB chunks, and in seeded random large splits instead.
    size = 10 * 1024 * 1024
    raw = b"data: " + b"x" * size + b"\n\n"
    rng = random.Random(0)
    cuts = sorted(rng.sample(range(1, len(raw)), 200))
    splits = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
    for chunks in ([raw], [raw[i : i + 65536] for i in range(0, len(raw), 65536)], splits):
        t0 = time.perf_counter()
        events, tail, _ = _run(chunks)
        elapsed = time.perf_counter() - t0
        assert tail is None and len(events) == 1
        assert len(events[0].data) == size
        assert elapsed < 2.0, f"{elapsed:.2f}s for 10 MB: quadratic copying?"


def test_many_small_lines_in_one_chunk_is_linear() -> None:
    raw = b"data: x\n\n" * 200_000
    t0 = time.perf_counter()
    events = SSEDecoder().feed(raw)
    assert len(events) == 200_000
    assert time.perf_counter() - t0 < 2.0


def test_does_not_import_textual_or_rich() -> None:
    code = (
        "import sys, forgetui.engine.sse; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
