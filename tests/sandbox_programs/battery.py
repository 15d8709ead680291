"""The adversarial sandbox battery: every row of research note A3 (reliability-anchors.md).

Stdlib only, plus ``forgetui.sandbox``: the same rows run in pytest as root (CI's user) and, through
``python3 battery.py``, as an unprivileged user under the system interpreter (see
tests/test_sandbox_battery.py for how). Each row returns a list of failures; empty means contained.

Host-side checks happen in the harness process: a secret in the harness's environment, a listener
on 127.0.0.1 and an abstract unix socket that must see no connection, host /tmp files that must
not appear, and no surviving process carrying the row's unique marker in its command line.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from forgetui.sandbox import Limits, Sandbox, SandboxResult

SECRET_ENV = "FORGETUI_BATTERY_OPENAI_API_KEY"
#: A root-only directory under /usr on Debian with polkit; listing it must fail when it exists.
ROOT_ONLY_DIR = "/usr/share/polkit-1/rules.d"


@dataclass
class Context:
    """Host-side state for one battery pass."""

    secret: str
    decoy: str  # a 0600 file (root-owned when the harness is root) holding decoy_text
    decoy_text: str
    harness_pid: int = field(default_factory=os.getpid)
    marker: str = ""
    tcp: socket.socket | None = None
    unix: socket.socket | None = None
    abstract_name: str = ""
    #: Host-view (real, effective, saved, fs) uids of the row's marker processes.
    probed_uids: list[tuple[int, ...]] = field(default_factory=list)

    def fresh_marker(self) -> str:
        self.marker = "forgetui-battery-" + secrets.token_hex(6)
        return self.marker

    def open_listeners(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.abstract_name = "forgetui-battery-" + secrets.token_hex(6)
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(8)
        self.unix.setblocking(False)

    def close_listeners(self) -> None:
        for sock in (self.tcp, self.unix):
            if sock is not None:
                sock.close()

    def connections_seen(self) -> list[str]:
        seen = []
        for name, sock in (("tcp 127.0.0.1", self.tcp), ("abstract unix", self.unix)):
            if sock is None:
                continue
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                continue
            conn.close()
            seen.append(name)
        return seen


# ---- host-side helpers ----------------------------------------------------------------------------


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (scan of /proc)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def wait_gone(marker: str, timeout: float = 2.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rfind(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start time) of every live descendant of ``root``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: set[tuple[int, int]] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _start_time(pid)
        if start is not None:
            out.add((pid, start))
        todo.extend(children.get(pid, []))
    return out


def still_alive(procs: set[tuple[int, int]]) -> list[int]:
    return [pid for pid, start in procs if _start_time(pid) == start]


def _host_uids(pid: int) -> tuple[int, ...] | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except (OSError, ValueError):
        return None
    return None


def _json(result: SandboxResult) -> dict:
    for line in reversed(result.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    raise AssertionError(f"no JSON on stdout: {result.stdout[-300:]!r} stderr={result.stderr[-300:]!r}")


def _fill(source: str, **values: object) -> str:
    for key, value in values.items():
        source = source.replace(f"@{key}@", repr(value))
    return source


# ---- the rows -------------------------------------------------------------------------------------


@dataclass
class Row:
    num: int
    title: str
    source: str  # python unless language says otherwise; @NAME@ placeholders filled from ctx
    expect: str
    check: Callable[[SandboxResult, dict, "Context"], list[str]] | None = None
    limits: dict = field(default_factory=dict)
    language: str = "python"
    #: Rows whose programs leave children carrying the marker: asserted gone after the run.
    survivors: bool = False
    max_wall: float | None = None
    needs: str | None = None  # a host path that must exist, else the row is skipped
    #: Read the host-view uid of the program's marker child while the run is in progress.
    host_probe: bool = False


_ERRNO = "import errno, json, os, sys\ndef en(e): return errno.errorcode.get(e.errno, str(e.errno))\n"


def _c1(res, doc, ctx):
    fails = []
    blob = res.stdout + res.stderr
    if ctx.secret in blob:
        fails.append("the harness's secret leaked into the sandbox")
    pid1 = doc["pid1"]
    keys = sorted(item.split("=", 1)[0] for item in pid1.split("\0") if item)
    if keys != ["PATH"]:
        fails.append(f"bwrap's /proc/1/environ holds {keys}, expected only PATH")
    bad = [k for k in doc["self"] if "KEY" in k.upper() or "TOKEN" in k.upper() or "SECRET" in k.upper()]
    if bad:
        fails.append(f"secret-like variables inside: {bad}")
    return fails


ROW1 = Row(1, "reads /proc/1/environ and os.environ for keys", _ERRNO + """
out = {"self": dict(os.environ), "others": {}}
try:
    out["pid1"] = open("/proc/1/environ", "rb").read().decode("utf-8", "replace")
