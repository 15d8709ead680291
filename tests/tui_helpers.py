"""Helpers for the TUI's Pilot tests: bounded waits on app state (never bare sleeps as assertions)."""

from __future__ import annotations

import time
from typing import Callable

from forgetui.config import Config, ProviderConfig, save_config
from forgetui.paths import locations


async def wait_until(pilot, condition: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await pilot.pause(0.05)


def configure(*providers: tuple[str, str]) -> Config:
    """Write a config.toml with these (name, base_url) providers into the test's FORGETUI_HOME."""
    config = Config(providers=[ProviderConfig(name=n, base_url=u) for n, u in providers])
    save_config(config, locations().config_file)
    return config
