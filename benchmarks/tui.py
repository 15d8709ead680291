"""What the TUI costs: time to its first frame, and CPU and terminal bytes while a run streams.

Run:  uv run python benchmarks/tui.py          (about a minute; prints a table, always exits 0
                                                 unless the measurement itself broke)

Everything runs the real ``forgetui`` command in a pseudo-terminal of 120x36 (TERM=xterm-256color)
with a temporary FORGETUI_HOME, so nothing touches your config or runs.

(a) Startup: ``forgetui tui --screen models`` with an empty config; the time from spawn until the
    alternate-screen switch (``ESC[?1049h``) and until the first drawn content containing
    "forgetui" after it. Five times; median and max. Each time the app is quit with ``q``. Twice:
    with compiled bytecode (.pyc, written to a temporary PYTHONPYCACHEPREFIX by one untimed start:
    what an installed forgetui gets from its second start on), as installed (the .pyc files that
    `uv sync` compiled, `compile-bytecode = true` in pyproject.toml), and without any (an empty prefix and
    PYTHONDONTWRITEBYTECODE=1: every start compiles Textual and Rich from source, which is what
    a `uv sync` venv without --compile-bytecode gets where .pyc files cannot be written). For
    context, the import time of ``forgetui.tui.app`` alone (a subprocess importing it, minus one
    importing nothing, and ``-X importtime``'s cumulative figure).
(b) Streaming: the loopback fake server (tests/fakeserver.py, a separate process) sends 3000
    tokens, one per event, 3.33 ms apart (nominally 300 tok/s; the server paces each event from
    the previous one, so it reaches less on a busy machine: the table shows what it sent), to
    ``forgetui tui PROFILE`` (one measured request, max_tokens 3000). The pty is drained
    continuously. The TUI process's CPU time (/proc/PID/stat utime+stime, all threads) is sampled
    every 0.25 s; the window is the stream itself as the server logged it (its first token + 1 s
    to its last token - 0.5 s, on the shared CLOCK_MONOTONIC), so startup and the end of the run
    are left out. CPU% = CPU s / wall s * 100 (of one core); bytes/s = what the app wrote to the
    terminal in that window, i.e. what an SSH link would carry. Twice: SSH_CONNECTION unset (8 Hz
    refresh) and set (4 Hz). For comparison the headless path (``forgetui --run PROFILE``, all
    three streams on the pty so its live line ticks) over the same kind of window.
    ``--gap-s`` and ``--tokens`` change the stream (e.g. ``--gap-s 0.0022`` for ~300 tok/s sent
    on a busy 2-core machine).

Targets: first frame < 1 s; TUI < 10% of one core while streaming.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLS, ROWS = 120, 36
CLK_TCK = os.sysconf("SC_CLK_TCK")
ALT_SCREEN = b"\x1b[?1049h"
TOKENS, GAP_S = 3000, 0.00333
FIRST_FRAME_TARGET_S, CPU_TARGET_PCT = 1.0, 10.0


def forgetui_cmd() -> list[str]:
    """The installed console script next to this interpreter (what `uv run forgetui` executes)."""
    script = Path(sys.executable).parent / "forgetui"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from forgetui.cli import main; sys.exit(main())"]


#: Bytecode caches (see the docstring): "warm" is written by the first start, "cold" stays empty.
PYCACHE: dict[str, Path] = {}


def py_env(bytecode: str = "warm") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SSH_", "TEXTUAL_", "FORGETUI_")) and k not in ("COLORTERM", "TMUX")}
    if bytecode == "installed":
        # What `uv sync` installed (compile-bytecode = true in pyproject.toml); nothing new written.
        env.pop("PYTHONPYCACHEPREFIX", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE[bytecode])
    if bytecode == "warm":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def base_env(home: Path, ssh: bool = False, bytecode: str = "warm") -> dict[str, str]:
    env = py_env(bytecode)
    env.update(FORGETUI_HOME=str(home), TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
    if ssh:
        env["SSH_CONNECTION"] = "10.0.0.2 50000 10.0.0.1 22"
    return env


@dataclass
class PtyProc:
    """A command on the slave side of a new pty (its controlling terminal), sized COLSxROWS."""

    pid: int
    fd: int
    t_spawn: float
    out: bytearray = field(default_factory=bytearray)
    status: int | None = None

    @classmethod
    def spawn(cls, argv: list[str], env: dict[str, str]) -> PtyProc:
        t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal before the app can ask for it
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
                os.chdir(ROOT)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        return cls(pid, fd, t0)

    def read(self, timeout: float) -> bytes:
        """Whatever the app wrote within ``timeout`` s (b"" if nothing); keeps the pty drained."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        self.out += data
        return data

    def alive(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is None

    def cpu_s(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)

    def finish(self, quit_key: bytes | None = b"q", timeout: float = 10.0) -> None:
        """Send the quit key (again every second), drain, and kill after ``timeout`` s."""
        deadline, next_key = time.monotonic() + timeout, 0.0
        while self.alive() and time.monotonic() < deadline:
            if quit_key and time.monotonic() >= next_key:
                try:
                    os.write(self.fd, quit_key)
                except OSError:
                    pass
                next_key = time.monotonic() + 1.0
            self.read(0.05)
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.status = -9
        os.close(self.fd)


# ------------------------------------------------------------------------------------- startup
def startup_once(home: Path, bytecode: str) -> tuple[float, float]:
    proc = PtyProc.spawn(forgetui_cmd() + ["tui", "--screen", "models"], base_env(home, bytecode=bytecode))
    t_alt = t_frame = None
    deadline = time.monotonic() + 20
    try:
        while t_frame is None and time.monotonic() < deadline and proc.alive():
            if proc.read(0.01):
                now = time.perf_counter() - proc.t_spawn
                alt = proc.out.find(ALT_SCREEN)
                if alt >= 0 and t_alt is None:
                    t_alt = now
                if alt >= 0 and b"forgetui" in proc.out[alt:]:
                    t_frame = now
    finally:
        proc.finish()
    if t_alt is None or t_frame is None:
        raise RuntimeError(f"no first frame within 20 s; output: {bytes(proc.out[-500:])!r}")
    return t_alt, t_frame


def import_times(bytecode: str) -> tuple[float, float]:
    """(median wall s of `import forgetui.tui.app` minus an empty interpreter, -X importtime cumulative s)."""
    env = py_env(bytecode)

    def wall(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)
        return time.perf_counter() - t0

    empty = statistics.median(wall("pass") for _ in range(5))
    full = statistics.median(wall("import forgetui.tui.app") for _ in range(5))
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", "import forgetui.tui.app"],
                         capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    cumulative = 0.0
    for line in res.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*forgetui\.tui\.app$", line)
        if m:
            cumulative = int(m.group(1)) / 1e6
    return full - empty, cumulative


# ----------------------------------------------------------------------------------- streaming
def start_server(log_file: Path, tokens: int, gap_s: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, str(ROOT / "tests" / "fakeserver.py"), "--model", "m", "--tokens", str(tokens),
           "--gap-s", str(gap_s), "--max-lifetime-s", "600", "--log-file", str(log_file)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=py_env())
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("FAKESERVER_URL="):
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.strip().split("=", 1)[1]


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_profile(path: Path, url: str, tokens: int) -> None:
    path.write_text(textwrap.dedent(f"""\
        name = "tui-bench"
        [[providers]]
        name = "fake"
        base_url = "{url}"
        [models]
        targets = ["fake/m"]
        [speed]
        prompts = ["short"]
        warmup = 0
        repeats = 1
        max_tokens = {tokens}
        prefill_baseline = false
        [limits]
        idle_timeout_s = 10
        request_timeout_s = 60
        retries = 0
        """))


def run_complete(home: Path) -> bool:
    for path in home.rglob("run.json"):  # the runs dir is FORGETUI_HOME/data/runs
        try:
            if json.loads(path.read_text()).get("status") == "complete":
                return True
        except (OSError, ValueError):  # being replaced right now
            pass
    return False


@dataclass
class StreamResult:
    label: str
    cpu_pct: float
    bytes_per_s: float
    window_s: float
    server_tps: float


def stream_once(label: str, args: list[str], ssh: bool, tui: bool, tokens: int, gap_s: float) -> StreamResult:
    work = Path(tempfile.mkdtemp(prefix="forgetui-bench-"))
    try:
        return _stream(work, label, args, ssh, tui, tokens, gap_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stream(work: Path, label: str, args: list[str], ssh: bool, tui: bool, tokens: int, gap_s: float) -> StreamResult:
    server, url = start_server(work / "server.jsonl", tokens, gap_s)
    home = work / "home"
    profile = work / "profile.toml"
    write_profile(profile, url, tokens)
    samples: list[tuple[int, float, int]] = []  # (perf_counter_ns, cpu s, bytes read so far)
    limit = 30 + tokens * gap_s * 3
    try:
        proc = PtyProc.spawn(forgetui_cmd() + args + [str(profile)], base_env(home, ssh))
        try:
            deadline = time.monotonic() + limit
            next_sample = 0.0
            while proc.alive() and time.monotonic() < deadline:
                proc.read(0.02)
                if time.monotonic() >= next_sample:
                    cpu = proc.cpu_s()
                    if cpu is not None:
                        samples.append((time.perf_counter_ns(), cpu, len(proc.out)))
                    next_sample = time.monotonic() + 0.25
                    if tui and run_complete(home):
                        break
            if not run_complete(home):
                raise RuntimeError(f"{label}: the run did not complete within {limit:.0f} s; "
                                   f"output tail: {bytes(proc.out[-400:])!r}")
        finally:
            proc.finish(b"q" if tui else None)
    finally:
        stop_server(server)
    logs = [json.loads(line) for line in (work / "server.jsonl").read_text().splitlines()]
    chat = [log for log in logs if log["path"].endswith("/chat/completions")]
    if len(chat) != 1:
        raise RuntimeError(f"{label}: expected one chat request, the server saw {len(chat)}")
    sent = [e for e in chat[0]["events"] if e[1] == "content"]
    first_ns, last_ns = sent[0][0], sent[-1][0]
    server_tps = (sum(e[2] for e in sent) - 1) / ((last_ns - first_ns) / 1e9)
    lo, hi = first_ns + 1_000_000_000, last_ns - 500_000_000
    inside = [s for s in samples if lo <= s[0] <= hi]
    if len(inside) < 8:
        raise RuntimeError(f"{label}: only {len(inside)} CPU samples inside the stream window")
    (t0, c0, b0), (t1, c1, b1) = inside[0], inside[-1]
    wall = (t1 - t0) / 1e9
    return StreamResult(label, (c1 - c0) / wall * 100, (b1 - b0) / wall, wall, server_tps)


# ------------------------------------------------------------------------------------------ main
def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def startup(bytecode: str) -> tuple[list[float], list[float]]:
    home = Path(tempfile.mkdtemp(prefix="forgetui-bench-"))
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text("")
    try:
        if bytecode == "warm":
            startup_once(home, bytecode)  # one untimed start: writes the .pyc files, fills the page cache
        runs = [startup_once(home, bytecode) for _ in range(5)]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return [r[0] for r in runs], [r[1] for r in runs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=TOKENS, help=f"tokens streamed (default {TOKENS})")
    parser.add_argument("--gap-s", type=float, default=GAP_S, help=f"fake server gap between tokens (default {GAP_S})")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("benchmarks/tui.py reads /proc; it runs on Linux only")
        return 1
    print(f"forgetui TUI benchmark: {' '.join(forgetui_cmd())}, pty {COLS}x{ROWS}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    caches = Path(tempfile.mkdtemp(prefix="forgetui-bench-pyc-"))
    PYCACHE.update(warm=caches / "warm", cold=caches / "cold")
    try:
        return report(args.tokens, args.gap_s)
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def report(tokens: int, gap_s: float) -> int:
    frames: dict[str, list[float]] = {}
    print("(a) startup, spawn -> screen (5 runs each)")
    for bytecode, title in (("installed", "as installed"), ("warm", "with .pyc"), ("cold", "no .pyc  ")):
        alt, frame = startup(bytecode)
        frames[bytecode] = frame
        imp_wall, imp_cumulative = import_times(bytecode)
        print(f"    {title}  alternate screen median {statistics.median(alt):.3f} s, max {max(alt):.3f} s;"
              f"  first frame median {statistics.median(frame):.3f} s, max {max(frame):.3f} s")
        print(f"               import forgetui.tui.app alone: {imp_wall:.3f} s wall over an empty "
              f"interpreter, {imp_cumulative:.3f} s by -X importtime")
    print()

    results = [
        stream_once("TUI, local (8 Hz)", ["tui"], False, True, tokens, gap_s),
        stream_once("TUI, SSH (4 Hz)", ["tui"], True, True, tokens, gap_s),
        stream_once("headless --run (on a pty)", ["--run"], False, False, tokens, gap_s),
    ]
    print(f"(b) streaming {tokens} tokens, {gap_s * 1000:.2f} ms apart (nominal {1 / gap_s:.0f} tok/s); "
          f"one core = 100%")
    print(f"    {'path':<32} {'CPU %':>7} {'bytes/s':>9} {'window':>8} {'sent tok/s':>11}")
    for r in results:
        print(f"    {r.label:<32} {r.cpu_pct:7.1f} {r.bytes_per_s:9.0f} {r.window_s:7.1f}s {r.server_tps:11.0f}")
    headless = results[-1].cpu_pct
    print()
    print(f"{'target':<44} {'measured':>9}  verdict")
    for bytecode, title in (("installed", "as installed"), ("warm", "with .pyc"), ("cold", "no .pyc")):
        frame = frames[bytecode]
        print(f"{f'first frame median < 1 s ({title})':<44} {statistics.median(frame):8.3f}s  "
              f"{verdict(statistics.median(frame) < FIRST_FRAME_TARGET_S)}")
        print(f"{f'first frame max < 1 s ({title})':<44} {max(frame):8.3f}s  "
              f"{verdict(max(frame) < FIRST_FRAME_TARGET_S)}")
    for r in results[:2]:
        print(f"{r.label + ': CPU < 10% of a core':<44} {r.cpu_pct:8.1f}%  {verdict(r.cpu_pct < CPU_TARGET_PCT)}"
              f"   (headless {headless:.1f}%, TUI overhead {r.cpu_pct - headless:+.1f} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
