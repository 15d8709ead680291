"""Append-only JSON Lines: one record per line, each line written by one ``write`` and fsynced.

A crash can only ever leave the *last* line incomplete (a "torn tail"), because every record goes
out in one ``os.write`` on an ``O_APPEND`` descriptor and ends with its newline. Readers therefore
treat an unterminated last line as an interrupted append, not as corruption.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from forgetui.errors import StorageError
from forgetui.store.atomic import describe_error, fsync_dir

_CHUNK = 1 << 20  # backward-scan step when looking for the last newline


@dataclass
class JsonlRead:
    """What ``read_records`` found in a JSONL file."""

    #: Every complete, valid record, in file order.
    records: list[dict] = field(default_factory=list)
    #: Bytes of an interrupted last line (unterminated, or terminated but unparseable), else None.
    torn_tail: bytes | None = None
    #: 1-based numbers of unparseable lines *before* the last one; they were skipped.
    bad_lines: list[int] = field(default_factory=list)


def append_record(fd: int, record: dict, fsync: bool = True) -> None:
    """Append ``record`` as one line to the ``O_APPEND`` descriptor ``fd``, then fsync it.

    On failure (unserialisable record, ENOSPC, EIO) the file is truncated back to its previous
    length, best effort, so a failed append never leaves a partial line that later appends would
    bury in the middle of the file; then ``StorageError`` is raised.
    """
    try:
        # encode() inside the try: ensure_ascii=False lets lone surrogates through to it.
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except (TypeError, ValueError) as exc:
        raise StorageError(f"cannot serialise record: {describe_error(exc)}") from exc
    start = -1
    try:
        start = os.fstat(fd).st_size  # the caller holds the run lock, so no one else appends
        view = memoryview(data)
        while view:
            # One write normally; loop only because the kernel may return a short count.
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    except OSError as exc:
        if start >= 0:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass  # the reader's torn-tail handling is the fallback
        raise StorageError(f"cannot append record: {describe_error(exc)}") from exc


def _parse(line: bytes) -> dict | None:
    """The record on ``line``, or None when it is not a JSON object."""
    try:
        value = json.loads(line)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both derive from it
        return None
    return value if isinstance(value, dict) else None


def read_records(path: str | os.PathLike[str]) -> JsonlRead:
    """Read every record of a JSONL file; a torn tail or bad lines are reported, never raised.

    A missing file reads as empty. Only an OS error while reading raises ``StorageError``.
    """
    result = JsonlRead()
    pending: tuple[int, bytes] | None = None  # a bad line: torn tail if last, else a bad line
    try:
        with open(path, "rb") as f:
            # Binary iteration splits on b"\n" only (str.splitlines would also split on U+2028,
            # which ensure_ascii=False writes raw) and is linear even for multi-MB lines.
            for lineno, raw in enumerate(f, 1):
                if pending is not None:
                    result.bad_lines.append(pending[0])
                    pending = None
                if not raw.endswith(b"\n"):
                    pending = (lineno, raw)  # only the last line can lack "\n"
                    continue
                if not raw.strip():
                    continue  # a blank line holds no data; not worth a complaint
                record = _parse(raw)
                if record is None:
                    pending = (lineno, raw)
                else:
                    result.records.append(record)
    except FileNotFoundError:
        return result
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {describe_error(exc)}") from exc
    if pending is not None:
        result.torn_tail = pending[1]
    return result


def _last_newline_before(fd: int, end: int) -> int:
    """Offset of the last b"\\n" strictly before ``end``, or -1; reads backwards in chunks."""
    pos = end
    while pos > 0:
        start = max(0, pos - _CHUNK)
        chunk = os.pread(fd, pos - start, start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return start + idx
        pos = start
    return -1


def _read_range(fd: int, start: int, end: int) -> bytes:
    parts = []
    while start < end:
        part = os.pread(fd, min(end - start, _CHUNK * 16), start)
        if not part:
            break
        parts.append(part)
        start += len(part)
    return b"".join(parts)


def _torn_start(fd: int, size: int) -> int | None:
    """Where the torn tail begins (same rule as ``read_records``), or None if there is none."""
    if size == 0:
        return None
    if os.pread(fd, 1, size - 1) != b"\n":
        return _last_newline_before(fd, size) + 1
    # Terminated last line: torn only if it does not parse (e.g. zero-filled after a power cut).
    start = _last_newline_before(fd, size - 1) + 1
    line = _read_range(fd, start, size)
    if line.strip() and _parse(line) is None:
        return start
    return None


def _write_aside(path: Path, data: bytes) -> Path:
    stamp = int(time.time())
    for n in range(1000):
        aside = path.with_name(f"{path.name}.torn-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # repaired twice within a second: never overwrite earlier evidence
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        return aside
    raise FileExistsError(f"too many torn files for {path}")


def repair_tail(path: str | os.PathLike[str]) -> bytes | None:
    """Move a torn tail into ``<path>.torn-<unix_ts>`` and truncate ``path`` to its last good line.

    Returns the bytes moved aside, or None when the file is missing, empty or already clean. The
    torn copy is fsynced before the truncation, so a crash in between loses nothing.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot open {path}: {describe_error(exc)}") from exc
    try:
        size = os.fstat(fd).st_size
        cut = _torn_start(fd, size)
        if cut is None:
            return None
        torn = _read_range(fd, cut, size)
        _write_aside(path, torn)
        os.ftruncate(fd, cut)
        os.fsync(fd)
        fsync_dir(path.parent)
        return torn
    except OSError as exc:
        raise StorageError(f"cannot repair {path}: {describe_error(exc)}") from exc
    finally:
        os.close(fd)
