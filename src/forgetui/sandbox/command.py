"""From (toolchain, source, limits) to a staged directory and the exact command line to spawn.

Layout of one run's private temp dir on the host (removed afterwards)::

    <tmp>/src/     the program and its files, root- or user-owned, read-only inside (/src)
    <tmp>/etc/     a synthetic passwd and group (bound read-only over /etc/passwd, /etc/group)
    <tmp>/work/    unsandboxed runs only: the program's writable working directory

Nothing host-backed is writable inside the sandbox: /tmp and /dev/shm are size-capped tmpfs, so a
program cannot plant a symlink for the harness to follow (research note, finding 6).

Inside the sandbox the command is ``prlimit <limits> -- /bin/bash -c <wrapper>``. The wrapper writes
stage markers ("compile", "run") to a pipe whose write end it closes before exec'ing the program:
the harness learns that bwrap's setup succeeded (no marker = bwrap or prlimit failed =
``sandbox_error``), that a C/C++ compile failed, and when the program itself started (its wall
clock starts then). bash, not sh: dash cannot name a file descriptor above 9.
"""

from __future__ import annotations

import math
import os
import resource
import shlex
import shutil
import stat
import tempfile
from dataclasses import dataclass

from forgetui.sandbox.toolchains import Toolchain
from forgetui.sandbox.types import Limits

NOBODY = 65534
PRLIMIT = "/usr/bin/prlimit"
BASH = "/bin/bash"
PATH = "/usr/bin:/bin"

#: C/C++ compilation gets its own allowance, on top of the program's limits.
COMPILE_WALL_S = 30.0
COMPILE_CPU_S = 20.0
COMPILE_MEMORY_BYTES = 2 << 30
COMPILE_FILE_SIZE_BYTES = 64 << 20
#: Glibc's default stack (the harness may run with an unlimited one, which changes mmap layout).
STACK_BYTES = 8 << 20

_ENV_INSIDE = {
    "PATH": PATH,
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}

_PASSWD = "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:65534:65534:sandbox:/tmp:/bin/sh\n"
_GROUP = "root:x:0:\nsandbox:x:65534:\n"


def running_as_root() -> bool:
    return os.geteuid() == 0


def effective_memory(limits: Limits, tool: Toolchain) -> int:
    return max(limits.memory_bytes, tool.memory_floor)


def _clamp(value: int, res: int) -> int:
    """An unprivileged process cannot raise a hard limit: never ask prlimit for more than we have."""
    try:
        _soft, hard = resource.getrlimit(res)
    except (OSError, ValueError):
        return value
    if hard == resource.RLIM_INFINITY:
        return value
    return min(value, hard)


def prlimit_argv(*, cpu_s: float, memory: int, processes: int, file_size: int, open_files: int) -> list[str]:
    """``prlimit`` with soft = hard (the program cannot raise them), CPU hard = soft + 1 s so the
    program first gets a distinctive SIGXCPU (exit 152), then SIGKILL."""
    cpu = max(1, math.ceil(cpu_s))
    cpu_hard = _clamp(cpu + 1, resource.RLIMIT_CPU)
    cpu = min(cpu, cpu_hard)
    argv = [
        PRLIMIT,
        f"--cpu={cpu}:{cpu_hard}",
        f"--as={_clamp(memory, resource.RLIMIT_AS)}",
        f"--nproc={_clamp(processes, resource.RLIMIT_NPROC)}",
        f"--fsize={_clamp(file_size, resource.RLIMIT_FSIZE)}",
        f"--nofile={_clamp(open_files, resource.RLIMIT_NOFILE)}",
        "--core=0",
    ]
    stack = _clamp(STACK_BYTES, resource.RLIMIT_STACK)
    argv.append(f"--stack={stack}:")  # soft only: deep recursion may raise it up to the AS limit
    argv.append("--")
    return argv


def run_limits_argv(limits: Limits, tool: Toolchain) -> list[str]:
    return prlimit_argv(
        cpu_s=limits.cpu_s,
        memory=effective_memory(limits, tool),
        processes=limits.processes,
        file_size=limits.file_size_bytes,
        open_files=limits.open_files,
    )


def outer_limits_argv(limits: Limits, tool: Toolchain) -> list[str]:
    """Limits on the whole sandbox payload: the run limits, or looser ones while compiling (the
    wrapper lowers them again with a second prlimit before exec'ing the compiled program)."""
    if tool.compile is None:
        return run_limits_argv(limits, tool)
    return prlimit_argv(
        cpu_s=max(limits.cpu_s, COMPILE_CPU_S),
        memory=max(effective_memory(limits, tool), COMPILE_MEMORY_BYTES),
        processes=max(limits.processes, 64),
        file_size=max(limits.file_size_bytes, COMPILE_FILE_SIZE_BYTES),
        open_files=max(limits.open_files, 64),
    )


class FilesError(ValueError):
    """A ``files`` entry has a name that would escape the source directory."""


def _safe_relpath(name: str, reserved: str) -> str:
    norm = os.path.normpath(name)
    if (
        not name
        or os.path.isabs(name)
        or norm.startswith("..")
        or norm in (".", reserved)
        or "\0" in name
    ):
        raise FilesError(f"bad file name {name!r}: must be a relative path inside the source directory"
                         f" and not {reserved!r}")
    return norm


@dataclass
class Staged:
    """One run's private temp dir on the host."""

    root: str
    src: str
    etc: str
    work: str | None

    def cleanup(self) -> None:
        def fix(func, path, _exc):  # a program may chmod its own files to 000 (unsandboxed runs)
            try:
                os.chmod(os.path.dirname(path), 0o700)
                os.chmod(path, 0o700)
                func(path)
            except OSError:
                pass

        shutil.rmtree(self.root, onerror=fix)