except OSError as e:
    out["pid1"] = "ERR " + en(e)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        out["others"][pid] = open(f"/proc/{pid}/environ", "rb").read().decode("utf-8", "replace")
    except OSError as e:
        out["others"][pid] = "ERR " + en(e)
print(json.dumps(out))
""", "ok", _c1)


def _c2(res, doc, ctx):
    fails = []
    for path, outcome in doc["paths"].items():
        if outcome not in ("ENOENT", "EACCES"):
            fails.append(f"{path}: {outcome}, expected ENOENT or EACCES")
    if os.path.isdir(ROOT_ONLY_DIR) and doc["paths"].get(ROOT_ONLY_DIR) != "EACCES":
        fails.append(f"root-only {ROOT_ONLY_DIR} gave {doc['paths'].get(ROOT_ONLY_DIR)}: the sandbox is mapped root")
    if not ctx.probed_uids:
        fails.append("could not see the sandboxed process from the host to check its uid")
    elif any(uid == 0 for uids in ctx.probed_uids for uid in uids):
        fails.append(f"sandboxed processes run as host root: {ctx.probed_uids} (privileges not dropped)")
    if ctx.decoy_text in res.stdout + res.stderr:
        fails.append("the decoy's content was read")
    return fails


ROW2 = Row(2, "reads ssh keys, /root, /home, /etc/shadow, a 0600 root decoy, /run, docker socket", _ERRNO + """
paths = ["/tmp/.ssh/id_rsa", os.path.expanduser("~/.ssh/id_rsa"), "/root/.ssh/id_rsa", "/root", "/home",
         "/etc/shadow", "/etc/sudoers", "/etc/ssh", @DECOY@, "/run", "/var/run/docker.sock",
         "/run/docker.sock", "/proc/1/root/etc/shadow", @HOSTDIR@, @ROOTONLY@]
res = {}
for p in paths:
    try:
        if os.path.isdir(p):
            os.listdir(p)
            res[p] = "LISTED"
        else:
            res[p] = "READ " + open(p, "rb").read(200).decode("utf-8", "replace")
    except OSError as e:
        res[p] = en(e)
import subprocess, time
probe = subprocess.Popen(["/bin/sh", "-c", "sleep 5; : " + @MARKER@])
print(json.dumps({"paths": res}), flush=True)
time.sleep(1.0)  # the harness reads the probe's host uid meanwhile
""", "ok", _c2, host_probe=True)


def _c3(res, doc, ctx):
    expected = {
        "tcp_1.1.1.1": {"ENETUNREACH"},
        "udp_1.1.1.1": {"ENETUNREACH"},
        "host_listener": {"ECONNREFUSED"},
        "abstract_unix": {"ECONNREFUSED"},
        "getaddrinfo": {"gaierror"},
    }
    fails = [f"{k}: {doc.get(k)}, expected {sorted(v)}" for k, v in expected.items() if doc.get(k) not in v]
    seen = ctx.connections_seen()
    if seen:
        fails.append(f"host listeners saw connections: {seen}")
    return fails


ROW3 = Row(3, "network: 1.1.1.1, a host 127.0.0.1 listener, a host abstract socket, DNS", _ERRNO + """
import socket
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "CONNECTED"
    except socket.gaierror:
        res[name] = "gaierror"
    except OSError as e:
        res[name] = en(e)
