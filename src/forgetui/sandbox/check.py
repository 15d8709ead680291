"""Can untrusted code be sandboxed on this machine? Fail closed, and say how to fix it.

Checks, in order: ``bwrap`` on PATH; its version (>= 0.8.0 for ``--disable-userns``) and the
flags we rely on (``--size``, ``--json-status-fd``, ...); ``prlimit`` and ``bash`` under /usr; then
a trial sandbox with the real invocation. The answer is cached per process (per bwrap path and euid).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from typing import Callable

from forgetui.sandbox.command import BASH, NOBODY, PRLIMIT, running_as_root
from forgetui.sandbox.toolchains import describe_toolchains
from forgetui.sandbox.types import SandboxCheck, SandboxResult

MIN_VERSION = (0, 8, 0)
_FLAGS = {
    "size": "--size",
    "disable_userns": "--disable-userns",
    "json_status_fd": "--json-status-fd",
    "die_with_parent": "--die-with-parent",
    "perms": "--perms",
    "remount_ro": "--remount-ro",
    "cap_drop": "--cap-drop",
}
_INSTALL = ("install bubblewrap >= 0.8 (Debian/Ubuntu: sudo apt-get install bubblewrap;"
            " Fedora: sudo dnf install bubblewrap; Arch: sudo pacman -S bubblewrap)")

_lock = threading.Lock()
_cache: dict[tuple[str | None, int], SandboxCheck] = {}


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def _parse_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def _sysctl(name: str) -> str | None:
    try:
        with open("/proc/sys/" + name.replace(".", "/"), encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _hints(message: str) -> list[str]:
    """Turn bwrap's failure into the fix a person can apply."""
    hints = []
    lowered = message.lower()
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1" or "uid map" in lowered \
            or "rtm_newaddr" in lowered:
        hints.append(
            "AppArmor restricts unprivileged user namespaces (Ubuntu >= 23.10:"
            " kernel.apparmor_restrict_unprivileged_userns=1): add an AppArmor profile that gives"
            " /usr/bin/bwrap the 'userns' permission (e.g. /etc/apparmor.d/bwrap with"
            " 'profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }', then"
            " sudo apparmor_parser -r /etc/apparmor.d/bwrap), or set"
            " sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"
        )
    if _sysctl("user.max_user_namespaces") == "0":
        hints.append("user namespaces are disabled: sudo sysctl user.max_user_namespaces=15000")
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        hints.append("unprivileged user namespaces are disabled: sudo sysctl kernel.unprivileged_userns_clone=1")
    if not hints and ("operation not permitted" in lowered or "creating new namespace" in lowered):
        hints.append(
            "the kernel or a container runtime forbids new namespaces here: run on the host or a VM,"
            " or allow user namespaces in the container (e.g. docker run --security-opt"
            " seccomp=unconfined --security-opt apparmor=unconfined)"
        )
    return hints


def check_environment(trial: Callable[[str], SandboxResult]) -> SandboxCheck:
    """The cached answer for the bwrap found on PATH now; ``trial(bwrap)`` runs a real sandbox."""
    bwrap = find_bwrap()
    key = (bwrap, os.geteuid())
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    result = _check(bwrap, trial)
    with _lock:
        _cache[key] = result
    return result


def _check(bwrap: str | None, trial: Callable[[str], SandboxResult]) -> SandboxCheck:
    runs_as = (
        f"uid {NOBODY} (forgetui runs as root: it drops to uid {NOBODY} before starting bwrap)"
        if running_as_root()
        else f"your uid {os.getuid()}, seen as uid {NOBODY} inside a user namespace"
    )
    check = SandboxCheck(ok=False, bwrap=bwrap, version=None, languages=describe_toolchains(), runs_as=runs_as)
    if bwrap is None:
        check.problems.append(f"bubblewrap (bwrap) is not installed or not on PATH: {_INSTALL}")
        return check
    env = {"PATH": "/usr/bin:/bin"}
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10, env=env)
        helptext = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        check.problems.append(f"cannot run {bwrap}: {exc}; {_INSTALL}")
        return check
    check.version = (version.stdout.strip() or version.stderr.strip()).removeprefix("bubblewrap ").strip() or None
    text = helptext.stdout + helptext.stderr
    for name, flag in _FLAGS.items():
        check.features[name] = flag in text
    parsed = _parse_version(check.version or "")
    if parsed is None or parsed < MIN_VERSION:
        check.problems.append(
            f"bubblewrap {check.version or '(unknown version)'} is too old: forgetui needs >= 0.8.0"
            f" (--disable-userns, --size); Ubuntu 22.04 ships 0.6: {_INSTALL}, e.g. from backports"
        )
    missing = [flag for name, flag in _FLAGS.items() if not check.features[name]]
    if missing and parsed is not None and parsed >= MIN_VERSION:
        check.problems.append(f"{bwrap} lacks {', '.join(missing)}: {_INSTALL}")
    check.features["prlimit"] = os.path.exists(PRLIMIT)
    if not check.features["prlimit"]:
        check.problems.append(f"{PRLIMIT} is missing: install util-linux")
    check.features["bash"] = os.path.exists(BASH)
    if not check.features["bash"]:
        check.problems.append(f"{BASH} is missing: install bash (the sandbox's launcher script needs it)")
    check.features["merged_usr"] = os.path.islink("/bin")
    if check.problems:
        return check
    try:
        outcome = trial(bwrap)
    except Exception as exc:  # a bug or an OS refusal: report it, never run unsandboxed silently
        outcome = None
        message = f"{type(exc).__name__}: {exc}"
    else:
        message = outcome.reason
    trial_ok = outcome is not None and outcome.status == "ok" and outcome.stdout.strip() == "sandbox-ok"
    check.features["trial"] = trial_ok
    if not trial_ok:
        detail = message
        if outcome is not None and outcome.status == "ok":
            detail = f"unexpected output {outcome.stdout[:80]!r}"
        problem = f"a trial sandbox failed: {detail}"
        hints = _hints(detail + " " + (outcome.stderr if outcome else ""))
        if hints:
            problem += "; fix: " + "; or ".join(hints)
        check.problems.append(problem)
        return check
    check.ok = True
    return check