def _temp_base() -> str | None:
    """A directory uid 65534 can traverse when we are root (TMPDIR may be under /root)."""
    if not running_as_root():
        return None
    default = tempfile.gettempdir()
    for candidate in (default, "/tmp", "/var/tmp", "/dev/shm"):
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        if mode & 0o001 and all(os.stat(p).st_mode & 0o001 for p in _parents(candidate)):
            return candidate
    return default


def _parents(path: str) -> list[str]:
    out = []
    path = os.path.abspath(path)
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


_PREFIX = "forgetui-sbx-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Remove run directories left by forgetui processes that died mid-run (SIGKILL, power cut).
    Only our own (same owner), only when the pid in the name is gone."""
    base = _temp_base() or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        pid_text = name[len(_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        Staged(root=path, src="", etc="", work=None).cleanup()
        removed.append(path)
    return removed


def stage(tool: Toolchain, source: str, files: dict[str, str] | None, *, sandboxed: bool) -> Staged:
    """Write the program and its files into a fresh private temp dir readable by the sandbox uid."""
    root = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=_temp_base())
    try:
        as_root = running_as_root()
        # Root-owned and read-only for uid 65534; the top dir is traverse-only for others.
        os.chmod(root, 0o711 if as_root else 0o700)
        src = os.path.join(root, "src")
        etc = os.path.join(root, "etc")
        os.mkdir(src, 0o755)
        os.mkdir(etc, 0o755)
        entries = {tool.source_name: source}
        for name, text in (files or {}).items():
            entries[_safe_relpath(name, tool.source_name)] = text
        for rel, text in entries.items():
            path = os.path.join(src, rel)
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            os.chmod(path, 0o644)
        for name, text in (("passwd", _PASSWD), ("group", _GROUP)):
            path = os.path.join(etc, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(path, 0o644)
        # Explicit modes: a restrictive umask (077) must not hide the files from uid 65534.
        for top in (src, etc):
            os.chmod(top, 0o755)
            for dirpath, dirnames, _files in os.walk(top):
                for name in dirnames:
                    os.chmod(os.path.join(dirpath, name), 0o755)
        work = None
        if not sandboxed:
            work = os.path.join(root, "work")
            os.mkdir(work, 0o700)
            if as_root:
                os.chown(work, NOBODY, NOBODY)
        return Staged(root=root, src=src, etc=etc, work=work)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _fill(argv: tuple[str, ...], *, src: str, build: str) -> list[str]:
    return [part.replace("{src}", src).replace("{build}", build) for part in argv]


def wrapper_script(tool: Toolchain, limits: Limits, *, stage_fd: int, src: str, build: str) -> str:
    """The bash script that reports stages on ``stage_fd`` and execs the program."""
    fd = int(stage_fd)
    q = shlex.join
    lines = []
    if tool.compile is not None:
        lines += [
            f"printf 'compile\\n' >&{fd}",
            f"mkdir -p {shlex.quote(build)} || exit 125",
            f"{q(_fill(tool.compile, src=src, build=build))} </dev/null {fd}>&- || exit $?",
            f"printf 'run\\n' >&{fd}",
            f"exec {fd}>&-",
            f"exec {q(run_limits_argv(limits, tool) + _fill(tool.run, src=src, build=build))}",
        ]
    else:
        lines += [
            f"printf 'run\\n' >&{fd}",
            f"exec {fd}>&-",
            f"exec {q(_fill(tool.run, src=src, build=build))}",
        ]
    return "\n".join(lines) + "\n"


def _root_layout() -> list[str]:
    """Merged /usr: /bin -> usr/bin symlinks; otherwise bind the real directories read-only."""
    args: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            target = os.readlink(path)
            resolved = os.path.normpath(os.path.join("/", target))
            if resolved == "/usr" or resolved.startswith("/usr/"):
                args += ["--symlink", target, path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def bwrap_argv(bwrap: str, tool: Toolchain, limits: Limits, staged: Staged, *, status_fd: int,
               stage_fd: int) -> list[str]:
    """The research note's A2 invocation (verified as root-dropped-to-65534 and as non-root)."""
    argv = [
        bwrap,
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--clearenv",
    ]
    for key, value in _ENV_INSIDE.items():
        argv += ["--setenv", key, value]
    argv += ["--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    argv += _root_layout()
    argv += [
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
        "--ro-bind", os.path.join(staged.etc, "passwd"), "/etc/passwd",
        "--ro-bind", os.path.join(staged.etc, "group"), "/etc/group",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(limits.shm_bytes), "--perms", "1777", "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",
        "--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp",
        "--ro-bind", staged.src, "/src",
        "--chdir", "/tmp",
        "--json-status-fd", str(status_fd),
        "--remount-ro", "/",
        "--",
    ]
    script = wrapper_script(tool, limits, stage_fd=stage_fd, src="/src", build="/tmp/.build")
    argv += outer_limits_argv(limits, tool) + [BASH, "-c", script]
    return argv


def unsandboxed_argv(tool: Toolchain, limits: Limits, staged: Staged, *, stage_fd: int) -> list[str]:
    """rlimits only: for --allow-unsandboxed runs."""
    assert staged.work is not None
    script = wrapper_script(tool, limits, stage_fd=stage_fd, src=staged.src,
                            build=os.path.join(staged.work, ".build"))
    return outer_limits_argv(limits, tool) + [BASH, "-c", script]


def unsandboxed_env(staged: Staged) -> dict[str, str]:
    assert staged.work is not None
    env = dict(_ENV_INSIDE)
    env["HOME"] = staged.work
    env["TMPDIR"] = staged.work
    return env
