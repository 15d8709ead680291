"""The sandbox's value types: limits in, results and environment checks out.

Stdlib only (plus ``forgetui.errors``): the unprivileged sandbox battery imports this package with
the system interpreter, outside the project's virtual environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forgetui.errors import ForgetuiError

#: Every status a run can end with, best first. ``sandbox_error`` means the sandbox itself failed
#: (bwrap refused to start, a toolchain is missing): nothing about the program is known.
STATUSES = (
    "ok",
    "runtime_error",
    "signal",
    "cpu_limit",
    "wall_timeout",
    "output_limit",
    "memory_limit",
    "sandbox_error",
)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run. All of them are enforced; none is advisory."""

    #: Wall-clock seconds the program may run (compilation of C/C++ has its own allowance).
    wall_s: float = 15.0
    #: CPU seconds per process (RLIMIT_CPU; SIGXCPU at the limit, SIGKILL one second later).
    cpu_s: float = 10.0
    #: Address space per process (RLIMIT_AS). Raised automatically to 2 GiB for Node.
    memory_bytes: int = 1 << 30
    #: Processes and threads together (RLIMIT_NPROC, counted inside the sandbox's user namespace).
    processes: int = 64
    #: Largest file the program may write (RLIMIT_FSIZE).
    file_size_bytes: int = 16 << 20
    #: Open file descriptors per process (RLIMIT_NOFILE).
    open_files: int = 64
    #: Bytes of stdout kept; one more byte and the sandbox is killed (status output_limit).
    stdout_bytes: int = 1 << 20
    #: Bytes of stderr kept; same rule as stdout.
    stderr_bytes: int = 1 << 20
    #: Size of the private /tmp (tmpfs, RAM).
    tmp_bytes: int = 64 << 20
    #: Size of the private /dev/shm (tmpfs, RAM).
    shm_bytes: int = 16 << 20


@dataclass
class SandboxResult:
    """What happened to one program: a status from STATUSES and the evidence."""

    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    wall_s: float
    cpu_s: float | None
    sandboxed: bool
    reason: str

    @property
    def label(self) -> str:
        """The status, with the signal number for signals: ``signal(11)``."""
        if self.status == "signal" and self.signal is not None:
            return f"signal({self.signal})"
        return self.status


@dataclass
class SandboxCheck:
    """Whether untrusted code can be sandboxed here, and what to do when it cannot."""

    ok: bool
    bwrap: str | None
    version: str | None
    problems: list[str] = field(default_factory=list)
    features: dict[str, bool] = field(default_factory=dict)
    #: language -> the toolchain found for it, or None (informational, for describe()).
    languages: dict[str, str | None] = field(default_factory=dict)
    #: Who the sandboxed program runs as, in words.
    runs_as: str = ""

    def describe(self) -> str:
        """Multi-line text for ``forgetui sandbox check``."""
        lines: list[str] = []
        if self.ok:
            lines.append(f"sandbox: usable (bubblewrap {self.version} at {self.bwrap})")
        else:
            lines.append("sandbox: NOT usable: code cases will refuse to run")
            if self.bwrap:
                lines.append(f"  bubblewrap: {self.version or 'unknown version'} at {self.bwrap}")
        for problem in self.problems:
            lines.append(f"  problem: {problem}")
        if self.features:
            flags = ", ".join(f"{name} {'yes' if on else 'NO'}" for name, on in self.features.items())
            lines.append(f"  features: {flags}")
        if self.runs_as:
            lines.append(f"  runs as: {self.runs_as}")
        if self.languages:
            langs = ", ".join(
                f"{name} ({tool})" if tool else f"{name} (missing)" for name, tool in self.languages.items()
            )
            lines.append(f"  languages: {langs}")
        if not self.ok:
            lines.append(
                "  Fix the problem above, or pass --allow-unsandboxed to run code with resource limits"
                " only (no isolation from your files, network or secrets)."
            )
        return "\n".join(lines)


class SandboxUnavailable(ForgetuiError):
    """bubblewrap cannot be used here; the message says why and how to fix it."""
