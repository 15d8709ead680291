"""Crash-safe whole-file writes: a reader sees either the old file or the new one, never a mix.

The recipe is the classic one: write a temp file in the same directory (so ``os.replace`` is a
same-filesystem rename), fsync it, rename it over the target, then fsync the directory so the rename
itself survives a power cut.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path
from typing import Any

from forgetui.errors import StorageError

_DEFAULT_MODE = 0o644


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Fsync a directory so that entries created, renamed or removed in it are durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def describe_error(exc: BaseException) -> str:
    """Render an exception for a person: ``ENOSPC: No space left on device`` for OS errors."""
    # OSError's str() already reads "[Errno 28] No space left on device: 'path'"; keep the errno
    # name too, because people search for "ENOSPC" rather than the prose.
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{name}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    The mode of an existing target is kept (else 0o644). On any failure the temp file is removed,
    the previous content of ``path`` is left untouched, and ``StorageError`` names the path and the
    OS error.
    """
    target = Path(path)
    directory = target.parent
    tmp = directory / f".{target.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    fd = -1
    try:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = _DEFAULT_MODE
        # O_EXCL: never write through a pre-existing file or a symlink planted at the temp name.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fchmod(fd, mode)  # explicit, so the umask cannot change the preserved mode
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        except OSError:
            pass  # nothing more we can do; the original error is the one worth reporting
        if isinstance(exc, (OSError, ValueError, TypeError)):
            raise StorageError(f"cannot write {target}: {describe_error(exc)}") from exc
        raise  # KeyboardInterrupt and friends keep their meaning
    try:
        fsync_dir(directory)
    except OSError as exc:
        # The new content is in place but its rename may not survive a power cut: say so.
        raise StorageError(
            f"wrote {target} but could not sync {directory}: {describe_error(exc)}"
        ) from exc


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented UTF-8 JSON with a trailing newline, via ``atomic_write_bytes``.

    An object that cannot be serialised raises ``StorageError`` before anything touches the disk.
    """
    try:
        # encode() is inside the try: ensure_ascii=False lets lone surrogates through to it.
        data = (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StorageError(f"cannot write {Path(path)}: {describe_error(exc)}") from exc
    atomic_write_bytes(path, data)
