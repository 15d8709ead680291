"""Spawn one sandbox, feed stdin, read stdout/stderr with byte caps, enforce the wall clock, kill the
whole tree, reap it: the only code in forgetui that starts untrusted programs.

Everything for one run happens in ONE thread, the one that calls :meth:`Execution.run`, from spawn
to reap. That matters: bwrap's ``--die-with-parent`` is PR_SET_PDEATHSIG, which fires when the
*spawning thread* exits (containers/bubblewrap#692), so spawning from a short-lived worker thread
would SIGKILL the sandbox mid-run. The thread here cannot exit before the sandbox is gone.

Killing: bwrap runs the payload in a new session and a new pid namespace, so ``killpg(bwrap)``
does not reach it. SIGKILL on the namespace's init (``child-pid`` from ``--json-status-fd``) makes
the kernel kill every process inside; then ``killpg`` bwrap itself, then reap. The harness never
waits for pipe EOF alone: after bwrap is reaped it drains the pipes for a bounded time only.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

_CHUNK = 65536
#: After the sandbox exits, how long to keep draining pipes (a daemon can hold them open only in
#: unsandboxed runs; inside the sandbox the pid namespace is gone with its init).
_DRAIN_S = 0.5
#: How often CPU time and peak memory of a sandboxed program are sampled from /proc: often at
#: first (short programs that blow up fast), then every 100 ms.
_SAMPLE_FAST_S = 0.02
_SAMPLE_FAST_FOR_S = 1.0
_SAMPLE_S = 0.1
#: How long to wait for bwrap to die after SIGKILL before giving up on it (never happens in practice).
_REAP_S = 10.0


@dataclass
class Spec:
    """What to spawn. ``build_argv(status_fd, stage_fd)`` returns the argv once the pipes exist."""

    build_argv: Callable[[int | None, int], list[str]]
    env: dict[str, str]
    cwd: str
    use_status_fd: bool
    drop_to_nobody: bool
    stdin: bytes
    stdout_cap: int
    stderr_cap: int
    #: Wall budget before the "run" stage marker (compile allowance) and after it.
    pre_run_wall_s: float
    wall_s: float
    #: bwrap's outer process never reaps the namespace init, so its rusage misses the program:
    #: sample the program's CPU and peak memory from /proc instead (see _tree_usage).
    sample_usage: bool = False


@dataclass
class Outcome:
    """Raw facts about one run; classify.py turns them into a SandboxResult."""

    returncode: int | None = None  # bwrap's exit code (128+N when the program died of signal N)
    raw_signal: int | None = None  # bwrap itself died of this signal
    killed_for: str | None = None  # "wall", "output:stdout", "output:stderr", "cancel"
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stages: list[str] = field(default_factory=list)
    started_at: float = 0.0
    run_started_at: float | None = None
    ended_at: float = 0.0
    cpu_s: float | None = None
    maxrss_bytes: int | None = None
    json_exit_code: int | None = None
    child_pid: int | None = None
    spawn_error: str | None = None

    @property
    def wall_s(self) -> float:
        start = self.run_started_at if self.run_started_at is not None else self.started_at
        return max(0.0, self.ended_at - start)


class Execution:
    """One run. ``run()`` blocks (call it from a thread that lives until it returns);
    ``cancel()`` may be called from any thread."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._cancelled = threading.Event()
        self._wake_lock = threading.Lock()
        self._wake_open = True
        self._cpu_s: float | None = None
        self._peak_rss: int | None = None
        self._last_sample = 0.0

    def cancel(self) -> None:
        self._cancelled.set()
        with self._wake_lock:  # never write to a closed (and possibly reused) fd number
            if self._wake_open:
                try:
                    os.write(self._wake_w, b"x")
                except OSError:
                    pass

    # ---- the run -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            return self._run()
        finally:
            with self._wake_lock:
                self._wake_open = False
                for fd in (self._wake_r, self._wake_w):
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _run(self) -> Outcome:
        status_r = status_w = None
        if self.spec.use_status_fd:
            status_r, status_w = os.pipe()
        stage_r, stage_w = os.pipe()
        try:
            return self._spawn_and_supervise(status_r, status_w, stage_r, stage_w)
        finally:
            for fd in (status_r, stage_r):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _spawn_and_supervise(self, status_r: int | None, status_w: int | None, stage_r: int,
                             stage_w: int) -> Outcome:
        spec = self.spec
        out = Outcome()
        pass_fds = tuple(fd for fd in (status_w, stage_w) if fd is not None)
        kwargs: dict = {}
        if spec.drop_to_nobody:
            # Mapped root inside bwrap's user namespace is host root: bound root-only files become
            # readable and RLIMIT_NPROC is ignored (research note, finding 2). Drop first.
            kwargs.update(user=65534, group=65534, extra_groups=[])
        proc = None
        try:
            argv = spec.build_argv(status_w, stage_w)
            out.started_at = time.monotonic()
            if self._cancelled.is_set():
                out.killed_for = "cancel"
                out.ended_at = out.started_at
                return out
            try:
                proc = subprocess.Popen(
                    argv,
                    env=spec.env,
                    cwd=spec.cwd,
                    stdin=subprocess.PIPE if spec.stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    close_fds=True,
                    pass_fds=pass_fds,
                    start_new_session=True,
                    **kwargs,
                )
            except OSError as exc:
                out.spawn_error = f"cannot start {argv[0]}: {exc.strerror or exc}"
                out.ended_at = time.monotonic()
                return out
        finally:
            for fd in (status_w, stage_w):
                if fd is not None:
                    os.close(fd)
        try:
            self._supervise(proc, out, status_r, stage_r)
        finally:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        return out

    def _supervise(self, proc: subprocess.Popen, out: Outcome, status_r: int | None, stage_r: int) -> None:
        spec = self.spec
        sel = selectors.DefaultSelector()
        pidfd = _pidfd_open(proc.pid)
        self._child_pidfd: int | None = None
        self._reaped = False
        bufs = {"stdout": bytearray(), "stderr": bytearray()}
        caps = {"stdout": spec.stdout_cap, "stderr": spec.stderr_cap}
        lines = {"status": bytearray(), "stage": bytearray()}
        stdin_data = memoryview(spec.stdin)
        pipes = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        for fd, name in pipes.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        if status_r is not None:
            os.set_blocking(status_r, False)
            sel.register(status_r, selectors.EVENT_READ, "status")
        os.set_blocking(stage_r, False)
        sel.register(stage_r, selectors.EVENT_READ, "stage")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "stdin")

        deadline = out.started_at + spec.pre_run_wall_s
        drain_until: float | None = None

        def take(name: str, data: bytes) -> None:
            buf = bufs[name]
            room = caps[name] - len(buf)
            if len(data) > room:
                buf += data[: max(room, 0)]
                setattr(out, f"{name}_truncated", True)
                if out.killed_for is None:
                    out.killed_for = f"output:{name}"
            else:
                buf += data

        def take_lines(name: str, data: bytes) -> None:
            buf = lines[name]
            buf += data
            while b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                buf[:] = rest
                if name == "status":
                    self._on_status(line, out)
                else:
                    self._on_stage(line, out)

        try:
            while True:
                now = time.monotonic()
                if drain_until is not None:
                    if not pipes or now >= drain_until:
                        break
                    timeout = drain_until - now
                else:
                    if self._cancelled.is_set():
                        out.killed_for = out.killed_for or "cancel"
                    if out.killed_for is not None:
                        break
                    if out.run_started_at is not None:
                        deadline = out.run_started_at + spec.wall_s
                    if now >= deadline:
                        out.killed_for = "wall"
                        break
                    timeout = deadline - now
                    if pidfd is None:
                        timeout = min(timeout, 0.02)
                    if spec.sample_usage and out.child_pid is not None:
                        every = _SAMPLE_FAST_S if now - out.started_at < _SAMPLE_FAST_FOR_S else _SAMPLE_S
                        if now - self._last_sample >= every:
                            self._sample(out)
                        timeout = min(timeout, max(0.0, self._last_sample + every - now))
                for key, _mask in sel.select(timeout):
                    what, fd = key.data, key.fd
                    if what in ("stdout", "stderr"):
                        data = _read(fd)
                        if data is None:
                            continue
                        if not data:
                            sel.unregister(fd)
                            del pipes[fd]
                            continue
                        take(what, data)
                        if out.killed_for is not None:
                            sel.unregister(fd)
                            del pipes[fd]
                    elif what in ("status", "stage"):
                        data = _read(fd)
                        if data == b"":
                            sel.unregister(fd)
                        elif data:
                            take_lines(what, data)
                    elif what == "stdin":
                        try:
                            n = os.write(fd, stdin_data[:_CHUNK])
                            stdin_data = stdin_data[n:]
                        except BlockingIOError:
                            pass
                        except OSError:  # EPIPE: the program exited or closed its stdin
                            stdin_data = stdin_data[:0]
                        if not stdin_data:
                            sel.unregister(fd)
                            proc.stdin.close()
                    elif what == "wake":
                        _read(fd)
                    elif what == "exit":
                        sel.unregister(fd)
                        self._reap_now(proc, out)
                if pidfd is None and not self._reaped:
                    self._reap_now(proc, out)
                if self._reaped and drain_until is None:
                    drain_until = time.monotonic() + _DRAIN_S
                if drain_until is not None and out.killed_for is not None:
                    break  # output cap hit while draining
            if self._reaped and pipes and out.killed_for is None:
                # Unsandboxed only: a leftover process of the program's session holds the pipes.
                self._kill(proc, out)
        finally:
            if not self._reaped:
                if spec.sample_usage:
                    self._sample(out)
                self._kill(proc, out)
                self._reap_blocking(proc, out, pidfd)
            out.ended_at = time.monotonic()
            # Whatever is already in the pipes (non-blocking; never wait for EOF).
            for fd, name in list(pipes.items()):
                for _ in range(64):
                    data = _read(fd)
                    if not data:
                        break
                    take(name, data)
                    if getattr(out, f"{name}_truncated"):
                        break
            for name, fd in (("status", status_r), ("stage", stage_r)):
                if fd is None:
                    continue
                for _ in range(16):
                    data = _read(fd)
                    if not data:
                        break
                    take_lines(name, data)
                if lines[name].strip():
                    take_lines(name, b"\n")
            sel.close()
            for fd in (pidfd, self._child_pidfd):
                if fd is not None:
                    os.close(fd)
            out.stdout = bytes(bufs["stdout"])
            out.stderr = bytes(bufs["stderr"])
            if spec.sample_usage:
                out.cpu_s = self._cpu_s
                out.maxrss_bytes = self._peak_rss

    # ---- helpers -------------------------------------------------------------------------------

    def _on_status(self, line: bytes, out: Outcome) -> None:
        try:
            doc = json.loads(line)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        pid = doc.get("child-pid")
        if isinstance(pid, int) and out.child_pid is None:
            out.child_pid = pid
            if not self._reaped:
                # While bwrap is unreaped its init cannot be recycled; the pidfd then pins it.
                self._child_pidfd = _pidfd_open(pid)
        if isinstance(doc.get("exit-code"), int):
            out.json_exit_code = doc["exit-code"]
            if self.spec.sample_usage:
                self._sample(out)  # the init has just reaped the program: its cutime is complete

    def _sample(self, out: Outcome) -> None:
        self._last_sample = time.monotonic()
        if out.child_pid is None:
            return
        usage = _tree_usage(out.child_pid)
        if usage is None:
            return
        cpu, rss = usage
        self._cpu_s = cpu if self._cpu_s is None else max(self._cpu_s, cpu)
        self._peak_rss = rss if self._peak_rss is None else max(self._peak_rss, rss)

    @staticmethod
    def _on_stage(line: bytes, out: Outcome) -> None:
        marker = line.decode("ascii", "replace").strip()
        if not marker:
            return
        out.stages.append(marker)
        if marker == "run" and out.run_started_at is None:
            out.run_started_at = time.monotonic()

    def _kill(self, proc: subprocess.Popen, out: Outcome) -> None:
        """SIGKILL the pid-namespace init (the kernel then kills everything inside), then bwrap's
        process group (bwrap itself and, unsandboxed, the program's session)."""
        if self._child_pidfd is not None:
            try:
                signal.pidfd_send_signal(self._child_pidfd, signal.SIGKILL)
            except OSError:
                pass
        elif out.child_pid is not None and not self._reaped:
            try:
                os.kill(out.child_pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            # After reaping, the group id is still pinned while any member lives (unsandboxed
            # leftovers); with no member left this is ESRCH.
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def _reap_now(self, proc: subprocess.Popen, out: Outcome) -> bool:
        try:
            got, status, ru = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            # Someone else reaped it (a waitpid(-1) child watcher): use bwrap's own report.
            self._reaped = True
            out.returncode = out.json_exit_code
            proc.returncode = -1 if out.returncode is None else out.returncode
            return True
        if got == 0:
            return False
        self._reaped = True
        _record(proc, out, status, ru)
        return True

    def _reap_blocking(self, proc: subprocess.Popen, out: Outcome, pidfd: int | None) -> None:
        deadline = time.monotonic() + _REAP_S
        while not self._reap_now(proc, out):
            if time.monotonic() > deadline:
                # Never seen: bwrap ignoring SIGKILL (D state). Leave it; Popen reaps it later.
                return
            if pidfd is not None:
                sel = selectors.DefaultSelector()
                sel.register(pidfd, selectors.EVENT_READ)
                sel.select(0.2)
                sel.close()
            else:
                time.sleep(0.005)


def _record(proc: subprocess.Popen, out: Outcome, status: int, ru) -> None:
    if os.WIFEXITED(status):
        out.returncode = os.WEXITSTATUS(status)
        proc.returncode = out.returncode
    elif os.WIFSIGNALED(status):
        out.raw_signal = os.WTERMSIG(status)
        proc.returncode = -out.raw_signal
    # Exact for unsandboxed runs (the program chain is our child); for bwrap, replaced by samples.
    out.cpu_s = ru.ru_utime + ru.ru_stime
    out.maxrss_bytes = ru.ru_maxrss * 1024


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_usage(pid: int) -> tuple[float, int] | None:
    """(CPU seconds of the process and of its reaped children, peak RSS bytes) from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        cpu = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
    except (ValueError, IndexError):
        return None
    rss = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    rss = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return cpu, rss


def _tree_usage(init_pid: int) -> tuple[float, int] | None:
    """CPU and peak RSS of the sandbox: its init (whose cutime holds every reaped process) plus
    the init's live children (the program). Live grandchildren count once they are reaped."""
    total = _proc_usage(init_pid)
    if total is None:
        return None
    cpu, rss = total
    try:
        with open(f"/proc/{init_pid}/task/{init_pid}/children", "rb") as fh:
            children = [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        children = []
    for child in children:
        usage = _proc_usage(child)
        if usage is not None:
            cpu += usage[0]
            rss = max(rss, usage[1])
    return cpu, rss


def _read(fd: int) -> bytes | None:
    """b"" at EOF, None when nothing is there right now."""
    try:
        return os.read(fd, _CHUNK)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno in (errno.EIO, errno.EBADF):
            return b""
        raise


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
