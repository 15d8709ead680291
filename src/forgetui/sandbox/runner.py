"""The Sandbox: language + source in, SandboxResult out."""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass

from forgetui.sandbox import check as _check
from forgetui.sandbox.classify import classify
from forgetui.sandbox.command import (
    BASH,
    COMPILE_WALL_S,
    PRLIMIT,
    FilesError,
    Staged,
    bwrap_argv,
    effective_memory,
    running_as_root,
    stage,
    sweep_stale,
    unsandboxed_argv,
    unsandboxed_env,
)
from forgetui.sandbox.process import Execution, Spec
from forgetui.sandbox.toolchains import TOOLCHAINS, Toolchain, resolve
from forgetui.sandbox.types import Limits, SandboxCheck, SandboxResult, SandboxUnavailable

_TRIAL_LIMITS = Limits(wall_s=10.0, cpu_s=5.0)
_swept = threading.Event()
#: After a cancelled run, how long the awaiting task waits for the kill to complete.
_CANCEL_WAIT_S = 15.0


@dataclass
class _Plan:
    tool: Toolchain
    limits: Limits
    staged: Staged
    spec: Spec
    sandboxed: bool

    def finish(self, execution: Execution) -> SandboxResult:
        try:
            outcome = execution.run()
        finally:
            self.staged.cleanup()
        return classify(
            outcome,
            self.limits,
            memory=effective_memory(self.limits, self.tool),
            sandboxed=self.sandboxed,
            compiled=self.tool.compile is not None,
            pre_run_wall_s=self.spec.pre_run_wall_s,
        )


def _error(reason: str, *, sandboxed: bool = True) -> SandboxResult:
    return SandboxResult(
        status="sandbox_error", exit_code=None, signal=None, stdout="", stderr="",
        stdout_truncated=False, stderr_truncated=False, wall_s=0.0, cpu_s=None,
        sandboxed=sandboxed, reason=f"sandbox_error: {reason}",
    )


def _discard_plan(task: asyncio.Future) -> None:
    """A run cancelled while its files were being staged: remove them."""
    if not task.cancelled() and task.exception() is None and isinstance(task.result(), _Plan):
        task.result().staged.cleanup()


def unavailable_message(check: SandboxCheck) -> str:
    problems = "; ".join(check.problems) or "unknown problem"
    return (
        f"No usable sandbox for untrusted code: {problems}. Run `forgetui sandbox check` for details,"
        " or pass --allow-unsandboxed to run code with resource limits only (no isolation from your"
        " files, network or secrets)."
    )


