"""The durable run store: one directory per run under ``runs_dir``.

Layout of ``<runs_dir>/<run_id>/``:

* ``records.jsonl`` -- append-only, one record per finished request/case, fsynced as it completes;
* ``run.json``      -- manifest + summary, always rewritten atomically;
* ``summary.json``  -- the small index of run.json (``summarize_run``), rewritten right after it;
* ``.lock``         -- ``flock``-ed by the one handle allowed to write the run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from forgetui.errors import StorageError
from forgetui.store.atomic import atomic_write_json, describe_error, fsync_dir
from forgetui.store.jsonl import append_record, read_records, repair_tail
from forgetui.store.lock import acquire_lock, release_lock
from forgetui.store.summary import summarize_run

RECORDS = "records.jsonl"
RUN_JSON = "run.json"
SUMMARY_JSON = "summary.json"
LOCK = ".lock"


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:32].rstrip("-") or "run"


def _read_json(path: Path) -> dict:
    """Parse a JSON object file; FileNotFoundError passes through, anything else is StorageError."""
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot read {path}: {describe_error(exc)}") from exc
    if not isinstance(doc, dict):
        raise StorageError(f"cannot read {path}: expected a JSON object")
    return doc


def _created_ts(doc: dict, fallback: float) -> float:
    value = doc.get("created_at")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    return fallback


class RunHandle:
    """Exclusive write access to one run, held until ``close()``; also a context manager."""

    def __init__(self, run_id: str, path: Path, lock_fd: int, records_fd: int) -> None:
        self.run_id = run_id
        self.path = path
        #: Records loaded at open (empty on create); every appended record is added too.
        self.records: list[dict] = []
        #: Bytes ``repair_tail`` moved aside at open, for the caller to report; else None.
        self.torn_tail: bytes | None = None
        #: 1-based numbers of corrupt middle lines skipped at open (left in the file).
        self.bad_lines: list[int] = []
        self._lock_fd: int | None = lock_fd
        self._records_fd: int | None = records_fd

    @property
    def closed(self) -> bool:
        """True once ``close()`` has run."""
        return self._lock_fd is None

    def append(self, record: dict) -> None:
        """Durably append ``record`` to ``records.jsonl`` and to ``self.records``."""
        if self._records_fd is None:
            raise StorageError(f"run {self.run_id} is closed")
        try:
            append_record(self._records_fd, record)
        except StorageError as exc:
            raise StorageError(f"{self.path / RECORDS}: {exc}") from exc
        self.records.append(record)

    def write_run_json(self, doc: dict) -> None:
        """Atomically replace ``run.json`` with ``doc``, then ``summary.json`` with its summary.

        run.json goes first: a crash between the two leaves an older summary.json, which
        ``RunStore.list_summaries`` notices (it is older than run.json) and does not trust.
        """
        if self.closed:
            raise StorageError(f"run {self.run_id} is closed")
        atomic_write_json(self.path / RUN_JSON, doc)
        summary = summarize_run(doc)
        if summary.get("run_id") is None:
            summary["run_id"] = self.run_id
        atomic_write_json(self.path / SUMMARY_JSON, summary)

    def read_run_json(self) -> dict | None:
        """The current ``run.json``, None if not written yet; StorageError if corrupt."""
        try:
            return _read_json(self.path / RUN_JSON)
        except FileNotFoundError:
            return None

    def close(self) -> None:
        """Close the records file and release the lock; safe to call more than once."""
        records_fd, lock_fd = self._records_fd, self._lock_fd
        self._records_fd = self._lock_fd = None
        try:
            if records_fd is not None:
                os.close(records_fd)
        finally:
            if lock_fd is not None:
                release_lock(lock_fd)

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A dropped handle must not keep the run locked for the rest of the process.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"RunHandle({self.run_id!r}, {len(self.records)} records, {state})"


class RunStore:
    """Creates, reopens and lists runs under ``runs_dir``."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = Path(runs_dir)

    def new_run_id(self, name: str) -> str:
        """A fresh id ``<YYYYmmdd-HHMMSS>-<slug>-<4 hex>`` not used by any existing run dir."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{_slug(name)}"
        while True:
            run_id = f"{base}-{secrets.token_hex(2)}"
            # create() refuses an existing dir, so a race here fails loudly rather than merging.
            if not (self.runs_dir / run_id).exists():
                return run_id

    def run_dir(self, run_id: str) -> Path:
        """The directory of ``run_id``; StorageError if the id could escape ``runs_dir``."""
        if (
            not isinstance(run_id, str)
            or not run_id
            or any(c in run_id for c in "/\\\0")
            or ".." in run_id
            or run_id.startswith(".")  # would hide the run, and covers "."
        ):
            raise StorageError(f"invalid run id {run_id!r}")
        return self.runs_dir / run_id

    def create(self, run_id: str) -> RunHandle:
        """Create a new run directory and return a locked handle with no records."""
        path = self.run_dir(run_id)
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError:
            raise StorageError(f"run {run_id} already exists in {self.runs_dir}") from None
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {describe_error(exc)}") from exc
        return self._handle(run_id, path, resume=False)

    def open(self, run_id: str) -> RunHandle:
        """Lock an existing run for resuming: repair a torn tail, then load its records."""
        path = self.run_dir(run_id)
        if not path.is_dir():
            raise StorageError(f"no run named {run_id} in {self.runs_dir}")
        return self._handle(run_id, path, resume=True)

    def _handle(self, run_id: str, path: Path, resume: bool) -> RunHandle:
        lock_fd = acquire_lock(path / LOCK, run_id)
        records_fd = -1
        try:
            torn = repair_tail(path / RECORDS) if resume else None
            loaded = read_records(path / RECORDS) if resume else None
            records_fd = os.open(path / RECORDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if not resume:
                fsync_dir(path)  # make the new run's entries durable
                fsync_dir(self.runs_dir)
        except BaseException as exc:
            if records_fd >= 0:
                os.close(records_fd)
            release_lock(lock_fd)
            if isinstance(exc, OSError):
                raise StorageError(f"cannot open run {run_id}: {describe_error(exc)}") from exc
            raise
        handle = RunHandle(run_id, path, lock_fd, records_fd)
        if loaded is not None:
            handle.records = loaded.records
            handle.bad_lines = loaded.bad_lines
        handle.torn_tail = torn
        return handle

    def list_runs(self) -> list[dict[str, Any]]:
        """Every readable ``run.json``, newest first (``created_at``, then dir mtime).

        Only ``run.json`` files are read, never records. Each dict gets ``run_id`` (the directory
        name) if it lacks one, so callers can reopen it.
        """
        return self._newest_first(lambda path: _read_json(path / RUN_JSON))

    def list_summaries(self) -> list[dict[str, Any]]:
        """Every listable run's ``summary.json``, newest first, in the order of ``list_runs``.

        A run without a summary.json, or whose summary.json is older than its run.json (written by
        an older forgetui, or a crash between the two writes), is summarised from run.json instead.
        """
        return self._newest_first(self._read_summary)

    def _newest_first(self, read: Callable[[Path], dict[str, Any]]) -> list[dict[str, Any]]:
        """``read(run_dir)`` for every run directory, newest first; runs it cannot read are skipped
        (a run without a readable run.json is not listable; that is not an error)."""
        found: list[tuple[float, float, dict]] = []
        try:
            entries = list(os.scandir(self.runs_dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {self.runs_dir}: {describe_error(exc)}") from exc
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                doc = read(Path(entry.path))
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except (FileNotFoundError, StorageError, OSError):
                continue
            if doc.get("run_id") is None:
                doc["run_id"] = entry.name
            found.append((_created_ts(doc, mtime), mtime, doc))
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [doc for _, _, doc in found]

    @staticmethod
    def _read_summary(path: Path) -> dict[str, Any]:
        run_mtime = os.stat(path / RUN_JSON).st_mtime_ns  # FileNotFoundError: not a listable run
        try:
            if os.stat(path / SUMMARY_JSON).st_mtime_ns >= run_mtime:
                return _read_json(path / SUMMARY_JSON)
        except (FileNotFoundError, StorageError):
            pass
        return summarize_run(_read_json(path / RUN_JSON))

    def load_run(self, run_id: str) -> dict[str, Any]:
        """The ``run.json`` of ``run_id``; StorageError if it (or the run) is missing or corrupt."""
        path = self.run_dir(run_id)
        try:
            return _read_json(path / RUN_JSON)
        except FileNotFoundError:
            if not path.is_dir():
                raise StorageError(f"no run named {run_id} in {self.runs_dir}") from None
            raise StorageError(f"run {run_id} has no {RUN_JSON} in {path}") from None
