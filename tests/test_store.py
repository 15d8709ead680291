"""Tests of the durable run store: atomic writes, JSONL records, locking, crash recovery."""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forgetui.errors import RunLockedError, StorageError
from forgetui.store import (
    JsonlRead,
    RunHandle,
    RunStore,
    append_record,
    atomic_write_bytes,
    atomic_write_json,
    read_records,
    repair_tail,
)

SRC = Path(__file__).resolve().parents[1] / "src"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _temps(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if ".tmp-" in p.name]


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


# --- atomic writes ---------------------------------------------------------------------------


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    atomic_write_json(target, {"a": 1, "name": "Café ✓"})
    assert target.read_text(encoding="utf-8") == '{\n  "a": 1,\n  "name": "Café ✓"\n}\n'
    atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    atomic_write_bytes(target, b"raw")
    assert target.read_bytes() == b"raw"
    assert _temps(tmp_path) == []


def test_atomic_write_modes(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.json"
    old_umask = os.umask(0o077)
    try:
        atomic_write_json(fresh, {})
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    private = tmp_path / "private.json"
    private.write_text("{}")
    private.chmod(0o600)
    atomic_write_json(private, {"x": 1})
    assert stat.S_IMODE(private.stat().st_mode) == 0o600


def test_atomic_write_unserialisable_keeps_old(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    atomic_write_json(target, {"v": 1})
    with pytest.raises(StorageError, match="run.json"):
        atomic_write_json(target, {"v": object()})
    with pytest.raises(StorageError):
        atomic_write_json(target, {"v": "\ud800"})  # lone surrogate: fails at encode time
    assert json.loads(target.read_text()) == {"v": 1}
    assert _temps(tmp_path) == []


def test_atomic_write_enospc_on_replace_keeps_old(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "run.json"
    atomic_write_json(target, {"v": 1})

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(StorageError) as info:
        atomic_write_json(target, {"v": 2})
    monkeypatch.undo()
    assert "ENOSPC" in str(info.value) and str(target) in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert json.loads(target.read_text()) == {"v": 1}
    assert _temps(tmp_path) == []


def test_atomic_write_missing_dir_is_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="ENOENT"):
        atomic_write_json(tmp_path / "nope" / "run.json", {})


# --- JSONL ------------------------------------------------------------------------------------


def test_append_read_round_trip_unicode_and_big(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    big = "é" * (2 * 1024 * 1024)  # 4 MB once encoded
    records = [
        {"seq": 0, "text": "héllo wörld ✓ 🦀 日本語"},
        {"seq": 1, "text": "line\nbreak and \u2028 separator\u2029 and tab\t"},
        {"seq": 2, "text": big},
        {"seq": 3, "nested": {"list": [1, 2.5, None, True]}},
    ]
    fd = _open_append(path)
    try:
        for record in records:
            append_record(fd, record)
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert data.count(b"\n") == len(records)  # one line per record, newline-escaped strings
    assert "🦀".encode() in data  # ensure_ascii=False: stored as UTF-8, not \\u escapes
    result = read_records(path)
    assert result == JsonlRead(records=records, torn_tail=None, bad_lines=[])


def test_append_unserialisable_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    fd = _open_append(path)
    try:
        append_record(fd, {"seq": 0})
        with pytest.raises(StorageError):
            append_record(fd, {"seq": 1, "bad": {1, 2}})
    finally:
        os.close(fd)
    assert read_records(path).records == [{"seq": 0}]


def test_append_failure_rolls_back_partial_line(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "records.jsonl"
    fd = _open_append(path)
    try:
        append_record(fd, {"seq": 0})
        size = os.fstat(fd).st_size

        def broken_fsync(_fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "fsync", broken_fsync)
        with pytest.raises(StorageError, match="EIO"):
            append_record(fd, {"seq": 1, "pad": "x" * 10000})
        monkeypatch.undo()
        assert os.fstat(fd).st_size == size
        append_record(fd, {"seq": 1})
    finally:
        os.close(fd)
    assert read_records(path) == JsonlRead([{"seq": 0}, {"seq": 1}], None, [])


def test_read_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_records(tmp_path / "none.jsonl") == JsonlRead([], None, [])
    assert repair_tail(tmp_path / "none.jsonl") is None


def test_torn_tail_dropped_repaired_then_append(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    fd = _open_append(path)
    append_record(fd, {"seq": 0})
    append_record(fd, {"seq": 1})
    os.close(fd)
    partial = b'{"seq":2,"text":"half wri'
    with open(path, "ab") as f:
        f.write(partial)

    result = read_records(path)
    assert result.records == [{"seq": 0}, {"seq": 1}]
    assert result.torn_tail == partial and result.bad_lines == []

    assert repair_tail(path) == partial
    assert path.read_bytes().endswith(b"\n")
    aside = list(tmp_path.glob("records.jsonl.torn-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == partial
    assert re.fullmatch(r"records\.jsonl\.torn-\d+", aside[0].name)
    assert repair_tail(path) is None  # idempotent

    fd = _open_append(path)
    append_record(fd, {"seq": 2})
    os.close(fd)
    assert read_records(path) == JsonlRead([{"seq": 0}, {"seq": 1}, {"seq": 2}], None, [])


def test_repair_big_torn_tail_and_whole_file_torn(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    torn = b'{"seq":1,"pad":"' + b"y" * (3 * 1024 * 1024 + 7)  # spans several scan chunks
    path.write_bytes(b'{"seq":0}\n' + torn)
    assert repair_tail(path) == torn
    assert path.read_bytes() == b'{"seq":0}\n'

    only = tmp_path / "only.jsonl"
    only.write_bytes(b'{"seq":0,"no newline ever')
    assert read_records(only) == JsonlRead([], b'{"seq":0,"no newline ever', [])
    assert repair_tail(only) == b'{"seq":0,"no newline ever'
    assert only.read_bytes() == b""
    # A second repair in the same second must not overwrite the first torn file.
    only.write_bytes(b"again")
    assert repair_tail(only) == b"again"
    assert len(list(tmp_path.glob("only.jsonl.torn-*"))) == 2


def test_terminated_garbage_last_line_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"seq":0}\n\x00\x00\x00\x00\n')  # zero-filled block after a power cut
    result = read_records(path)
    assert result.records == [{"seq": 0}] and result.torn_tail == b"\x00\x00\x00\x00\n"
    assert repair_tail(path) == b"\x00\x00\x00\x00\n"
    assert path.read_bytes() == b'{"seq":0}\n'


def test_bad_middle_lines_reported_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"seq":0}\n{"seq":1,oops\n[1,2]\n\n{"seq":2}\n')
    result = read_records(path)
    assert result.records == [{"seq": 0}, {"seq": 2}]
    assert result.bad_lines == [2, 3]  # invalid JSON, and valid JSON that is not an object
    assert result.torn_tail is None
    assert repair_tail(path) is None  # middle damage is the caller's call, not repaired


# --- RunStore ---------------------------------------------------------------------------------


def test_create_append_reopen(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    run_id = store.new_run_id("demo")
    with store.create(run_id) as handle:
        assert isinstance(handle, RunHandle)
        assert handle.path == tmp_path / "runs" / run_id
        assert handle.records == [] and handle.torn_tail is None
        assert handle.read_run_json() is None
        handle.append({"seq": 0, "ok": True})
        handle.append({"seq": 1, "ok": False})
        handle.write_run_json({"run_id": run_id, "status": "running"})
        assert handle.records == [{"seq": 0, "ok": True}, {"seq": 1, "ok": False}]
    assert handle.closed
    handle.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        handle.append({"seq": 2})

    assert sorted(p.name for p in handle.path.iterdir()) == [".lock", "records.jsonl", "run.json", "summary.json"]
    with store.open(run_id) as again:
        assert [r["seq"] for r in again.records] == [0, 1]
        assert again.read_run_json() == {"run_id": run_id, "status": "running"}
        again.append({"seq": 2})
    assert store.load_run(run_id)["status"] == "running"
    assert [r["seq"] for r in read_records(handle.path / "records.jsonl").records] == [0, 1, 2]


def test_create_existing_and_open_missing(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    store.create("r1").close()
    with pytest.raises(StorageError, match="already exists"):
        store.create("r1")
    with pytest.raises(StorageError, match=r"no run named r2 in .*runs"):
        store.open("r2")
    with pytest.raises(StorageError, match="no run named r2"):
        store.load_run("r2")
    with pytest.raises(StorageError, match="no run.json"):
        store.load_run("r1")
    (store.run_dir("r1") / "run.json").write_text("{not json")
    with pytest.raises(StorageError, match="run.json"):
        store.load_run("r1")


def test_open_repairs_torn_tail(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with store.create("r") as handle:
        handle.append({"seq": 0})
    with open(tmp_path / "r" / "records.jsonl", "ab") as f:
        f.write(b'{"seq":1,"par')
    with store.open("r") as handle:
        assert handle.torn_tail == b'{"seq":1,"par'
        assert handle.records == [{"seq": 0}]
        handle.append({"seq": 1})
    assert read_records(tmp_path / "r" / "records.jsonl") == JsonlRead(
        [{"seq": 0}, {"seq": 1}], None, []
    )


@pytest.mark.parametrize("bad", ["../x", "..", ".", "", "a/b", "/abs", "a\\b", ".hidden", "x\0"])
def test_run_dir_rejects_escapes(tmp_path: Path, bad: str) -> None:
    with pytest.raises(StorageError, match="invalid run id"):
        RunStore(tmp_path).run_dir(bad)


def test_new_run_id_format_and_uniqueness(tmp_path: Path, monkeypatch) -> None:
    store = RunStore(tmp_path)
    run_id = store.new_run_id("My Model: Qwen 2.5 / 7B!!")
    assert re.fullmatch(r"\d{8}-\d{6}-my-model-qwen-2-5-7b-[0-9a-f]{4}", run_id)
    long_id = store.new_run_id("x" * 31 + " yyyy")
    assert re.fullmatch(r"\d{8}-\d{6}-x{31}-[0-9a-f]{4}", long_id)  # cut at 32, no dangling "-"
    assert re.fullmatch(r"\d{8}-\d{6}-run-[0-9a-f]{4}", store.new_run_id("!!!"))
    assert len({store.new_run_id("same") for _ in range(200)}) > 150

    import forgetui.store.runstore as runstore

    taken = store.new_run_id("clash")
    (tmp_path / taken).mkdir()
    suffixes = iter([taken[-4:], "beef"])
    monkeypatch.setattr(runstore.secrets, "token_hex", lambda _n: next(suffixes))
    fresh = store.new_run_id("clash")
    assert fresh != taken and fresh.endswith("-beef")


def test_list_runs_newest_first_skips_corrupt(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    assert store.list_runs() == []  # runs_dir not created yet
    docs = {
        "old": {"created_at": "2024-01-01T10:00:00+00:00"},
        "new": {"created_at": "2025-06-01T10:00:00+00:00"},
        "mid": {"created_at": "2024-06-01T10:00:00Z", "run_id": "mid"},
    }
    for run_id, doc in docs.items():
        with store.create(run_id) as handle:
            handle.write_run_json(doc)
    store.create("broken").close()
    (store.run_dir("broken") / "run.json").write_text('{"created_at": ')
    store.create("empty").close()  # no run.json at all
    (store.run_dir("listy")).mkdir()
    (store.run_dir("listy") / "run.json").write_text("[1, 2]")
    # Same created_at: the directory mtime breaks the tie.
    for run_id, mtime in (("tie-a", 1000), ("tie-b", 2000)):
        with store.create(run_id) as handle:
            handle.write_run_json({"created_at": "2023-01-01T00:00:00+00:00"})
        os.utime(store.run_dir(run_id), (mtime, mtime))

    listed = store.list_runs()
    assert [d["run_id"] for d in listed] == ["new", "mid", "old", "tie-b", "tie-a"]
    assert listed[0]["created_at"] == "2025-06-01T10:00:00+00:00"


def test_list_runs_many_is_fast(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    blob = ("x" * 1000 + "\n").encode()
    for i in range(300):
        path = tmp_path / f"run-{i:03d}"
        path.mkdir()
        (path / "run.json").write_text(json.dumps({"created_at": 1_700_000_000 + i}))
        (path / "records.jsonl").write_bytes(blob * 50)
    start = time.perf_counter()
    listed = store.list_runs()
    elapsed = time.perf_counter() - start
    assert len(listed) == 300 and listed[0]["run_id"] == "run-299"
    assert elapsed < 2.0


def test_store_does_not_import_ui_libraries() -> None:
    code = (
        "import sys, forgetui.store; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_child_env(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()


# --- locking ----------------------------------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from forgetui.store import RunStore
handle = RunStore(Path(sys.argv[1])).open(sys.argv[2])
print("ready", flush=True)
time.sleep(60)
"""

_CONTEND = """
import sys
from pathlib import Path
from forgetui.errors import RunLockedError
from forgetui.store import RunStore
try:
    RunStore(Path(sys.argv[1])).open(sys.argv[2])
except RunLockedError as exc:
    print(exc, flush=True)
    sys.exit(3)
"""


def test_lock_same_process_and_subprocess(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    holder = store.create("r")
    with pytest.raises(RunLockedError, match=rf"run r is being written by PID {os.getpid()}\b"):
        store.open("r")
    proc = subprocess.run(
        [sys.executable, "-c", _CONTEND, str(tmp_path), "r"],
        env=_child_env(), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert f"PID {os.getpid()}" in proc.stdout
    holder.close()
    with store.open("r") as again:
        assert again.records == []


def test_lock_released_when_holder_is_killed(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.create("r").close()
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path), "r"],
        env=_child_env(), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(RunLockedError, match=rf"PID {child.pid}\b"):
            store.open("r")
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    with store.open("r") as handle:
        assert handle.records == []


# --- crash injection --------------------------------------------------------------------------

_WRITER = """
import sys
from pathlib import Path
from forgetui.store import RunStore
handle = RunStore(Path(sys.argv[1])).open(sys.argv[2])
start = len(handle.records)
print("ready", flush=True)
for seq in range(start, start + 2000):
    pad = "z" * (1 << 20) if seq % 7 == 3 else "é" * (seq % 50)
    handle.append({"seq": seq, "pad": pad})
"""


def test_sigkill_during_appends_recovers(tmp_path: Path) -> None:
    rng = random.Random(20240607)
    store = RunStore(tmp_path)
    store.create("crashy").close()
    records_path = tmp_path / "crashy" / "records.jsonl"
    torn_seen = 0
    for _trial in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), "crashy"],
            env=_child_env(), stdout=subprocess.PIPE, text=True,
        )
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.02, 0.4))
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=30)
            child.stdout.close()

        # The kernel released the lock with the process: open must succeed at once.
        with store.open("crashy") as handle:
            seqs = [r["seq"] for r in handle.records]
            assert seqs == list(range(len(seqs)))  # contiguous from 0, across resumes
            for record in handle.records:
                assert set(record) == {"seq", "pad"}
            if handle.torn_tail is not None:
                torn_seen += 1
                # Isolated: one partial line, the record right after the last complete one.
                assert b"\n" not in handle.torn_tail
                prefix = f'{{"seq":{len(seqs)},'.encode()
                assert handle.torn_tail.startswith(prefix) or prefix.startswith(handle.torn_tail)
            data = records_path.read_bytes()
            assert data == b"" or data.endswith(b"\n")
            check = read_records(records_path)
            assert check.torn_tail is None and check.bad_lines == []
            assert len(check.records) == len(seqs)
    assert len(list(tmp_path.glob("crashy/records.jsonl.torn-*"))) >= min(torn_seen, 1)


# --- real ENOSPC ------------------------------------------------------------------------------


def _mount_tiny_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0:
        return False
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
    )
    return proc.returncode == 0


def test_real_enospc_on_tiny_tmpfs(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not _mount_tiny_tmpfs(mnt):
        pytest.skip("needs root and a mountable 64k tmpfs")
    try:
        store = RunStore(mnt / "runs")
        with store.create("full") as handle:
            handle.write_run_json({"created_at": "2025-01-01T00:00:00Z", "status": "running"})
            handle.append({"seq": 0})
            with pytest.raises((StorageError, OSError)) as info:
                handle.append({"seq": 1, "pad": "x" * 200_000})
            assert "ENOSPC" in str(info.value)
            with pytest.raises(StorageError, match="ENOSPC"):
                handle.write_run_json({"status": "x" * 200_000})
            assert handle.read_run_json() == {
                "created_at": "2025-01-01T00:00:00Z", "status": "running"
            }
            assert _temps(handle.path) == []
            assert handle.records == [{"seq": 0}]
        # The failed append was rolled back: no torn line, and the run reopens cleanly.
        with store.open("full") as again:
            assert again.records == [{"seq": 0}] and again.torn_tail is None
        assert store.load_run("full")["status"] == "running"
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
