"""A handful of whole-screen SVG snapshots at fixed sizes: layout and theme regressions show up
here (tests/snapshot.py explains updating). Content is deterministic: no providers, no clock,
synthetic run documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from forgetui.config import Config, TuiSettings
from forgetui.tui.app import ForgetApp
from forgetui.tui.screens.failures import FailuresScreen
from tests.snapshot import assert_snapshot
from tests.tui_helpers import wait_until


def _doc() -> dict:
    case = {"case_id": "QX01-sum", "category": "math", "hard": False, "tags": ["arith"], "grader": "numeric",
            "status": "fail", "reason": "expected 42, got 41", "prompt": [{"role": "user", "content": "What is 40+2?"}],
            "response": "The answer is 41.", "reasoning": "40 plus 2... 41?", "tool_calls": [], "steps": 1,
            "extracted": "41", "expected": "42", "details": {}, "usage": {"prompt_tokens": 12, "completion_tokens": 6},
            "timings": None, "finish_reason": "stop", "outcome": "finished", "error": None, "ttft_s": 0.25, "e2e_s": 0.5}
    other = dict(case, case_id="QX02-json", category="json", grader="json", reason="not valid JSON",
                 response="{oops", extracted=None, expected=None, reasoning="")
    return {"run_id": "20260101-000000-snap-0000", "name": "snap", "status": "complete", "profile": None,
            "models": [{"model": "fake/m", "cases": [case, other]}], "totals": {}}


@pytest.mark.parametrize("theme,size", [("forgetui-dark", (80, 24)), ("forgetui-light", (120, 36)),
                                        ("forgetui-high-contrast", (80, 24))])
async def test_snapshot_run_screen_idle(home: Path, theme: str, size: tuple[int, int]) -> None:
    app = ForgetApp(start_mode="run", config=Config(tui=TuiSettings(theme=theme)))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert_snapshot(app.export_screenshot(), f"run-idle-{theme}-{size[0]}x{size[1]}")


async def test_snapshot_models_no_providers(home: Path) -> None:
    app = ForgetApp(start_mode="models")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert_snapshot(app.export_screenshot(), "models-empty-80x24")


async def test_snapshot_failures_200x60(home: Path) -> None:
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        app.push_screen(FailuresScreen(_doc()))
        await wait_until(pilot, lambda: isinstance(app.screen, FailuresScreen), what="inspector")
        await pilot.press("n")
        await pilot.pause()
        assert_snapshot(app.export_screenshot(), "failures-200x60")


async def test_snapshot_help_over_cases(home: Path) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.screen.query("DataTable") and app.screen.query_one("DataTable").row_count > 0,
                         what="cases loaded")
        await pilot.press("f1")
        await pilot.pause()
        assert_snapshot(app.export_screenshot(), "help-cases-100x30")
