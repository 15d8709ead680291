"""Pilot tests: Models screen -> start a run against the loopback fake -> Run screen meters,
pause, stop, cancel, quit confirmation; and the refresh guard (meters never update per token)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from forgetui.store import RunStore
from forgetui.paths import locations
from forgetui.tui.app import ForgetApp
from forgetui.tui.screens.confirm import ConfirmScreen
from forgetui.tui.screens.models import ModelsScreen
from forgetui.tui.screens.run import RunScreen
from forgetui.tui.widgets.meters import LiveMeters
from tests.conftest import profile_text
from tests.fakeserver import Script
from tests.tui_helpers import configure, wait_until


async def test_models_screen_selects_models_and_runs_them(home: Path, fake) -> None:
    server = fake({"m1": Script(content_tokens=24, gap_s=0.002), "m2": Script(content_tokens=24, gap_s=0.002)})
    configure(("fake", server.base_url))
    app = ForgetApp()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        await wait_until(pilot, lambda: len(screen.rows) == 2, what="models listed")
        assert set(screen.rows) == {"fake/m1", "fake/m2"}
        await pilot.press("space")  # select the highlighted (first) model
        assert screen.selected == {"fake/m1"}
        await pilot.press("m")  # speed + quick -> speed only
        assert str(screen.query_one("#kind").value) == "speed only"
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session is not None, what="run started")
        assert isinstance(app.screen, RunScreen)
        await wait_until(pilot, lambda: app.session.live.finished is not None, timeout_s=60, what="run finished")
        live = app.session.live
        assert live.finished.status == "complete"
        assert live.targets == ("fake/m1",)
        assert live.done == live.total and live.speed_bad == 0 and live.failed == live.errors == 0
        assert live.tokens_out >= 9 * 24 and live.tokens_in > 0  # server-reported usage, all requests
        assert f"out {live.tokens_out:,}" in str(app.screen.query_one("#run-counts").render())
        # The same store as headless: run.json and records.jsonl on disk, listed by the store.
        runs = RunStore(locations().runs_dir).list_runs()
        measured = [r for p in runs[0]["models"][0]["speed"]["prompts"] for r in p["requests"]]
        assert len(measured) == 9  # "speed only": 3 prompts x 3 repeats
        assert [r["run_id"] for r in runs] == [live.run_id]
        assert (Path(live.run_dir) / "records.jsonl").exists()
        assert {m["model"] for m in runs[0]["models"]} == {"fake/m1"}


async def test_models_screen_tests_a_connection_and_shows_a_down_provider(home: Path, fake) -> None:
    from tests.conftest import closed_url

    server = fake({"m1": Script(content_text="OK", gap_s=0.001)})
    configure(("fake", server.base_url), ("gone", closed_url()))
    app = ForgetApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(pilot, lambda: len(screen.rows) == 1 and screen.probe_results, what="probe")
        statuses = {prov.name: info.reachable for prov, _k, _d, info in screen.probe_results}
        assert statuses == {"fake": True, "gone": False}
        await pilot.press("t")  # on the models table: probe + "Say OK."
        await app.workers.wait_for_complete()
        status = str(screen.query_one("#models-status").render())
        assert "fake: up" in status and "answered 'OK'" in status and "TTFT" in status


async def test_add_provider_writes_the_config(home: Path, fake) -> None:
    from forgetui.config import load_config

    server = fake({"m9": Script()})
    app = ForgetApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("n")
        form = app.screen
        form.query_one("#name").value = "bad/name"
        form.query_one("#base_url").value = server.base_url
        await pilot.press("f5")
        assert app.screen is form  # invalid: stays open with the reason
        assert "name" in str(form.query_one("#form-error").render())
        form.query_one("#name").value = "lab"
        form.query_one("#api_key_env").value = "LAB_KEY"
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.screen is not form, what="form closed")
        config = load_config(locations().config_file)
        assert [(p.name, p.base_url, p.api_key_env) for p in config.providers] == [("lab", server.base_url, "LAB_KEY")]
        await wait_until(pilot, lambda: "lab/m9" in app.screen.rows, what="new provider probed")


async def _start(pilot, app, write_profile, server, **kw) -> None:
    path = write_profile(profile_text(server.base_url, ["fake/m"], **kw))
    app.start_run(path)
    await wait_until(pilot, lambda: app.session is not None and app.session.live.run_id is not None, what="run started")


async def test_run_screen_meters_pause_and_stop(home: Path, fake, write_profile) -> None:
    server = fake({"m": Script(content_tokens=60, gap_s=0.02, reasoning_tokens=5)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(100, 32)) as pilot:
        await _start(pilot, app, write_profile, server, repeats=6, max_tokens=60)
        screen = app.screen
        meters = screen.query_one(LiveMeters)
        # Meters follow the stream: tokens appear in the tail and the TTFT lines fill in.
        await wait_until(pilot, lambda: "w10" in str(screen.query_one("#stream-tail").render()), what="text tail")
        facts = str(screen.query_one("#meter-facts").render())
        assert "fake/m" in facts and "TTFT reasoning" in facts and "TTFT content" in facts
        assert meters.frames > 0
        await pilot.press("p")
        assert app.session.control.paused
        done_at_pause = app.session.live.done
        await wait_until(pilot, lambda: app.session.live.current is None, what="request in flight finished")
        # Paused: nothing new starts while we watch several refreshes go by.
        start_ticks = screen.ticks
        await wait_until(pilot, lambda: screen.ticks >= start_ticks + 4, what="ticks while paused")
        assert app.session.live.done <= done_at_pause + 1 and app.session.live.current is None
        assert "paused" in str(screen.query_one("#run-head").render())
        await pilot.press("s")  # stop after current: releases the pause and ends at the next boundary
        await wait_until(pilot, lambda: app.session.live.finished is not None, what="stopped")
        live = app.session.live
        assert live.finished.status == "interrupted"
        assert 0 < live.done < live.total
        doc = RunStore(locations().runs_dir).load_run(live.run_id)
        assert doc["status"] == "interrupted"


async def test_cancel_now_and_resume_from_the_tui(home: Path, fake, write_profile) -> None:
    server = fake({"m": Script(content_tokens=400, gap_s=0.01)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await _start(pilot, app, write_profile, server, repeats=3, max_tokens=400)
        await wait_until(pilot, lambda: app.session.live.current is not None
                         and app.session.live.current.progress.token_events > 5, what="streaming")
        await pilot.press("x")
        await wait_until(pilot, lambda: app.session.live.finished is not None, what="cancelled")
        first = app.session
        assert first.live.finished.status == "interrupted"
        assert first.live.done == 0  # the one request was cancelled mid-stream; nothing counted
        app.start_run(first.profile_path, resume=first.live.run_id)
        await wait_until(pilot, lambda: app.session is not first and app.session.live.finished is not None,
                         timeout_s=60, what="resumed run finished")
        assert app.session.live.run_id == first.live.run_id
        assert app.session.live.finished.status == "complete"
        assert app.session.live.speed_ok == 3


async def test_quit_during_a_run_asks_first(home: Path, fake, write_profile) -> None:
    server = fake({"m": Script(content_tokens=400, gap_s=0.01)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await _start(pilot, app, write_profile, server, repeats=3, max_tokens=400)
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
        assert "--resume" in app.screen.detail
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="dismissed")
        assert app.run_active and app.is_running
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation again")
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, what="app exited")
    assert app.return_code == 130
    doc = RunStore(locations().runs_dir).load_run(app.session.live.run_id)
    assert doc["status"] == "interrupted"


async def test_refresh_guard_300_tokens_per_second(home: Path, fake, write_profile) -> None:
    """A 300 tok/s stream for ~3 s: the meters update at most refresh_hz x seconds (+ slack) times,
    and the message queue stays short (no per-token messages)."""
    server = fake({"m": Script(content_tokens=900, gap_s=1 / 300, ttft_s=0.01)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(100, 32)) as pilot:
        await _start(pilot, app, write_profile, server, repeats=1, max_tokens=900)
        meters = app.screen.query_one(LiveMeters)
        t0 = time.monotonic()
        frames0 = meters.frames
        max_queue = 0
        while app.session.live.finished is None and time.monotonic() - t0 < 30:
            max_queue = max(max_queue, app.message_queue_size)
            # Plain sleep, not pilot.pause(): the pilot posts its own callbacks to every widget.
            await asyncio.sleep(0.02)
        seconds = time.monotonic() - t0
        tokens = app.session.live.last.progress.token_events
        assert tokens >= 600  # it really streamed hundreds of tokens
        frames = meters.frames - frames0
        assert frames <= app.refresh_hz * seconds + 3, (frames, seconds)
        assert meters.updates <= 4 * (app.refresh_hz * seconds + 3)
        assert max_queue < 20


async def test_stream_tail_shows_model_text_inert(home: Path, fake, write_profile) -> None:
    """Escape sequences and markup from a model are shown as text, never interpreted."""
    server = fake({"m": Script(content_text="\x1b[31mred\x1b[0m [bold]x[/bold] \x1b]0;title\x07 end", gap_s=0.001)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(100, 32)) as pilot:
        await _start(pilot, app, write_profile, server, repeats=1, max_tokens=50)
        await wait_until(pilot, lambda: app.session.live.finished is not None, what="run finished")
        app.screen.tick()
        await pilot.pause()
        tail = app.screen.query_one("#stream-tail").render()
        plain = str(tail)
        assert "\x1b" not in plain and "\x07" not in plain
        assert "␛[31mred␛[0m" in plain and "[bold]x[/bold]" in plain and "end" in plain


async def test_palette_offers_the_screens_own_commands(home: Path, fake, write_profile) -> None:
    server = fake({"m": Script(content_tokens=400, gap_s=0.01)})
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        idle = [c.title for c in app.get_system_commands(app.screen)]
        assert "Run: failures so far" in idle and "Run: cancel now" not in idle
        await _start(pilot, app, write_profile, server, repeats=3, max_tokens=400)
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "Run: cancel now" in titles and "Run: stop after current request" in titles
        titles["Run: stop after current request"].callback()
        assert app.session.control.stop_requested
        await wait_until(pilot, lambda: app.session.live.finished is not None, what="stopped")
        await pilot.press("1")
        await wait_until(pilot, lambda: app.current_mode == "models", what="models")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Models: run selected" in titles and "Run: failures so far" not in titles