def tcp(host, port):
    s = socket.socket()
    s.settimeout(3)
    s.connect((host, port))
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect("\\0" + @ABSTRACT@)
attempt("tcp_1.1.1.1", lambda: tcp("1.1.1.1", 53))
attempt("udp_1.1.1.1", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53)))
attempt("host_listener", lambda: tcp("127.0.0.1", @PORT@))
attempt("abstract_unix", abstract)
attempt("getaddrinfo", lambda: socket.getaddrinfo("example.com", 80))
print(json.dumps(res))
""", "ok", _c3)


def _c4(res, doc, ctx):
    fails = []
    for path, outcome in doc.items():
        if path.startswith("/tmp/"):
            if outcome != "WROTE":
                fails.append(f"{path}: {outcome}, expected a private writable /tmp")
            if os.path.exists(path):
                fails.append(f"{path} appeared on the host")
        elif outcome != "EROFS":
            fails.append(f"{path}: {outcome}, expected EROFS")
    return fails


ROW4 = Row(4, "writes /usr, /src, /etc, /, /dev; writes /tmp", _ERRNO + """
res = {}
for p in ["/usr/x", "/src/x", "/etc/x", "/x", "/dev/x", "/tmp/" + @MARKER@]:
    try:
        with open(p, "w") as f:
            f.write("x")
        res[p] = "WROTE"
    except OSError as e:
        res[p] = en(e)
