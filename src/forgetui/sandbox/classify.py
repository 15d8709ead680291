"""Raw outcome of a run -> SandboxResult: the status rules, in the order they are applied.

1. Killed by the harness: for output over a cap -> ``output_limit``; for the wall clock ->
   ``wall_timeout`` (also while compiling, with its own allowance).
2. The wrapper never reported the "run" stage: a C/C++ compile failed (it reported "compile") ->
   ``runtime_error`` with "compile error"; otherwise bwrap or prlimit failed before the program
   existed -> ``sandbox_error`` with bwrap's own message (bwrap exits 1 and prints "bwrap: ...").
3. Exit code 0 -> ``ok``.
4. bwrap reports a program killed by signal N as exit code 128+N (like a shell; an explicit
   ``exit(137)`` reads the same). SIGXCPU (152) -> ``cpu_limit``; SIGKILL after using at least the
   CPU limit (the program ignored SIGXCPU and hit the hard limit one second later) -> ``cpu_limit``.
5. Memory: RLIMIT_AS never kills; it makes allocations fail, and the program then dies in a
   language-specific way. So ``memory_limit`` needs evidence, either
   (a) an allocator-failure message in the last 8 KiB of stderr of a failed run (Python
       ``MemoryError``, C++ ``std::bad_alloc``, V8 "heap out of memory" / "Failed to reserve
       virtual memory", "Cannot allocate memory", "out of memory"), or
   (b) death by SIGSEGV, SIGBUS, SIGABRT or SIGKILL with a peak resident size (ru_maxrss) of at
       least 75 % of the address-space limit: a C program that touched memory until malloc
       returned NULL, or the kernel's OOM killer.
   Inside bwrap the peak is sampled from /proc, every 20 ms for the first second and every 100 ms
   after (bwrap's outer process never reaps the namespace init, so wait4's rusage misses the
   program): a program that allocates and dies between two samples may keep the ``signal(N)``
   label. Unsandboxed runs use the exact rusage.
   A C program that dereferences NULL after a failed malloc without having used much memory stays
   ``signal(11)``: nothing distinguishes it from any other NULL dereference. A program can forge
   (a) by printing the words; that only changes its own failure's label, never a pass.
6. Any other signal -> ``signal`` (label ``signal(N)``); any other non-zero exit -> ``runtime_error``.
"""

from __future__ import annotations

import signal as _signal

from forgetui.sandbox.process import Outcome
from forgetui.sandbox.types import Limits, SandboxResult

_OOM_MESSAGES = (
    "MemoryError",
    "std::bad_alloc",
    "JavaScript heap out of memory",
    "Fatal process out of memory",
    "Failed to reserve virtual memory",
    "Cannot allocate memory",
    "out of memory",
)
_OOM_SIGNALS = {_signal.SIGSEGV, _signal.SIGBUS, _signal.SIGABRT, _signal.SIGKILL}
_RSS_FRACTION = 0.75


def human_bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _seconds(x: float) -> str:
    return f"{x:g} s"


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _first_line(text: str, prefixes: tuple[str, ...] = ()) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(prefixes) if prefixes else False:
            return line
    return lines[0] if lines else ""


def _oom_message(stderr: str) -> str | None:
    tail = stderr[-8192:]
    for message in _OOM_MESSAGES:
        if message in tail:
            return message
    return None


def classify(out: Outcome, limits: Limits, *, memory: int, sandboxed: bool, compiled: bool,
             pre_run_wall_s: float) -> SandboxResult:
    stdout = out.stdout.decode("utf-8", "replace")
    stderr = out.stderr.decode("utf-8", "replace")
    rc = out.returncode
    started = "run" in out.stages
    sig: int | None = None
    if out.raw_signal is not None:
        sig = out.raw_signal
    elif rc is not None and 128 < rc < 128 + 65:
        sig = rc - 128

    def result(status: str, reason: str, *, exit_code: int | None = None, signo: int | None = None):
        return SandboxResult(
            status=status,
            exit_code=exit_code,
            signal=signo,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=out.stdout_truncated,
            stderr_truncated=out.stderr_truncated,
            wall_s=round(out.wall_s, 4),
            cpu_s=None if out.cpu_s is None else round(out.cpu_s, 4),
            sandboxed=sandboxed,
            reason=reason,
        )

    # 1. killed by the harness
    if out.killed_for and out.killed_for.startswith("output:"):
        stream = out.killed_for.split(":", 1)[1]
        cap = limits.stdout_bytes if stream == "stdout" else limits.stderr_bytes
        return result("output_limit", f"output_limit: {stream} over {human_bytes(cap)}")
    if out.killed_for == "wall":
        if compiled and not started:
            return result("wall_timeout", f"wall_timeout while compiling after {_seconds(pre_run_wall_s)}")
        return result("wall_timeout", f"wall_timeout after {_seconds(limits.wall_s)}")
    if out.killed_for == "cancel":
        return result("sandbox_error", "sandbox_error: cancelled")
    if out.spawn_error:
        return result("sandbox_error", f"sandbox_error: {out.spawn_error}")

    # 2. the program never started
    if not started:
        if "compile" in out.stages:
            detail = _first_line(stderr, ())
            for line in stderr.splitlines():
                if "error" in line:
                    detail = line.strip()
                    break
            what = f"signal({sig})" if sig else f"exit code {rc}"
            reason = f"compile error ({what})" + (f": {detail}" if detail else "")
            return result("runtime_error", reason[:300], exit_code=rc if not sig else None, signo=sig)
        message = _first_line(stderr, ("bwrap:", "prlimit:", "bash:"))
        if not message:
            message = f"exit code {rc} before the program started" if rc is not None else "no exit status"
        return result("sandbox_error", f"sandbox_error: {message}"[:300], exit_code=rc)

    # 3. success
    if rc == 0 and sig is None:
        return result("ok", "ok", exit_code=0)

    # 4. CPU
    if sig == _signal.SIGXCPU:
        return result("cpu_limit", f"cpu_limit after {_seconds(limits.cpu_s)} CPU", signo=sig)
    if sig == _signal.SIGKILL and out.cpu_s is not None and out.cpu_s >= limits.cpu_s:
        return result("cpu_limit", f"cpu_limit after {_seconds(limits.cpu_s)} CPU (SIGKILL at the hard limit)",
                      signo=sig)

    # 5. memory
    oom = _oom_message(stderr)
    if oom:
        return result("memory_limit", f"memory_limit: {oom}", exit_code=None if sig else rc, signo=sig)
    if sig in _OOM_SIGNALS and out.maxrss_bytes is not None and out.maxrss_bytes >= _RSS_FRACTION * memory:
        return result(
            "memory_limit",
            f"memory_limit: signal({sig}) {signal_name(sig)} at {human_bytes(out.maxrss_bytes)} peak memory"
            f" (limit {human_bytes(memory)})",
            signo=sig,
        )

    # 6. everything else
    if sig is not None:
        return result("signal", f"signal({sig}) {signal_name(sig)}", signo=sig)
    return result("runtime_error", f"exit code {rc}", exit_code=rc)
