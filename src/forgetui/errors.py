"""Error hierarchy and process exit codes.

Every error a person can cause (bad profile, bad config, a locked run) is a ``ForgetuiError`` with a
message that names what to fix; the CLI prints the message and exits with the error's code. Anything
else is a bug and gets a traceback.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit codes of ``forgetui``: scripts and CI key on these, so they never change meaning."""

    OK = 0
    #: The run finished but some requests or cases failed (errors, failed cases).
    FAILURES = 1
    #: Bad command line, profile or config: nothing was run.
    USAGE = 2
    #: No target could be reached at all (connection refused, DNS, TLS).
    CONNECTION = 3
    #: The run directory is locked by another process, or storage failed.
    STORAGE = 4
    #: Interrupted by Ctrl-C / SIGTERM; the run is resumable.
    INTERRUPTED = 130


class ForgetuiError(Exception):
    """An error with a message meant for a person, and the exit code it maps to."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(ForgetuiError):
    """A profile, config or case file is malformed; the message names file, line and field."""

    exit_code = ExitCode.USAGE


class StorageError(ForgetuiError):
    """The run store cannot be written or read (locked run, unknown run id, corrupt file)."""

    exit_code = ExitCode.STORAGE


class RunLockedError(StorageError):
    """Another live process holds the run's lock."""


class ConnectionFailure(ForgetuiError):
    """No configured server could be reached."""

    exit_code = ExitCode.CONNECTION