print(json.dumps(res))
""", "ok", _c4)


def _c5(res, doc, ctx):
    fails = []
    caps = {"/dev/shm": 4 << 20, "/tmp": 8 << 20}
    for d, (written, err) in doc.items():
        if d in caps:
            if err != "ENOSPC" or written > caps[d]:
                fails.append(f"{d}: {written} bytes then {err}, expected ENOSPC at <= {caps[d]}")
        elif err != "EROFS" or written:
            fails.append(f"{d}: {written} bytes then {err}, expected EROFS")
    return fails


ROW5 = Row(5, "fills /, /dev, /dev/shm, /tmp with many files", _ERRNO + """
res = {}
chunk = b"\\0" * 65536
for d in ["/", "/dev", "/dev/shm", "/tmp"]:
    written, err = 0, None
    for i in range(2000):
        try:
            fd = os.open(os.path.join(d, f"fill{i}"), os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as e:
            err = en(e)
            break
        try:
            for _ in range(16):
                written += os.write(fd, chunk)
        except OSError as e:
            err = en(e)
            break
        finally:
            os.close(fd)
    res[d] = [written, err]
print(json.dumps(res))
""", "ok", _c5, limits={"tmp_bytes": 8 << 20, "shm_bytes": 4 << 20})


def _c6(res, doc, ctx):
    if doc["err"] != "EFBIG" or doc["size"] != 4 << 20:
        return [f"stopped at {doc['size']} bytes with {doc['err']}, expected EFBIG at {4 << 20}"]
    return []


ROW6 = Row(6, "one huge file, SIGXFSZ ignored", _ERRNO + """
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
fd = os.open("/tmp/big", os.O_WRONLY | os.O_CREAT, 0o644)
chunk = b"\\0" * (1 << 20)
err = None
try:
    for _ in range(64):
        os.write(fd, chunk)
except OSError as e:
    err = en(e)
print(json.dumps({"err": err, "size": os.fstat(fd).st_size}))
""", "ok", _c6, limits={"file_size_bytes": 4 << 20})


def _c7(res, doc, ctx):
    fails = []
    if doc["err"] != "EAGAIN":
        fails.append(f"fork bomb ended with {doc['err']}, expected EAGAIN")
    if doc["forks"] > 64:
        fails.append(f"{doc['forks']} forks, more than the process limit 64")
    return fails


ROW7 = Row(7, "fork bomb, children sleep", _ERRNO + """
n, err = 0, None
for i in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        err = en(e)
        break
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c", "sleep 60; : " + @MARKER@])
    n += 1
print(json.dumps({"forks": n, "err": err}))
""", "ok", _c7, survivors=True, max_wall=10)


def _c8(res, doc, ctx):
    fails = []
    if "can't start new thread" not in (doc["err"] or ""):
        fails.append(f"thread bomb ended with {doc['err']!r}")
    if doc["threads"] > 64:
        fails.append(f"{doc['threads']} threads, more than the process limit 64")
    return fails


ROW8 = Row(8, "thread bomb", _ERRNO + """
import threading
threading.stack_size(256 * 1024)
ev = threading.Event()
n, err = 0, None
try:
    while n < 2000:
        threading.Thread(target=ev.wait, daemon=True).start()
        n += 1
except RuntimeError as e:
    err = str(e)
print(json.dumps({"threads": n, "err": err}))
ev.set()
""", "ok", _c8)


def _c9(res, doc, ctx):
    fails = []
    if "MemoryError" not in res.reason:
        fails.append(f"reason {res.reason!r}, expected MemoryError")
    got = [int(x) for x in res.stdout.split()]
    if got and got[-1] * 50 > 512:
        fails.append(f"allocated {got[-1] * 50} MiB past a 512 MiB limit")
    return fails


ROW9 = Row(9, "memory bomb (50 MiB chunks)", """
import sys
chunks = []
while True:
    chunks.append(bytearray(50 << 20))
    print(len(chunks), flush=True)
""", "memory_limit", _c9, limits={"memory_bytes": 512 << 20}, max_wall=10)


def _c10(res, doc, ctx):
    fails = []
    if len(res.stdout) != 256 << 10 or not res.stdout_truncated:
        fails.append(f"kept {len(res.stdout)} chars (truncated={res.stdout_truncated}), expected the 256 KiB cap")
    return fails


ROW10 = Row(10, "infinite stdout", """
import subprocess, sys
subprocess.Popen(["/bin/sh", "-c", "sleep 60; : " + @MARKER@])
while True:
    sys.stdout.write("x" * 65536)
""", "output_limit", _c10, limits={"stdout_bytes": 256 << 10}, survivors=True, max_wall=5)


def _c11(res, doc, ctx):
    if not 2.0 <= res.wall_s < 3.5:
        return [f"wall {res.wall_s:.2f} s for a 2 s limit"]
    return []


ROW11 = Row(11, "sleep(100)", """
import subprocess, time
subprocess.Popen(["/bin/sh", "-c", "sleep 100; : " + @MARKER@])
time.sleep(100)
""", "wall_timeout", _c11, limits={"wall_s": 2.0}, survivors=True, max_wall=6)


def _c12(res, doc, ctx):
    if res.wall_s > 3.5:
        return [f"wall {res.wall_s:.2f} s for a 1 s CPU limit"]
    return []


ROW12 = Row(12, "while True: pass", "while True:\n    pass\n", "cpu_limit", _c12, limits={"cpu_s": 1.0}, max_wall=6)

_DAEMON = """
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        if @DETACH@:
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
        os.execv("/bin/sh", ["sh", "-c", "sleep 60; : " + @MARKER@])
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.2)
print("main done", flush=True)
"""


def _c_daemon(res, doc, ctx):
    return [] if "main done" in res.stdout else [f"stdout {res.stdout!r}"]


ROW13 = Row(13, "double-fork + setsid daemon, main exits", _DAEMON.replace("@DETACH@", "True"), "ok",
            _c_daemon, survivors=True, max_wall=5)
ROW14 = Row(14, "daemon keeps stdout open and sleeps 60 s", _DAEMON.replace("@DETACH@", "False"), "ok",
            _c_daemon, survivors=True, max_wall=5)


def _c15(res, doc, ctx):
    fails = []
    if doc["pids"] != [1, 2] or doc["self"] != 2:
        fails.append(f"visible pids {doc['pids']} (self {doc['self']}), expected [1, 2]")
    keys = sorted(item.split("=", 1)[0] for item in doc["environ"].get("1", "").split("\0") if item)
    if keys != ["PATH"]:
        fails.append(f"PID 1 environ holds {keys}")
    if doc["sysrq"] not in ("ENOENT", "EACCES", "EROFS", "EPERM"):
        fails.append(f"/proc/sysrq-trigger write: {doc['sysrq']}")
    return fails


ROW15 = Row(15, "lists /proc, reads other PIDs, writes /proc/sysrq-trigger", _ERRNO + """
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
res = {"pids": pids, "self": os.getpid(), "environ": {}, "cmdline": {}}
for p in pids:
    for what in ("environ", "cmdline"):
        try:
            res[what][str(p)] = open(f"/proc/{p}/{what}", "rb").read().decode("utf-8", "replace")
        except OSError as e:
            res[what][str(p)] = "ERR " + en(e)
