"""One writer per run, enforced with ``flock`` on ``<run>/.lock``.

``flock`` locks belong to an open file description, so a second open of the same file conflicts
even inside the same process, and the kernel drops the lock when the holder dies: there is never a
stale lock to clean up. The PID written into the file is only for the error message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from forgetui.errors import RunLockedError, StorageError
from forgetui.store.atomic import describe_error


def _holder_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    # Empty when the holder has just locked and not yet written its PID.
    return text if text.isdigit() else "?"


def acquire_lock(lock_path: Path, run_id: str) -> int:
    """Take the exclusive lock on ``lock_path`` without waiting; return the fd that holds it.

    Raises ``RunLockedError`` naming the holder's PID when another handle holds it.
    """
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot open lock {lock_path}: {describe_error(exc)}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder_pid(fd)
        os.close(fd)
        raise RunLockedError(
            f"run {run_id} is being written by PID {pid} (lock {lock_path}); "
            "wait for it to finish or stop that process"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise StorageError(f"cannot lock {lock_path}: {describe_error(exc)}") from exc
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the PID is cosmetic; holding the lock is what matters
    return fd


def release_lock(fd: int) -> None:
    """Release and close a lock fd from ``acquire_lock``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
