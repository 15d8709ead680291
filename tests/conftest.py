"""Shared fixtures: an isolated FORGETUI_HOME, the loopback fake server, profile files."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

import httpx
import pytest

from tests.fake_native import NativeFake

from tests.fakeserver import FakeServer, Script


def closed_url() -> str:
    """A loopback base URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def use_case_dir(home: Path, folder: Path, files: dict[str, str] | None = None) -> Path:
    """Write ``files`` (name -> TOML text) into ``folder`` and point this test's config.toml at it
    (``case_dirs``), so the run loads those cases after the built-in library."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'case_dirs = ["{folder}"]\n')
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own FORGETUI_HOME, so nothing touches the real config or runs."""
    root = tmp_path / "home"
    monkeypatch.setenv("FORGETUI_HOME", str(root))
    return root


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeServer]]:
    """Start fake servers; all are stopped at the end of the test."""
    servers: list[FakeServer] = []

    def start(scripts: dict[str, Script] | None = None, default: Script | None = None, **kw) -> FakeServer:
        server = FakeServer(scripts=scripts, default=default, max_lifetime_s=kw.pop("max_lifetime_s", 120), **kw)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def profile_text(base_url: str, targets: list[str], *, name: str = "t", prompts: str = '["short"]',
                 warmup: int = 0, repeats: int = 2, max_tokens: int = 16, extra: str = "",
                 limits: str = "idle_timeout_s = 5\nrequest_timeout_s = 20\nretries = 2\n",
                 provider_extra: str = "") -> str:
    """A small self-contained profile pointing at ``base_url`` as provider 'fake'."""
    quoted = ", ".join(f'"{t}"' for t in targets)
    return textwrap.dedent(f"""\
        name = "{name}"
        [[providers]]
        name = "fake"
        base_url = "{base_url}"
        {provider_extra}
        [models]
        targets = [{quoted}]
        [speed]
        prompts = {prompts}
        warmup = {warmup}
        repeats = {repeats}
        max_tokens = {max_tokens}
        prefill_baseline = false
        {extra}
        [limits]
        """) + limits


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    def write(text: str, name: str = "profile.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def native() -> Iterator[Callable[..., NativeFake]]:
    """Start native-endpoint fakes (llama-server, llama-swap, router, vLLM, SGLang)."""
    fakes: list[NativeFake] = []

    def start(kind: str, **kw) -> NativeFake:
        fake = NativeFake(kind, max_lifetime_s=kw.pop("max_lifetime_s", 30), **kw).start()
        fakes.append(fake)
        return fake

    yield start
    for fake in fakes:
        fake.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        yield client