try:
    with open("/proc/sysrq-trigger", "w") as f:
        f.write("h")
    res["sysrq"] = "WROTE"
except OSError as e:
    res["sysrq"] = en(e)
print(json.dumps(res))
""", "ok", _c15)


def _c16(res, doc, ctx):
    fails = []
    try:
        os.kill(ctx.harness_pid, 0)
    except OSError:
        fails.append("the harness is dead")
    if doc.get("harness") != "ESRCH":
        fails.append(f"kill(harness pid): {doc.get('harness')}, expected ESRCH")
    return fails


ROW16 = Row(16, "kill(getppid()), kill(-1), kill(harness pid)", _ERRNO + """
import signal
res = {}
for name, pid in (("parent", os.getppid()), ("all", -1), ("harness", @HARNESS@), ("init", 1)):
    try:
        os.kill(pid, signal.SIGKILL)
        res[name] = "sent"
    except OSError as e:
        res[name] = en(e)
print(json.dumps(res))
""", "ok", _c16)


def _c17(res, doc, ctx):
    expected = {"user": "ENOSPC", "net": "EPERM", "mount": "EPERM"}
    return [f"unshare({k}): {doc.get(k)}, expected {v}" for k, v in expected.items() if doc.get(k) != v]


ROW17 = Row(17, "unshare(CLONE_NEWUSER), unshare(CLONE_NEWNET)", _ERRNO + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
res = {}
for name, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000)):
    rc = libc.unshare(flag)
    res[name] = "OK" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(res))
""", "ok", _c17)


def _c18(res, doc, ctx):
    fails = []
    if doc["tty"] != "ENXIO":
        fails.append(f"/dev/tty: {doc['tty']}, expected ENXIO")
    for fd, outcome in doc["tiocsti"].items():
        if outcome == "OK":
            fails.append(f"TIOCSTI on fd {fd} succeeded")
    return fails


ROW18 = Row(18, "open /dev/tty + TIOCSTI", _ERRNO + """
import fcntl, termios
res = {"tiocsti": {}}
try:
    os.open("/dev/tty", os.O_RDWR)
    res["tty"] = "OPENED"
except OSError as e:
    res["tty"] = en(e)
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        res["tiocsti"][fd] = "OK"
    except OSError as e:
        res["tiocsti"][fd] = en(e)
print(json.dumps(res))
""", "ok", _c18)


def _c19(res, doc, ctx):
    fails = [f"{k}: {v}, expected ENOENT" for k, v in doc.items() if v != "ENOENT"]
    if ctx.decoy_text in res.stdout + res.stderr:
        fails.append("the decoy was read through a symlink")
    return fails


ROW19 = Row(19, "symlink /tmp/l -> a host secret path, read it", _ERRNO + """
res = {}
for i, target in enumerate([@DECOY@, "/root/.bashrc", "/etc/shadow", "/home"]):
    link = f"/tmp/l{i}"
    os.symlink(target, link)
    try:
        res[target] = "READ " + open(link, "rb").read(100).decode("utf-8", "replace")
    except OSError as e:
        res[target] = en(e)
print(json.dumps(res))
""", "ok", _c19)

