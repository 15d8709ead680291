"""forgetui.sandbox: the API, every status, each language present here, stdin, files, cancellation,
the unsandboxed fallback and the environment check. The adversarial rows are in
test_sandbox_battery.py.

Tests that need a working bubblewrap skip (with the reason) when ``Sandbox().check()`` fails; CI
installs bubblewrap in ``.ci/run``, so there they run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import forgetui.sandbox as sandbox_pkg
from forgetui.errors import ForgetuiError
from forgetui.sandbox import (
    STATUSES,
    Limits,
    Sandbox,
    SandboxCheck,
    SandboxResult,
    SandboxUnavailable,
    check_report,
)
from forgetui.sandbox import check as check_mod
from forgetui.sandbox import toolchains
from tests.sandbox_programs.battery import processes_with, wait_gone

SRC = Path(__file__).resolve().parents[1] / "src"
CHECK = Sandbox().check()
needs_bwrap = pytest.mark.skipif(not CHECK.ok, reason="bubblewrap unusable here: " + "; ".join(CHECK.problems))
needs_node = pytest.mark.skipif(not os.path.exists("/usr/bin/node"), reason="no /usr/bin/node here")
needs_gcc = pytest.mark.skipif(not os.path.exists("/usr/bin/gcc"), reason="no /usr/bin/gcc here")
needs_gxx = pytest.mark.skipif(not os.path.exists("/usr/bin/g++"), reason="no /usr/bin/g++ here")


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox()


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch):
    """bwrap missing from PATH: the environment check must fail closed."""
    monkeypatch.setenv("PATH", "/nonexistent-dir")
    check_mod.clear_cache()
    yield
    monkeypatch.undo()
    check_mod.clear_cache()


# ---- value types ----------------------------------------------------------------------------------


def test_statuses_and_limits_defaults():
    assert STATUSES == ("ok", "runtime_error", "signal", "cpu_limit", "wall_timeout", "output_limit",
                        "memory_limit", "sandbox_error")
    limits = Limits()
    assert (limits.wall_s, limits.cpu_s, limits.memory_bytes, limits.processes) == (15.0, 10.0, 1 << 30, 64)
    assert (limits.file_size_bytes, limits.open_files, limits.stdout_bytes, limits.stderr_bytes) == (
        16 << 20, 64, 1 << 20, 1 << 20)
    assert (limits.tmp_bytes, limits.shm_bytes) == (64 << 20, 16 << 20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.wall_s = 1  # type: ignore[misc]
    assert issubclass(SandboxUnavailable, ForgetuiError)


def test_label_names_the_signal():
    base = dict(exit_code=None, stdout="", stderr="", stdout_truncated=False, stderr_truncated=False,
                wall_s=0.1, cpu_s=None, sandboxed=True)
    assert SandboxResult(status="signal", signal=11, reason="signal(11) SIGSEGV", **base).label == "signal(11)"
    assert SandboxResult(status="cpu_limit", signal=24, reason="x", **base).label == "cpu_limit"


def test_package_is_stdlib_only_and_ui_free():
    """The unprivileged battery imports it with the system python: no third-party imports."""
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import forgetui.sandbox\n"
        "new = sorted(m for m in set(sys.modules) - before\n"
        "             if not m.startswith('forgetui') and sys.modules[m] is not None)\n"
        "third = [m for m in new if m.split('.')[0] not in sys.stdlib_module_names]\n"
        "print(json.dumps({'third': third, 'forgetui': sorted(m for m in sys.modules if m.startswith('forgetui'))}))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(SRC)!r})\n" + code],
                         capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(out.stdout)
    assert doc["third"] == []
    assert all(m in ("forgetui", "forgetui.errors") or m.startswith("forgetui.sandbox") for m in doc["forgetui"])


# ---- statuses -------------------------------------------------------------------------------------


@needs_bwrap
def test_python_ok(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\nprint('hello', sys.version_info[0])\n")
    assert (res.status, res.exit_code, res.signal, res.reason, res.label) == ("ok", 0, None, "ok", "ok")
    assert res.stdout == "hello 3\n" and res.stderr == ""
    assert res.sandboxed is True and not res.stdout_truncated
    assert 0 < res.wall_s < 5
    assert res.cpu_s is not None and res.cpu_s >= 0


@needs_bwrap
def test_python_is_the_system_interpreter_in_isolated_mode(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\nprint(sys.executable, sys.flags.isolated, sys.prefix)\n")
    assert res.stdout.split() == ["/usr/bin/python3", "1", "/usr"]


@needs_bwrap
async def test_runtime_error_and_traceback(sandbox: Sandbox):
    res = await sandbox.run("python", "raise SystemExit(3)\n")
    assert (res.status, res.exit_code, res.reason) == ("runtime_error", 3, "exit code 3")
    res = await sandbox.run("python", "1/0\n")
    assert (res.status, res.exit_code) == ("runtime_error", 1)
    assert "ZeroDivisionError" in res.stderr


@needs_bwrap
def test_signal(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert (res.status, res.signal, res.exit_code, res.label) == ("signal", 11, None, "signal(11)")
    assert res.reason.startswith("signal(11)")


@needs_bwrap
def test_cpu_limit(sandbox: Sandbox):
    started = time.monotonic()
    res = sandbox.run_sync("python", "while True:\n    pass\n", limits=Limits(cpu_s=1))
    assert (res.status, res.signal, res.reason) == ("cpu_limit", signal.SIGXCPU, "cpu_limit after 1 s CPU")
    assert time.monotonic() - started < 5
    assert res.cpu_s is not None and res.cpu_s >= 0.8


@needs_bwrap
def test_wall_timeout_kills_the_tree(sandbox: Sandbox):
    marker = "forgetui-test-" + secrets.token_hex(6)
    source = f"import subprocess, time\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 60; : {marker}'])\ntime.sleep(60)\n"
    started = time.monotonic()
    res = sandbox.run_sync("python", source, limits=Limits(wall_s=1))
    assert (res.status, res.reason) == ("wall_timeout", "wall_timeout after 1 s")
    assert res.exit_code is None and 1 <= res.wall_s < 2.5
    assert time.monotonic() - started < 4
    assert wait_gone(marker) == []


@needs_bwrap
def test_output_limit_stdout_and_stderr(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\nwhile True:\n    sys.stdout.write('y' * 4096)\n",
                           limits=Limits(stdout_bytes=64 << 10))
    assert (res.status, res.reason) == ("output_limit", "output_limit: stdout over 64 KiB")
    assert res.stdout_truncated and len(res.stdout) == 64 << 10 and set(res.stdout) == {"y"}
    res = sandbox.run_sync("python", "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n")
    assert (res.status, res.reason) == ("output_limit", "output_limit: stderr over 1 MiB")
    assert res.stderr_truncated and not res.stdout_truncated


@needs_bwrap
def test_output_exactly_at_the_cap_is_fine(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\nsys.stdout.write('z' * 1000)\n", limits=Limits(stdout_bytes=1000))
    assert res.status == "ok" and len(res.stdout) == 1000 and not res.stdout_truncated


@needs_bwrap
def test_memory_limit_python(sandbox: Sandbox):
    res = sandbox.run_sync("python", "x = []\nwhile True:\n    x.append(bytearray(32 << 20))\n",
                           limits=Limits(memory_bytes=256 << 20))
    assert (res.status, res.reason) == ("memory_limit", "memory_limit: MemoryError")


@needs_bwrap
@needs_gxx
def test_memory_limit_cpp_bad_alloc(sandbox: Sandbox):
    source = "#include <vector>\nint main(){ std::vector<char*> v; for(;;) v.push_back(new char[64<<20]); }\n"
    res = sandbox.run_sync("cpp", source, limits=Limits(memory_bytes=256 << 20))
    assert res.status == "memory_limit", res
    assert res.reason == "memory_limit: std::bad_alloc"


@needs_bwrap
@needs_gcc
def test_memory_limit_c_segfault_at_the_limit(sandbox: Sandbox):
    """Rule 5(b): SIGSEGV after touching memory until malloc returned NULL, peak >= 75 % of the limit."""
    source = ("#include <stdlib.h>\n#include <string.h>\n"
              "int main(void){ for(;;){ char *p = malloc(16<<20); memset(p, 1, 16<<20); } }\n")
    res = sandbox.run_sync("c", source, limits=Limits(memory_bytes=512 << 20))
    assert res.status == "memory_limit", res.reason
    assert res.reason.startswith("memory_limit: signal(11) SIGSEGV at ") and res.reason.endswith("(limit 512 MiB)")
    res = sandbox.run_sync("c", "int main(void){ volatile int *p = 0; return *p; }\n")
    assert res.label == "signal(11)"  # a plain NULL dereference stays a signal


@needs_bwrap
def test_runtime_error_with_exit_code_outside_memory_words(sandbox: Sandbox):
    res = sandbox.run_sync("sh", "echo 'all good' >&2; exit 7\n")
    assert (res.status, res.exit_code, res.stderr) == ("runtime_error", 7, "all good\n")


def test_unknown_language_and_missing_toolchain(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch):
    res = sandbox.run_sync("cobol", "DISPLAY 'HI'.")
    assert res.status == "sandbox_error" and "unknown language 'cobol'" in res.reason
    assert res.reason.startswith("sandbox_error: ")
    fake = toolchains.Toolchain("python", "main.py", ("/nonexistent/python3",), ("/nonexistent/python3",))
    monkeypatch.setitem(toolchains.TOOLCHAINS, "python", fake)
    res = sandbox.run_sync("python", "print(1)")
    assert res.status == "sandbox_error" and "/nonexistent/python3 missing" in res.reason


@needs_bwrap
def test_bwrap_failure_is_sandbox_error_with_its_message(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch):
    from forgetui.sandbox import command, runner

    real = command.bwrap_argv

    def broken(*args, **kwargs):
        argv = real(*args, **kwargs)
        return [argv[0], "--ro-bind", "/nonexistent-forgetui-src", "/x"] + argv[1:]

    monkeypatch.setattr(runner, "bwrap_argv", broken)
    res = sandbox.run_sync("python", "print('never')\n")
    assert res.status == "sandbox_error", res
    assert res.reason.startswith("sandbox_error: bwrap:") and "nonexistent-forgetui-src" in res.reason
    assert res.stdout == ""


# ---- languages, stdin, files ------------------------------------------------------------------------


@needs_bwrap
def test_stdin_reaches_the_program(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\ndata = sys.stdin.read()\nprint(len(data), data[:5])\n",
                           stdin="héllo" * 100_000)
    assert res.status == "ok" and res.stdout.split() == ["500000", "héllo"]


@needs_bwrap
def test_no_stdin_means_empty_stdin(sandbox: Sandbox):
    res = sandbox.run_sync("python", "import sys\nprint(repr(sys.stdin.read()))\n")
    assert res.stdout == "''\n"


@needs_bwrap
def test_program_that_ignores_stdin(sandbox: Sandbox):
    res = sandbox.run_sync("sh", "echo done\n", stdin="x" * (4 << 20))
    assert res.status == "ok" and res.stdout == "done\n"


@needs_bwrap
def test_sh(sandbox: Sandbox):
    res = sandbox.run_sync("sh", "read name\necho \"hi $name from $(id -u) in $PWD, HOME=$HOME\"\n", stdin="bob\n")
    assert (res.status, res.stdout) == ("ok", "hi bob from 65534 in /tmp, HOME=/tmp\n")


@needs_bwrap
@needs_gcc
def test_c_compiles_and_runs_with_stdin(sandbox: Sandbox):
    source = '#include <stdio.h>\nint main(void){int a,b; scanf("%d %d",&a,&b); printf("%d\\n", a+b); return 0;}\n'
    res = sandbox.run_sync("c", source, stdin="40 2\n")
    assert (res.status, res.stdout) == ("ok", "42\n"), res


@needs_bwrap
@needs_gcc
def test_c_compile_error_is_runtime_error(sandbox: Sandbox):
    res = sandbox.run_sync("c", "int main(void) { return undefined_name; }\n")
    assert res.status == "runtime_error" and res.reason.startswith("compile error (exit code 1)")
    assert "undefined_name" in res.stderr


@needs_bwrap
@needs_gcc
def test_c_segfault(sandbox: Sandbox):
    res = sandbox.run_sync("c", "int main(void){ volatile int *p = 0; return *p; }\n")
    assert res.label == "signal(11)"


@needs_bwrap
@needs_gxx
def test_cpp(sandbox: Sandbox):
    source = ("#include <iostream>\n#include <string>\n"
              "int main(){std::string s; std::cin >> s; std::cout << s.size() << '\\n';}\n")
    res = sandbox.run_sync("cpp", source, stdin="abcdef")
    assert (res.status, res.stdout) == ("ok", "6\n"), res


@needs_bwrap
@needs_node
def test_node_gets_enough_address_space(sandbox: Sandbox):
    res = sandbox.run_sync("node", "let s = ''; process.stdin.on('data', d => s += d);"
                                   " process.stdin.on('end', () => console.log(s.trim().toUpperCase()));",
                           stdin="node ok", limits=Limits(memory_bytes=256 << 20))
    assert (res.status, res.stdout) == ("ok", "NODE OK\n"), res


@needs_bwrap
def test_files_are_readonly_under_src(sandbox: Sandbox):
    source = (
        "import sys\nsys.path.insert(0, '/src')  # -I leaves the script's directory off sys.path\nimport helper\n"
        "print(helper.X, open('/src/data/input.txt').read())\n"
        "try:\n    open('/src/data/input.txt', 'w')\nexcept OSError as e:\n    print(e.errno == 30)\n"
    )
    res = sandbox.run_sync("python", source, files={"helper.py": "X = 5\n", "data/input.txt": "hello"})
    assert (res.status, res.stdout) == ("ok", "5 hello\nTrue\n"), res


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", "main.py", "", "a/../../b"])
def test_bad_file_names_are_refused(sandbox: Sandbox, name: str):
    if not CHECK.ok:
        pytest.skip("bubblewrap unusable here")
    res = sandbox.run_sync("python", "print(1)\n", files={name: "x"})
    assert res.status == "sandbox_error" and "bad file name" in res.reason


@needs_bwrap
def test_environment_is_scrubbed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FORGETUI_TEST_API_KEY", "sk-test-secret-value")
    res = sandbox.run_sync("python", "import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())\n")
    assert res.status == "ok"
    assert "sk-test-secret-value" not in res.stdout
    assert "FORGETUI_TEST_API_KEY" not in res.stdout


# ---- concurrency, cancellation, threads -------------------------------------------------------------


@needs_bwrap
async def test_concurrent_runs(sandbox: Sandbox):
    results = await asyncio.gather(*(sandbox.run("python", f"print({i} * 2)\n") for i in range(6)))
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(6)]


@needs_bwrap
async def test_cancellation_kills_the_sandbox(sandbox: Sandbox):
    marker = "forgetui-test-" + secrets.token_hex(6)
    source = f"import subprocess, time\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 60; : {marker}'])\ntime.sleep(60)\n"
    task = asyncio.create_task(sandbox.run("python", source, limits=Limits(wall_s=60, cpu_s=60)))
    deadline = time.monotonic() + 10
    while not processes_with(marker):
        assert time.monotonic() < deadline, "the sandbox never started"
        await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 2
    assert wait_gone(marker) == []


@needs_bwrap
async def test_wall_timeout_in_async_run(sandbox: Sandbox):
    res = await sandbox.run("python", "import time\ntime.sleep(30)\n", limits=Limits(wall_s=0.5))
    assert res.status == "wall_timeout"


# ---- the environment check and the unsandboxed fallback --------------------------------------------


@needs_bwrap
def test_check_ok_and_describe():
    check = Sandbox().check()
    assert check is Sandbox().check()  # cached per process
    assert isinstance(check, SandboxCheck) and check.ok and check.problems == []
    assert check.bwrap and os.path.isabs(check.bwrap) and check.version
    for feature in ("size", "disable_userns", "json_status_fd", "trial"):
        assert check.features[feature] is True
    text = check.describe()
    assert text.startswith(f"sandbox: usable (bubblewrap {check.version} at {check.bwrap})")
    assert "features:" in text and "languages:" in text and "python (/usr/bin/python3)" in text
    code, report = check_report()
    assert code == 0 and report == text


def test_missing_bwrap_fails_closed_with_the_fix(no_bwrap):
    check = Sandbox().check()
    assert not check.ok and check.bwrap is None
    assert any("apt-get install bubblewrap" in p for p in check.problems)
    text = check.describe()
    assert "NOT usable" in text and "--allow-unsandboxed" in text
    with pytest.raises(SandboxUnavailable) as info:
        Sandbox().run_sync("python", "print(1)\n")
    message = str(info.value)
    assert "bubblewrap" in message and "--allow-unsandboxed" in message and "sandbox check" in message
    code, report = check_report()
    assert code == SandboxUnavailable.exit_code != 0 and "apt-get install bubblewrap" in report


async def test_missing_bwrap_raises_in_async_run_too(no_bwrap):
    with pytest.raises(SandboxUnavailable):
        await Sandbox().run("python", "print(1)\n")


@pytest.fixture
def fake_bwrap_dir():
    """A directory uid 65534 can traverse (the harness drops to it before exec'ing bwrap as root)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="forgetui-fake-bwrap-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_too_old_bwrap_is_reported(monkeypatch: pytest.MonkeyPatch, fake_bwrap_dir: Path):
    tmp_path = fake_bwrap_dir
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.6.1'; else echo '--bind'; fi\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    check_mod.clear_cache()
    try:
        check = Sandbox().check()
    finally:
        monkeypatch.undo()
        check_mod.clear_cache()
    assert not check.ok and check.version == "0.6.1"
    assert any("too old" in p and ">= 0.8.0" in p for p in check.problems)
    assert check.features["size"] is False


def test_failing_trial_is_reported(monkeypatch: pytest.MonkeyPatch, fake_bwrap_dir: Path):
    tmp_path = fake_bwrap_dir
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\ncase \"$1\" in\n --version) echo 'bubblewrap 0.9.0';;\n"
        " --help) echo '--size --disable-userns --json-status-fd --die-with-parent --perms --remount-ro --cap-drop';;\n"
        " *) echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1;;\nesac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    check_mod.clear_cache()
    try:
        check = Sandbox().check()
    finally:
        monkeypatch.undo()
        check_mod.clear_cache()
    assert not check.ok and check.features["trial"] is False
    problem = " ".join(check.problems)
    assert "setting up uid map: Permission denied" in problem
    assert "apparmor_restrict_unprivileged_userns" in problem


def test_allow_unsandboxed_runs_with_rlimits_only(no_bwrap, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FORGETUI_TEST_API_KEY", "sk-unsandboxed-secret")
    box = Sandbox(allow_unsandboxed=True)
    source = (
        "import os, resource\n"
        "print(os.getsid(0) == os.getpid(), os.getuid())\n"
        "print(resource.getrlimit(resource.RLIMIT_NPROC)[0], resource.getrlimit(resource.RLIMIT_AS)[0])\n"
        "print(sorted(os.environ))\n"
        "print(os.getcwd().startswith(os.environ['HOME']))\n"
        "open('out.txt', 'w').write('x')\n"
    )
    res = box.run_sync("python", source, limits=Limits(processes=50, memory_bytes=700 << 20))
    assert res.status == "ok", res
    assert res.sandboxed is False
    lines = res.stdout.splitlines()
    expected_uid = 65534 if os.geteuid() == 0 else os.getuid()
    assert lines[0] == f"True {expected_uid}"
    assert lines[1] == f"50 {700 << 20}"
    assert "FORGETUI_TEST_API_KEY" not in lines[2] and "sk-unsandboxed-secret" not in res.stdout
    assert lines[3] == "True"
    assert res.cpu_s is not None


def test_allow_unsandboxed_statuses(no_bwrap):
    box = Sandbox(allow_unsandboxed=True)
    res = box.run_sync("python", "import time\ntime.sleep(30)\n", limits=Limits(wall_s=0.5))
    assert (res.status, res.sandboxed) == ("wall_timeout", False)
    res = box.run_sync("python", "while True:\n    pass\n", limits=Limits(cpu_s=1))
    assert res.status == "cpu_limit"
    res = box.run_sync("python", "import sys\nwhile True:\n    sys.stdout.write('x' * 4096)\n",
                       limits=Limits(stdout_bytes=10_000))
    assert res.status == "output_limit" and len(res.stdout) == 10_000
    res = box.run_sync("sh", "exit 4\n")
    assert (res.status, res.exit_code) == ("runtime_error", 4)


@needs_bwrap
async def test_no_descriptor_or_thread_leaks(sandbox: Sandbox):
    import threading

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    await sandbox.run("python", "print(1)\n")  # warm-up: executor threads, caches
    before_fds, before_threads = fds(), threading.active_count()
    for _ in range(5):
        await sandbox.run("python", "print(1)\n", stdin="x")
        await sandbox.run("python", "import sys\nwhile True: sys.stdout.write('x' * 4096)\n",
                          limits=Limits(stdout_bytes=4096))
        await sandbox.run("sh", "sleep 5\n", limits=Limits(wall_s=0.2))
        sandbox.run_sync("sh", "exit 1\n")
    assert fds() == before_fds
    assert threading.active_count() <= before_threads


def test_public_api_names():
    assert set(sandbox_pkg.__all__) == {"STATUSES", "Limits", "Sandbox", "SandboxCheck", "SandboxResult",
                                        "SandboxUnavailable", "check_report"}
