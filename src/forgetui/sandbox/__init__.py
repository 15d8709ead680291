"""forgetui.sandbox: the only place in forgetui that runs untrusted (LLM-written) code.

Programs run inside bubblewrap with the invocation verified in
``shared/research/reliability-anchors.md`` part A2: new user/pid/net/ipc/uts/cgroup namespaces with
nested user namespaces disabled, uid 65534, no capabilities, no controlling terminal, a read-only
root with ``/usr`` (and the merged-/usr symlinks or the real /bin, /lib... read-only), a synthetic
``/etc/passwd``, the source read-only at ``/src``, private size-capped tmpfs ``/tmp`` and
``/dev/shm``, and no host-backed writable mount at all. Limits: wall clock (harness timer that
kills the pid namespace's init), and inside the sandbox ``prlimit`` for CPU (SIGXCPU, then SIGKILL
one second later), address space, processes+threads (RLIMIT_NPROC, counted per user namespace),
file size, open files and core dumps; stdout/stderr are capped by the harness, which kills the
sandbox one byte over the cap.

The harness side follows the note's traps: bwrap gets a scrubbed environment (``PATH`` only; the
payload can read bwrap's environ through ``/proc/1/environ``); when forgetui runs as root it drops
to uid/gid 65534 *before* exec'ing bwrap (mapped root would read root-only files and ignore
RLIMIT_NPROC); the spawning thread lives until the sandbox is reaped (``--die-with-parent`` is tied
to the spawning thread); on a cap, timeout or cancellation the harness SIGKILLs the namespace init
from ``--json-status-fd``, then bwrap's process group, then reaps, and never waits on pipe EOF alone.

Files a program gets: ``/src/main.<ext>`` plus any ``files`` (relative names) under ``/src``,
read-only; its working directory is ``/tmp``. Toolchains come from ``/usr`` only (Python is
``/usr/bin/python3 -I``, never a venv). C and C++ are compiled inside the sandbox with looser limits
(30 s wall, 20 s CPU, 2 GiB address space); the program's own limits start when it starts.

Statuses and the rules that choose them (memory_limit needs evidence) are in ``classify.py``.

Residual risks (documented, not solved):

* The kernel is shared: an exploit through an allowed syscall escapes. There is no seccomp filter
  yet (Flatpak's blocklist is the starting point if one is added).
* RLIMIT_AS is per process: up to ``processes`` x ``memory_bytes`` of address space in total, and
  tmpfs (/tmp, /dev/shm) is RAM not charged to it. cgroups would bound the tree; the development
  and CI machines have no delegated cgroup v2, so they are not used.
* RLIMIT_CPU is per process too: the CPU of many processes is bounded only by the wall clock.
* Exit codes above 128 read as signals (bwrap reports a signal N as 128+N, like a shell).
* When forgetui does not run as root, the sandboxed uid is the user's own uid on the host
  (seen as 65534 inside); nothing of the user's is bound in, but processes of the same uid outside
  the sandbox's namespaces are not otherwise protected from kernel bugs.
* ``--allow-unsandboxed`` runs (``sandboxed=False``) have rlimits, a scrubbed environment, a new
  session and a private working directory only: no isolation from files, network or secrets, and
  a program that leaves its session (setsid) can outlive the run.
"""

from __future__ import annotations

from forgetui.sandbox.runner import Sandbox
from forgetui.sandbox.types import STATUSES, Limits, SandboxCheck, SandboxResult, SandboxUnavailable

__all__ = [
    "STATUSES",
    "Limits",
    "Sandbox",
    "SandboxCheck",
    "SandboxResult",
    "SandboxUnavailable",
    "check_report",
]


def check_report() -> tuple[int, str]:
    """For ``forgetui sandbox check``: (exit code, text). 0 when code can be sandboxed here;
    otherwise SandboxUnavailable's exit code, and the text names each problem with its fix."""
    check = Sandbox().check()
    if check.ok:
        return 0, check.describe()
    return int(SandboxUnavailable.exit_code), check.describe()