_ALLOWED_RW = {"/tmp": "tmpfs", "/dev/shm": "tmpfs", "/dev/pts": "devpts", "/proc": "proc", "/dev/mqueue": "mqueue"}


def _c20(res, doc, ctx):
    fails = []
    if doc["plant_src"] != "EROFS":
        fails.append(f"symlink in /src: {doc['plant_src']}, expected EROFS")
    for point, fstype, is_dir in doc["rw"]:
        if not is_dir:
            continue  # /dev/null and friends: device nodes, not directories
        if _ALLOWED_RW.get(point) != fstype:
            fails.append(f"writable host-backed or unexpected mount {point} ({fstype})")
    return fails


ROW20 = Row(20, "plant out/result.json -> /etc/shadow in any writable dir", _ERRNO + """
res = {"rw": []}
try:
    os.symlink("/etc/shadow", "/src/result.json")
    res["plant_src"] = "PLANTED"
except OSError as e:
    res["plant_src"] = en(e)
os.makedirs("/tmp/out", exist_ok=True)
os.symlink("/etc/shadow", "/tmp/out/result.json")
for line in open("/proc/self/mountinfo"):
    left, _, right = line.partition(" - ")
    parts = left.split()
    point, opts = parts[4], parts[5].split(",")
    fstype = right.split()[0]
    if "rw" in opts:
        res["rw"].append([point, fstype, os.path.isdir(point)])
print(json.dumps(res))
""", "ok", _c20)


def _c21(res, doc, ctx):
    return [f"{k}: {v}, expected EXDEV or EPERM" for k, v in doc.items() if v not in ("EXDEV", "EPERM")]


ROW21 = Row(21, "cross-mount hard link", _ERRNO + """
res = {}
for src, dst in (("/usr/bin/python3", "/tmp/x"), ("/src/main.py", "/tmp/y")):
    try:
        os.link(os.path.realpath(src), dst)
        res[src] = "LINKED"
    except OSError as e:
        res[src] = en(e)
print(json.dumps(res))
""", "ok", _c21)


def _c22(res, doc, ctx):
    fds = sorted(int(x) for x in doc["fds"])
    if not set(fds) <= {0, 1, 2, 3} or len(fds) > 4:
        return [f"open fds {fds}, expected only 0, 1, 2 (+ the listing's own)"]
    return []


ROW22 = Row(22, "lists /proc/self/fd", _ERRNO + """
print(json.dumps({"fds": os.listdir("/proc/self/fd")}))
""", "ok", _c22)


def _c25(res, doc, ctx):
    want = ["sub", "285", "16", "tmp ok"]
    return [f"missing {w!r} in stdout {res.stdout!r}" for w in want if w not in res.stdout.split("\n")]


ROW25 = Row(25, "normal program: tempfile, subprocess, multiprocessing.Pool, /dev/null, /dev/urandom", """
import multiprocessing, os, subprocess, tempfile
def sq(x):
    return x * x
if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "f"), "w") as f:
            f.write("x")
    print("tmp ok")
    print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
    with multiprocessing.Pool(2) as pool:
        print(sum(pool.map(sq, range(10))))
    with open("/dev/null", "w") as f:
        f.write("x")
    print(len(open("/dev/urandom", "rb").read(16)))
""", "ok", _c25)


def _c25c(res, doc, ctx):
    return [] if res.stdout.strip() == "c 42" else [f"stdout {res.stdout!r} stderr {res.stderr[-300:]!r}"]


ROW25C = Row(25, "normal program: gcc compile + run", """
#include <stdio.h>
#include <math.h>
int main(void) { printf("c %d\\n", (int)sqrt(1764.0)); return 0; }
""", "ok", _c25c, language="c", needs="/usr/bin/gcc")


