"""Themes (built-in, user, broken, NO_COLOR), the key registry (safe keys, remapping by id), help,
the command palette, and the import boundary (the headless path never loads Textual)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from forgetui.config import Config, TuiSettings
from forgetui.tui import keymap
from forgetui.tui.app import ForgetApp
from forgetui.tui.themes import builtin_themes_dir, load_themes
from tests.tui_helpers import wait_until


def test_every_builtin_theme_loads() -> None:
    themes, problems = load_themes(None)
    assert problems == []
    assert {"forgetui-dark", "forgetui-light", "forgetui-high-contrast"} <= set(themes)
    assert len(themes) == len(list(builtin_themes_dir().glob("*.toml")))
    assert themes["forgetui-light"].dark is False


def test_broken_user_themes_are_reported_with_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text('name = "mine"\nprimary = "#112233"\n')
    (tmp_path / "badcolour.toml").write_text('name = "x"\nprimary = "#112233"\nerror = "notacolour"\n')
    (tmp_path / "syntax.toml").write_text('name = "y"\nprimary = \n')
    (tmp_path / "override.toml").write_text('name = "forgetui-dark"\nprimary = "#ff0000"\n')
    themes, problems = load_themes(tmp_path)
    assert "mine" in themes and "x" not in themes and "y" not in themes
    assert themes["forgetui-dark"].primary == "#ff0000"  # a user theme replaces a built-in
    assert len(problems) == 2
    bad = next(p for p in problems if "badcolour.toml" in p)
    assert ":3:" in bad and "error" in bad and "not a colour" in bad
    assert any("syntax.toml" in p for p in problems)


async def test_broken_theme_gives_one_notification_and_falls_back(home: Path) -> None:
    themes_dir = home / "config" / "themes"
    themes_dir.mkdir(parents=True)
    (themes_dir / "a.toml").write_text('name = "a"\nprimary = "nope"\n')
    (themes_dir / "b.toml").write_text('name = "b"\n')
    app = ForgetApp(start_mode="cases", config=Config(tui=TuiSettings(theme="b")))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "forgetui-dark"
        notes = list(app._notifications)
        assert len(notes) == 1
        text = notes[0].message
        assert "a.toml" in text and "b.toml" in text and "theme 'b' not found" in text


async def test_theme_switching_by_key_and_palette(home: Path) -> None:
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "forgetui-dark"
        seen = {app.theme}
        for _ in range(3):
            await pilot.press("f9")
            seen.add(app.theme)
        assert seen == {"forgetui-dark", "forgetui-light", "forgetui-high-contrast"}
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert "Theme: forgetui-high-contrast" in commands and "Go to Results" in commands


async def test_no_color_runs_monochrome(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = ForgetApp(start_mode="cases")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.no_color
        assert any(type(f).__name__ in ("Monochrome", "NoColor") for f in app._filters)


def test_default_keys_are_safe_and_ids_unique() -> None:
    ids = [spec.id for specs in keymap.REGISTRY.values() for spec in specs]
    assert len(ids) == len(set(ids))
    for spec in keymap.all_specs().values():
        for key in spec.keys.split(","):
            assert key.strip() not in keymap.UNSAFE_KEYS, spec.id
        # every main action has a plain key or an F-key, never only a ctrl chord
        assert any("ctrl+" not in k for k in spec.keys.split(",")) or spec.id == "app.quit_ctrl", spec.id
    assert keymap.check_keymap({"run.stop": "s,f8"}) == []
    problems = keymap.check_keymap({"nope.x": "z", "run.stop": "ctrl+j", "run.pause": ""})
    assert len(problems) == 3


async def test_keymap_remap_changes_the_key_footer_and_help(home: Path) -> None:
    config = Config(keymap={"app.results": "f6", "bogus.id": "z"})
    app = ForgetApp(start_mode="cases", config=config)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert app.key_for("app.results") == "f6"
        assert "bogus.id" in list(app._notifications)[0].message
        await pilot.press("3")  # the old key no longer switches
        assert app.current_mode == "cases"
        await pilot.press("f6")
        await wait_until(pilot, lambda: app.current_mode == "results", what="mode switch by the remapped key")
        await pilot.press("f1")
        help_screen = app.screen
        text = help_screen.text()
        assert "`f6` | Results | `app.results`" in text
        assert "## Focused" in text or "All bindings" in text
        await pilot.press("escape")
        assert app.screen is not help_screen


async def test_number_keys_switch_every_screen(home: Path) -> None:
    app = ForgetApp(start_mode="models")
    async with app.run_test(size=(80, 24)) as pilot:
        for key, mode in (("2", "run"), ("3", "results"), ("4", "cases"), ("1", "models")):
            await pilot.press(key)
            await wait_until(pilot, lambda m=mode: app.current_mode == m, what=mode)
            assert type(app.screen).__name__.lower().startswith(mode)
        await pilot.press("q")  # no run active: quits at once
        await wait_until(pilot, lambda: not app.is_running, what="quit")


def test_headless_path_never_imports_textual() -> None:
    code = ("import sys, forgetui.headless, forgetui.engine.runner, forgetui.tui.session; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; print(bad); "
            "sys.exit(1 if bad else 0)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_over_ssh_no_animations_and_slower_refresh(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.2 50000 10.0.0.1 22")
    app = ForgetApp(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.animation_level == "none"
        assert app.refresh_hz == Config().tui.ssh_refresh_hz == 4.0
        timer = app.screen.timer
        assert abs(timer._interval - 0.25) < 1e-9
    monkeypatch.delenv("SSH_CONNECTION")
    monkeypatch.delenv("SSH_TTY", raising=False)
    local = ForgetApp(start_mode="run", config=Config(tui=TuiSettings(refresh_hz=10, animations="auto")))
    async with local.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert local.refresh_hz == 10 and local.animation_level != "none"


async def test_a_broken_config_is_reported_and_never_overwritten(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[[providers]]\nname = "rig"\nbase_url = "ftp://nope"\n')
    app = ForgetApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any("config.toml:3" in n and "base_url" in n for n in notes), notes
        await pilot.press("n")  # adding a provider would rewrite (and lose) the broken file: refused
        await pilot.pause()
        assert not any(type(s).__name__ == "ProviderForm" for s in app.screen_stack)
    assert config.read_text() == '[[providers]]\nname = "rig"\nbase_url = "ftp://nope"\n'
