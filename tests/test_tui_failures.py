"""The failure inspector: lists a stored run's failed/errored cases, steps through them, shows
model text inertly, copies an answer, and re-runs a case through the real engine."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from forgetui.cases.loader import library_dirs, load_library
from forgetui.config import Config
from forgetui.headless import run_headless
from forgetui.paths import locations
from forgetui.profile import load_profile
from forgetui.tui.app import ForgetApp
from forgetui.tui.screens.failures import FailuresScreen, clean, rerun_profile
from tests.conftest import profile_text
from tests.fakeserver import Script

LIMITS = "idle_timeout_s = 5\nrequest_timeout_s = 20\nretries = 0\n"


@pytest.fixture
def stored(home, fake, tmp_path) -> dict:
    """A real stored run of the quick cases: the fake's default answers fail them, and its second
    request gets an HTTP 500 (no retries), so one case is an error."""
    server = fake(default=Script(gap_s=0.001, content_tokens=8, faults={2: "500"}))
    profile = tmp_path / "quick.toml"
    profile.write_text(profile_text(server.base_url, ["fake/m"], name="quickfail", limits=LIMITS,
                                    extra='enabled = false\n[cases]\nselect = ["quick"]'))
    out, err = io.StringIO(), io.StringIO()
    assert run_headless(profile, stdout=out, stderr=err) == 1, out.getvalue() + err.getvalue()
    run_dir = next(locations().runs_dir.iterdir())
    return json.loads((run_dir / "run.json").read_text())


def failed(doc: dict) -> list[dict]:
    return [c for m in doc["models"] for c in m["cases"] if c["status"] in ("fail", "error")]


def text(screen: FailuresScreen, name: str) -> str:
    return screen.query_one(f"#fail-{name}").visual.plain


def messages(app: ForgetApp) -> list[str]:
    return [n.message for n in app._notifications]


async def open_screen(app: ForgetApp, pilot, doc: dict, model: str | None = None) -> FailuresScreen:
    screen = FailuresScreen(doc, model)
    await app.push_screen(screen)
    await pilot.pause()
    assert app.screen is screen
    return screen


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_lists_failures_and_steps_through_them(stored, size) -> None:
    cases = failed(stored)
    assert len(cases) >= 3 and any(c["status"] == "error" for c in cases)
    app = ForgetApp(start_mode="results", config=Config())
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, stored)
        assert screen.query_one("#fail-list").option_count == len(cases)
        assert screen.has_class("narrow") == (size[0] < 120)
        first = cases[0]
        summary = text(screen, "summary")
        assert first["case_id"] in summary and first["reason"][:60] in summary
        assert first["response"].strip() in text(screen, "response")
        assert f"1/{len(cases)}" in text(screen, "header")
        assert "Judge comment  no judge" in text(screen, "judge")

        renders = screen.renders
        await pilot.press("n")
        assert screen.index == 1 and screen.renders == renders + 1  # one rebuild per key press
        assert cases[1]["case_id"] in text(screen, "summary")
        assert screen.query_one("#fail-list").highlighted == 1
        assert f"2/{len(cases)}" in text(screen, "header")
        await pilot.press("b")
        assert screen.index == 0 and cases[0]["case_id"] in text(screen, "summary")
        await pilot.press("k")
        assert screen.index == 0 and any("first failure" in m for m in messages(app))

        for _ in range(len(cases) - 1):
            await pilot.press("j")
        assert screen.index == len(cases) - 1
        assert cases[-1]["case_id"] in text(screen, "summary")
        await pilot.press("n")
        assert screen.index == len(cases) - 1 and any("last failure" in m for m in messages(app))

        error = next(i for i, c in enumerate(cases) if c["status"] == "error")
        screen.show(error)
        await pilot.pause()
        assert "HTTP 500" in text(screen, "usage") and "Response  none" in text(screen, "response")

        await pilot.press("escape")
        assert app.screen is not screen


async def test_copy_sends_the_raw_response(stored, monkeypatch) -> None:
    cases = failed(stored)
    app = ForgetApp(start_mode="results", config=Config())
    copied: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
        screen = await open_screen(app, pilot, stored)
        await pilot.press("y")
        assert copied == [cases[0]["response"]]
        assert f"Copied {len(cases[0]['response'])} chars (OSC 52; in tmux set -g set-clipboard on)" in messages(app)
        titles = [cmd.title for cmd in screen.palette_commands()]
        assert titles == ["Failures: re-run this case", "Failures: re-run all", "Failures: copy response"]


async def test_model_text_is_shown_inert() -> None:
    hostile = "\x1b[31mred\x1b[0m [bold]x[/bold] \x07\x9b2J"
    doc = {"run_id": "r1", "name": "n", "models": [{"model": "p/m", "cases": [
        {"case_id": "c.one", "status": "fail", "reason": "[red]no[/red]", "response": hostile,
         "reasoning": "think " * 3000, "prompt": [{"role": "user", "content": "[i]q[/i]"}],
         "expected": 42, "extracted": "[b]41[/b]", "details": {"judge": {"score": 2, "comment": "meh"},
                                                               "sandbox_status": "ok", "stdout_tail": "\x1b]0;title\x07"},
         "tool_calls": [{"name": "f", "arguments": "{}"}]},
        {"case_id": "c.two", "status": "skipped", "reason": "no sandbox"},
        {"case_id": "c.long", "status": "fail", "reason": "rambled", "response": "blah " * 20000}]}]}
    app = ForgetApp(start_mode="results", config=Config())
    async with app.run_test(size=(200, 60)) as pilot:
        screen = await open_screen(app, pilot, doc)
        response = text(screen, "response")
        assert "␛[31mred␛[0m [bold]x[/bold] ␇\\u009b2J" in response and "\x1b" not in response
        assert "[red]no[/red]" in text(screen, "summary") and "[i]q[/i]" in text(screen, "prompt")
        assert "[b]41[/b]" in text(screen, "extracted") and "42" in text(screen, "expected")
        assert "\x1b" not in text(screen, "sandbox") and "␛]0;title␇" in text(screen, "sandbox")
        assert "comment: meh" in text(screen, "judge") and "score: 2" in text(screen, "judge")
        assert "characters of reasoning left out" in text(screen, "reasoning")
        assert len(text(screen, "reasoning")) < 7000
        assert "1 skipped" in text(screen, "header") and screen.query_one("#fail-list").option_count == 2
        assert all(not span.style for span in screen.query_one("#fail-response").content.spans[1:])
        await pilot.press("n")
        assert "c.long" in text(screen, "summary")
        assert "60,000 characters left out" in text(screen, "response") and len(text(screen, "response")) < 41000
    assert clean("a\r\nb\x00") == "a\nb␀"


async def test_no_failures_and_unknown_provider(stored) -> None:
    app = ForgetApp(start_mode="results", config=Config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, stored, model="other/x")
        assert screen.query_one("#fail-list").option_count == 0
        assert "No failed or errored cases" in text(screen, "summary")
        await pilot.press("n", "r")
        assert app.session is None
        app.pop_screen()
        await pilot.pause()
        # A run without a stored profile falls back to the config's providers: "fake" is not there.
        bare = copy.deepcopy(stored)
        del bare["profile"]
        await open_screen(app, pilot, bare)
        await pilot.press("r")
        assert app.session is None
        assert any("cannot re-run: provider fake is not in config.toml" in m for m in messages(app))


@pytest.mark.parametrize("start_mode", ["results", "run"])
async def test_rerun_case_really_runs_it(stored, start_mode) -> None:
    cases = failed(stored)
    app = ForgetApp(start_mode=start_mode, config=Config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, stored)
        await pilot.press("n")
        target = cases[1]["case_id"]
        await pilot.press("r")
        assert app.session is not None
        await pilot.pause()
        assert app.current_mode == "run" and app.screen is not screen  # the new run's progress shows
        for _ in range(400):  # bounded: at most ~20 s
            if app.session.live.finished is not None:
                break
            await pilot.pause(0.05)
        finished = app.session.live.finished
        assert finished is not None and finished.status == "complete"
        assert finished.run_id != stored["run_id"]
        doc = finished.document
        assert [m["model"] for m in doc["models"]] == ["fake/m"]
        assert [c["case_id"] for c in doc["models"][0]["cases"]] == [target]
        assert doc["models"][0]["speed"] is None
        assert screen.index == 1


def test_rerun_profile_selects_exactly_those_cases(stored) -> None:
    cases = failed(stored)
    pairs = [("fake/m", cases[0]["case_id"]), ("fake/m", cases[2]["case_id"]), ("fake/m", cases[0]["case_id"])]
    path = rerun_profile(stored, pairs)
    assert path.parent.name == "profiles" and path.exists()
    profile, _ = load_profile(path)
    assert profile.models.targets == ["fake/m"]
    assert profile.speed.enabled is False
    assert [p.name for p in profile.providers] == ["fake"]  # the run's inline provider carries over
    assert profile.limits.retries == 0
    chosen = load_library(library_dirs(Config())).select(profile.cases.select)
    assert [c.id for c in chosen] == [cases[0]["case_id"], cases[2]["case_id"]]
    with pytest.raises(ValueError):
        rerun_profile({k: v for k, v in stored.items() if k != "profile"}, pairs)
    with pytest.raises(ValueError):
        rerun_profile(stored, [])
    assert isinstance(path, Path)


async def test_rerun_all_selects_every_listed_failure(stored) -> None:
    cases = failed(stored)
    app = ForgetApp(start_mode="results", config=Config())
    async with app.run_test(size=(200, 60)) as pilot:
        await open_screen(app, pilot, stored)
        await pilot.press("a")
        assert app.session is not None
        profile, _ = load_profile(app.session.profile_path)
        assert profile.cases.select == [f"id:{c['case_id']}" for c in cases]
        assert any(m.startswith(f"Re-running {len(cases)} case(s)") for m in messages(app))
        app.cancel_run()
        for _ in range(400):
            if app.session.live.finished is not None:
                break
            await pilot.pause(0.05)
        assert app.session.live.finished is not None


def test_usage_section_shows_attempts_recovery_tokens_and_cost() -> None:
    from forgetui.tui.screens.failure_view import render_case

    case = {"case_id": "x", "status": "fail", "reason": "wrong", "outcome": "finished", "finish_reason": "stop",
            "tokens": {"input": 100, "output": 40, "reasoning": 30}, "cost_usd": 0.00012, "rate_limited": 2,
            "recovered": True, "recovery": {"switch": "chat_template_kwargs.enable_thinking=false"},
            "attempts": [{"outcome": "finished", "finish_reason": "length", "response": "", "reasoning": "hmm " * 10,
                          "usage": {"completion_tokens": 30}, "reason": "empty answer, thinking used the budget"}]}
    usage = str(render_case("fake/m", case)["usage"])
    assert "in 100, out 40, reasoning 30" in usage and "$0.000120" in usage
    assert "rate limited 2 time(s)" in usage
    assert "enable_thinking=false" in usage
    assert "earlier attempt 1: outcome finished · finish length · 0 chars of answer · 40 chars of reasoning" in usage
    assert "empty answer, thinking used the budget" in usage and '"completion_tokens": 30' in usage