def _c26(res, doc, ctx):
    return [] if res.stdout.strip() == "node 42" else [f"stdout {res.stdout!r} stderr {res.stderr[-300:]!r}"]


ROW26 = Row(26, "Node hello world at the configured address space", "console.log('node', 6 * 7)\n", "ok", _c26,
            language="node", needs="/usr/bin/node")

ROWS: list[Row] = [ROW1, ROW2, ROW3, ROW4, ROW5, ROW6, ROW7, ROW8, ROW9, ROW10, ROW11, ROW12, ROW13, ROW14,
                   ROW15, ROW16, ROW17, ROW18, ROW19, ROW20, ROW21, ROW22, ROW25, ROW25C, ROW26]


def row_id(row: Row) -> str:
    return f"row{row.num:02d}" + ("c" if row is ROW25C else "")


def run_row(sandbox: Sandbox, row: Row, ctx: Context, hostdir: str) -> tuple[str | None, list[str]]:
    """Run one row; returns (observed label, failures)."""
    marker = ctx.fresh_marker()
    source = _fill(row.source, MARKER=marker, DECOY=ctx.decoy, PORT=ctx.tcp.getsockname()[1] if ctx.tcp else 0,
                   ABSTRACT=ctx.abstract_name, HARNESS=ctx.harness_pid, HOSTDIR=hostdir, ROOTONLY=ROOT_ONLY_DIR)
    started = time.monotonic()
    ctx.probed_uids = []
    if row.host_probe:
        box: dict = {}
        worker = threading.Thread(target=lambda: box.update(
            res=sandbox.run_sync(row.language, source, limits=Limits(**row.limits))))
        worker.start()
        while worker.is_alive() and not ctx.probed_uids:
            for pid in processes_with(marker):
                uids = _host_uids(pid)
                if uids:
                    ctx.probed_uids.append(uids)
            time.sleep(0.02)
        worker.join()
        res = box["res"]
    else:
        res = sandbox.run_sync(row.language, source, limits=Limits(**row.limits))
    took = time.monotonic() - started
    fails: list[str] = []
    if res.status != row.expect:
        fails.append(f"status {res.label} ({res.reason}), expected {row.expect}; stderr: {res.stderr[-400:]!r}")
    if not res.sandboxed:
        fails.append("ran unsandboxed")
    if row.max_wall is not None and took > row.max_wall:
        fails.append(f"the harness took {took:.2f} s, expected < {row.max_wall} s")
    if row.check is not None and not fails:
        try:
            doc = _json(res) if row.source.lstrip().startswith("import errno") else {}
            fails += row.check(res, doc, ctx)
        except (AssertionError, KeyError, ValueError, TypeError, IndexError) as exc:
            fails.append(f"check failed: {exc!r}")
    if ctx.secret in res.stdout + res.stderr:
        fails.append("the harness's secret appeared in the output")
    left = wait_gone(marker, 2.0)
    if left:
        fails.append(f"surviving processes {left} carry the row's marker")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return res.label, fails


# ---- rows 23 and 24: harness behaviour ---------------------------------------------------------------

_SUB_HARNESS = """
import sys
sys.path.insert(0, sys.argv[1])
from forgetui.sandbox import Limits, Sandbox
src = "import subprocess, time\\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 60; : ' + %r])\\ntime.sleep(60)\\n"
import os
print("starting", flush=True)
Sandbox().run_sync("python", src % os.environ["BATTERY_MARKER"], limits=Limits(wall_s=60, cpu_s=60))
"""


