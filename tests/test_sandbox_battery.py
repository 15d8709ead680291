"""The adversarial sandbox battery (research note A3, rows 1-26), run twice.

Pass 1 runs in this pytest process: as root on CI (the harness drops to uid 65534 before bwrap),
as the developer's user elsewhere.

Pass 2 runs as an unprivileged user (uid/gid 65534, no supplementary groups) whenever pytest runs as
root. How: the project's venv interpreter is not usable by uid 65534 in general (on CI and the
development machines the venv's python is a pyenv build under /root, mode 0700; a checkout may
live under /root too), so the driver uses the system interpreter ``/usr/bin/python3`` (the same
one the sandbox runs programs with) and imports a *copy* of the stdlib-only sandbox package:
``forgetui/__init__.py``, ``forgetui/errors.py``, ``forgetui/sandbox/`` and
``tests/sandbox_programs/battery.py`` are copied into a fresh 0755 directory under /tmp, then

    setpriv --reuid=65534 --regid=65534 --clear-groups \\
        env PYTHONPATH=<copy> /usr/bin/python3 <copy>/battery.py ...

runs every row (23 and 24 included) and prints one JSON report; each row is then asserted here
as its own test. When pytest is not root, pass 1 already is the unprivileged pass and pass 2 skips.

Host-side checks per row (battery.py): the harness's fake API key never shows up; host listeners on
127.0.0.1 and an abstract unix socket see no connection; files written to the sandbox's /tmp do not
appear in the host's /tmp; no process carrying the row's unique marker survives the run (scan of
/proc); the harness itself stays alive.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from forgetui.sandbox import Sandbox
from tests.sandbox_programs import battery

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CHECK = Sandbox().check()
pytestmark = pytest.mark.skipif(not CHECK.ok, reason="bubblewrap unusable here: " + "; ".join(CHECK.problems))

ROW_IDS = [battery.row_id(row) for row in battery.ROWS]
EXPECTED = {battery.row_id(row): row.expect for row in battery.ROWS}
SYSTEM_PYTHON = "/usr/bin/python3"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"


@pytest.fixture(scope="module")
def decoy():
    """A 0600 file (root-owned under CI) holding a secret: no row may ever print its content."""
    text = "decoy-" + secrets.token_hex(8)
    fd, path = tempfile.mkstemp(prefix="forgetui-decoy-", dir="/tmp")
    os.write(fd, text.encode())
    os.close(fd)
    os.chmod(path, 0o600)
    yield path, text
    os.unlink(path)


@pytest.fixture(scope="module")
def ctx(decoy):
    secret = "sk-battery-" + secrets.token_hex(12)
    old = os.environ.get(battery.SECRET_ENV)
    os.environ[battery.SECRET_ENV] = secret  # in the harness's environment, as a real key would be
    context = battery.Context(secret=secret, decoy=decoy[0], decoy_text=decoy[1])
    context.open_listeners()
    yield context
    context.close_listeners()
    if old is None:
        os.environ.pop(battery.SECRET_ENV, None)
    else:
        os.environ[battery.SECRET_ENV] = old


# ---- pass 1: this process ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", battery.ROWS, ids=ROW_IDS)
def test_row_as_this_user(row: battery.Row, ctx: battery.Context):
    if row.needs and not os.path.exists(row.needs):
        pytest.skip(f"{row.needs} not installed")
    label, fails = battery.run_row(Sandbox(), row, ctx, str(ROOT))
    assert fails == [], f"row {row.num} ({row.title}): {label}"


def test_row23_harness_sigkilled_mid_run():
    label, fails = battery.row23(str(SRC))
    assert fails == [], label


async def test_row24_spawned_from_a_thread_that_exits_early():
    label, fails = await battery.row24_async(Sandbox())
    assert fails == [], label


# ---- pass 2: uid 65534 through setpriv and the system interpreter -----------------------------------


def _stage_copy() -> Path:
    stage = Path(tempfile.mkdtemp(prefix="forgetui-battery-", dir="/tmp"))
    pkg = stage / "forgetui"
    (pkg / "sandbox").mkdir(parents=True)
    shutil.copy2(SRC / "forgetui" / "__init__.py", pkg / "__init__.py")
    shutil.copy2(SRC / "forgetui" / "errors.py", pkg / "errors.py")
    for module in (SRC / "forgetui" / "sandbox").glob("*.py"):
        shutil.copy2(module, pkg / "sandbox" / module.name)
    shutil.copy2(ROOT / "tests" / "sandbox_programs" / "battery.py", stage / "battery.py")
    for path in [stage, *stage.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return stage


@pytest.fixture(scope="module")
def unprivileged_report(decoy):
    if os.geteuid() != 0:
        pytest.skip("pytest is not root: pass 1 already ran the battery unprivileged")
    if not os.path.exists(SYSTEM_PYTHON) or not os.path.exists(SETPRIV):
        pytest.skip(f"needs {SYSTEM_PYTHON} and setpriv for the unprivileged pass")
    stage = _stage_copy()
    secret = "sk-battery-unpriv-" + secrets.token_hex(12)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(stage), "LANG": "C.UTF-8", "HOME": "/nonexistent",
           "TMPDIR": "/tmp", battery.SECRET_ENV: secret}
    try:
        proc = subprocess.run(
            [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", SYSTEM_PYTHON,
             str(stage / "battery.py"), str(stage), decoy[0], decoy[1], str(ROOT)],
            env=env, capture_output=True, text=True, timeout=100, cwd="/",
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert secret not in proc.stdout
    return report


def test_unprivileged_driver_really_is_unprivileged(unprivileged_report):
    assert unprivileged_report["uid"] == 65534
    assert unprivileged_report["check"].startswith("sandbox: usable")
    assert "your uid 65534" in unprivileged_report["check"]


@pytest.mark.parametrize("row_id", ROW_IDS + ["row23", "row24"])
def test_row_as_unprivileged_user(row_id: str, unprivileged_report):
    entry = unprivileged_report["rows"][row_id]
    if entry.get("skipped"):
        pytest.skip(f"{entry['skipped']} not installed")
    assert entry["failures"] == [], f"{row_id}: {entry['label']}"
    if row_id in EXPECTED:
        assert entry["label"] == EXPECTED[row_id]