class Sandbox:
    """Runs untrusted programs in bubblewrap. Thread-safe; one instance can run many programs at once."""

    def __init__(self, limits: Limits = Limits(), allow_unsandboxed: bool = False) -> None:  # noqa: B008 (frozen)
        self.limits = limits
        self.allow_unsandboxed = allow_unsandboxed

    # ---- environment ---------------------------------------------------------------------------

    def check(self) -> SandboxCheck:
        """Whether bwrap is usable here (cached per process): present, new enough, and a trial works."""
        return _check.check_environment(self._trial)

    def _trial(self, bwrap: str) -> SandboxResult:
        plan = self._build(TOOLCHAINS["sh"], "printf sandbox-ok\n", "", _TRIAL_LIMITS, None,
                           sandboxed=True, bwrap=bwrap)
        return plan.finish(Execution(plan.spec))

    # ---- running -------------------------------------------------------------------------------

    async def run(self, language: str, source: str, *, stdin: str = "", limits: Limits | None = None,
                  files: dict[str, str] | None = None) -> SandboxResult:
        """Run ``source`` as ``language`` ("python", "sh", "c", "cpp", "node").

        Raises SandboxUnavailable when bwrap is unusable and unsandboxed runs are not allowed.
        Cancelling the task kills the sandbox (and waits for that) before re-raising.
        """
        planning = asyncio.ensure_future(asyncio.to_thread(self._plan, language, source, stdin, limits, files))
        try:
            plan = await asyncio.shield(planning)
        except asyncio.CancelledError:
            planning.add_done_callback(_discard_plan)
            raise
        if isinstance(plan, SandboxResult):
            return plan
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SandboxResult] = loop.create_future()
        execution = Execution(plan.spec)

        def deliver(setter, value) -> None:
            if not future.done():
                setter(value)

        def worker() -> None:
            # This thread spawns bwrap AND lives until it is reaped (--die-with-parent is per thread).
            try:
                result = plan.finish(execution)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                try:
                    loop.call_soon_threadsafe(deliver, future.set_exception, exc)
                except RuntimeError:
                    pass
            else:
                try:
                    loop.call_soon_threadsafe(deliver, future.set_result, result)
                except RuntimeError:  # the loop is closed: nobody is waiting any more
                    pass

        thread = threading.Thread(target=worker, name="forgetui-sandbox", daemon=True)
        thread.start()
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            execution.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(future), _CANCEL_WAIT_S)
            except BaseException:  # noqa: BLE001 - we are re-raising the cancellation anyway
                pass
            raise

    def run_sync(self, language: str, source: str, *, stdin: str = "", limits: Limits | None = None,
                 files: dict[str, str] | None = None) -> SandboxResult:
        """Same as :meth:`run`, blocking; the sandbox lives and dies within this call."""
        plan = self._plan(language, source, stdin, limits, files)
        if isinstance(plan, SandboxResult):
            return plan
        return plan.finish(Execution(plan.spec))

    # ---- planning ------------------------------------------------------------------------------

    def _plan(self, language: str, source: str, stdin: str, limits: Limits | None,
              files: dict[str, str] | None) -> _Plan | SandboxResult:
        limits = limits or self.limits
        tool = resolve(language)
        if tool is None:
            known = ", ".join(sorted(TOOLCHAINS))
            return _error(f"unknown language {language!r} (known: {known})")
        missing = tool.missing()
        if missing:
            return _error(f"no {tool.language} toolchain here ({', '.join(missing)} missing)")
        check = self.check()
        if not _swept.is_set():  # once per process: run dirs of forgetui processes that were killed
            _swept.set()
            sweep_stale()
        sandboxed = check.ok
        if not sandboxed and not self.allow_unsandboxed:
            raise SandboxUnavailable(unavailable_message(check))
        for needed in (PRLIMIT, BASH):
            if not os.path.exists(needed):
                return _error(f"{needed} is missing", sandboxed=sandboxed)
        try:
            return self._build(tool, source, stdin, limits, files, sandboxed=sandboxed, bwrap=check.bwrap)
        except FilesError as exc:
            return _error(str(exc), sandboxed=sandboxed)

    def _build(self, tool: Toolchain, source: str, stdin: str, limits: Limits,
               files: dict[str, str] | None, *, sandboxed: bool, bwrap: str | None) -> _Plan:
        staged = stage(tool, source, files, sandboxed=sandboxed)
        pre_run = limits.wall_s if tool.compile is None else COMPILE_WALL_S
        if sandboxed:
            assert bwrap is not None

            def build_argv(status_fd: int | None, stage_fd: int) -> list[str]:
                assert status_fd is not None
                return bwrap_argv(bwrap, tool, limits, staged, status_fd=status_fd, stage_fd=stage_fd)

            env = {"PATH": "/usr/bin:/bin"}  # bwrap's own environ is readable via /proc/1/environ
            cwd = "/"
        else:

            def build_argv(status_fd: int | None, stage_fd: int) -> list[str]:
                return unsandboxed_argv(tool, limits, staged, stage_fd=stage_fd)

            env = unsandboxed_env(staged)
            cwd = staged.work or "/"
        spec = Spec(
            build_argv=build_argv,
            env=env,
            cwd=cwd,
            use_status_fd=sandboxed,
            drop_to_nobody=running_as_root(),
            stdin=stdin.encode("utf-8"),
            stdout_cap=limits.stdout_bytes,
            stderr_cap=limits.stderr_bytes,
            pre_run_wall_s=pre_run,
            wall_s=limits.wall_s,
            sample_usage=sandboxed,
        )
        return _Plan(tool=tool, limits=limits, staged=staged, spec=spec, sandboxed=sandboxed)