def row23(pkg_parent: str) -> tuple[str, list[str]]:
    """The harness is SIGKILLed mid-run: every sandbox process must be gone within 2 s."""
    marker = "forgetui-battery-" + secrets.token_hex(6)
    # The marker goes in the environment, not argv: the scan below must only find sandbox processes.
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "BATTERY_MARKER": marker}
    harness = subprocess.Popen([sys.executable, "-c", _SUB_HARNESS, pkg_parent], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    fails: list[str] = []
    try:
        deadline = time.monotonic() + 15
        while not processes_with(marker):
            if time.monotonic() > deadline or harness.poll() is not None:
                err = harness.stderr.read().decode() if harness.poll() is not None else ""
                return "error", [f"the sandbox never started: {err[-400:]}"]
            time.sleep(0.05)
        tree = descendants(harness.pid)
        if len(tree) < 3:
            fails.append(f"expected bwrap, its init and the program under the harness, saw {len(tree)}")
        harness.kill()
        harness.wait(5)
        deadline = time.monotonic() + 2.0
        while still_alive(tree) and time.monotonic() < deadline:
            time.sleep(0.02)
        left = still_alive(tree)
        if left:
            fails.append(f"sandbox processes {left} survived the harness by 2 s")
        if processes_with(marker):
            fails.append("processes with the run's marker survived")
        # The killed harness could not remove its run directory; the next forgetui process does.
        from forgetui.sandbox.command import sweep_stale

        removed = sweep_stale()
        if not any(f"-{harness.pid}-" in path for path in removed):
            fails.append(f"the killed harness's run directory was not swept (removed: {removed})")
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if harness.stderr:
            harness.stderr.close()
        for pid in processes_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return ("contained" if not fails else "leaked"), fails


async def row24_async(sandbox: Sandbox) -> tuple[str, list[str]]:
    """The run is started from a thread that exits at once; the sandbox must not die with it."""
    loop = asyncio.get_running_loop()
    holder: dict = {}

    def starter() -> None:
        coro = sandbox.run("python", "import time\ntime.sleep(1.0)\nprint('survived')\n")
        holder["future"] = asyncio.run_coroutine_threadsafe(coro, loop)

    thread = threading.Thread(target=starter)
    thread.start()
    thread.join()  # the starting thread is gone before the program finishes
    res = await asyncio.wrap_future(holder["future"])
    fails = []
    if res.status != "ok" or res.stdout.strip() != "survived":
        fails.append(f"{res.label}: {res.reason}; stdout {res.stdout!r}")
    # And a blocking run from a short-lived worker thread of its own.
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(res=sandbox.run_sync(
        "python", "import time\ntime.sleep(0.5)\nprint('survived')\n")))
    worker.start()
    await asyncio.to_thread(worker.join)
    res2 = box["res"]
    if res2.status != "ok" or res2.stdout.strip() != "survived":
        fails.append(f"run_sync in a thread: {res2.label}: {res2.reason}")
    return res.label, fails


# ---- the unprivileged driver ------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """python3 battery.py PKG_PARENT DECOY DECOY_TEXT HOSTDIR: runs every row, prints JSON."""
    pkg_parent, decoy, decoy_text, hostdir = argv[1:5]
    ctx = Context(secret=os.environ.get(SECRET_ENV, "missing-secret"), decoy=decoy, decoy_text=decoy_text)
    sandbox = Sandbox()
    report: dict[str, dict] = {"uid": os.getuid(), "check": sandbox.check().describe(), "rows": {}}
    ctx.open_listeners()
    try:
        for row in ROWS:
            if row.needs and not os.path.exists(row.needs):
                report["rows"][row_id(row)] = {"label": "skipped", "failures": [], "skipped": row.needs}
                continue
            try:
                label, fails = run_row(sandbox, row, ctx, hostdir)
            except Exception as exc:  # report, keep going
                label, fails = "error", [f"{type(exc).__name__}: {exc}"]
            report["rows"][row_id(row)] = {"label": label, "failures": fails}
    finally:
        ctx.close_listeners()
    try:
        label, fails = row23(pkg_parent)
    except Exception as exc:
        label, fails = "error", [f"{type(exc).__name__}: {exc}"]
    report["rows"]["row23"] = {"label": label, "failures": fails}
    try:
        label, fails = asyncio.run(row24_async(sandbox))
    except Exception as exc:
        label, fails = "error", [f"{type(exc).__name__}: {exc}"]
    report["rows"]["row24"] = {"label": label, "failures": fails}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
