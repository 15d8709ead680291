"""Every key binding of the TUI in one registry: the footer, the help screen and the user's keymap
all read it (the idea of tconbeer/harlequin's ``actions.py``).

Each binding has a stable id (``scope.name``). ``[keymap]`` in config.toml maps an id to new keys,
for example ``"run.stop" = "s,f8"``. Default keys are plain letters, digits or F-keys so they arrive
through SSH, tmux and the VS Code terminal: nothing here uses ctrl+h/i/j/m (which terminals turn
into backspace, tab and enter) or ctrl+enter (which most terminals cannot tell from enter).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class KeySpec:
    id: str
    keys: str
    action: str
    description: str
    show: bool = True
    priority: bool = False

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.show,
                       priority=self.priority, id=self.id, tooltip=self.description)


#: Scope -> its bindings. "app" is active on every screen.
REGISTRY: dict[str, tuple[KeySpec, ...]] = {
    "app": (
        KeySpec("app.models", "1", "switch_mode('models')", "Models", show=False),
        KeySpec("app.run", "2", "switch_mode('run')", "Run", show=False),
        KeySpec("app.results", "3", "switch_mode('results')", "Results", show=False),
        KeySpec("app.cases", "4", "switch_mode('cases')", "Cases", show=False),
        KeySpec("app.help", "f1,question_mark", "help", "Help"),
        KeySpec("app.palette", "f2,colon", "command_palette", "Commands", show=False),
        KeySpec("app.theme", "f9", "next_theme", "Theme", show=False),
        KeySpec("app.quit", "q,f10", "request_quit", "Quit"),
        KeySpec("app.quit_ctrl", "ctrl+q,ctrl+c", "request_quit", "Quit", show=False, priority=True),
    ),
    "models": (
        KeySpec("models.toggle", "space", "toggle_model", "Select"),
        KeySpec("models.all", "a", "select_all", "All"),
        KeySpec("models.mode", "m", "cycle_mode", "Kind"),
        KeySpec("models.run", "r", "start_run", "Run"),
        KeySpec("models.test", "t", "test_provider", "Test"),
        KeySpec("models.add", "n", "add_provider", "Add"),
        KeySpec("models.edit", "e", "edit_provider", "Edit"),
        KeySpec("models.profile", "p", "pick_profile", "Profile"),
        KeySpec("models.refresh", "f5,u", "refresh", "Refresh", show=False),
    ),
    "run": (
        KeySpec("run.pause", "p", "toggle_pause", "Pause"),
        KeySpec("run.stop", "s", "stop_after_current", "Stop"),
        KeySpec("run.cancel", "x", "cancel_now", "Cancel"),
        KeySpec("run.failures", "f", "open_failures", "Failures"),
        KeySpec("run.results", "o", "open_results", "Results"),
    ),
    "results": (
        KeySpec("results.open", "enter", "open_run", "Open", show=False),
        KeySpec("results.failures", "f", "open_failures", "Failures"),
        KeySpec("results.mark", "space", "mark_run", "Mark"),
        KeySpec("results.compare", "c", "compare", "Compare"),
        KeySpec("results.chart", "g", "chart", "Chart"),
        KeySpec("results.refresh", "f5,u", "refresh", "Refresh", show=False),
    ),
    "cases": (
        KeySpec("cases.filter", "slash", "focus_filter", "Filter"),
        KeySpec("cases.category", "c", "cycle_category", "Category"),
        KeySpec("cases.difficulty", "d", "cycle_difficulty", "Difficulty"),
        KeySpec("cases.clear", "escape", "clear_filter", "Clear", show=False),
    ),
    "failures": (
        KeySpec("failures.next", "n,j", "next_failure", "Next"),
        KeySpec("failures.prev", "b,k", "prev_failure", "Previous"),
        KeySpec("failures.copy", "y", "copy_response", "Copy"),
        KeySpec("failures.rerun", "r", "rerun_case", "Re-run"),
        KeySpec("failures.rerun_all", "a", "rerun_all", "Re-run all"),
        KeySpec("failures.back", "escape", "back", "Back"),
    ),
    "compare": (
        KeySpec("compare.back", "escape", "back", "Back"),
    ),
    "help": (
        KeySpec("help.close", "escape,f1,question_mark,q", "close", "Close"),
    ),
}

#: Keys that terminals do not deliver as themselves (see the module docstring).
UNSAFE_KEYS = frozenset({"ctrl+h", "ctrl+i", "ctrl+j", "ctrl+m", "ctrl+enter", "ctrl+shift+enter",
                         "ctrl+backspace", "ctrl+left_square_bracket"})


def bindings(scope: str) -> list[Binding]:
    """The Textual bindings of one scope, for a screen's ``BINDINGS``."""
    return [spec.binding() for spec in REGISTRY[scope]]


def all_specs() -> dict[str, KeySpec]:
    return {spec.id: spec for specs in REGISTRY.values() for spec in specs}


def check_keymap(keymap: dict[str, str]) -> list[str]:
    """Problems with a user keymap: unknown ids, empty or unsafe keys (one line each)."""
    known = all_specs()
    problems = []
    for binding_id, keys in keymap.items():
        if binding_id not in known:
            problems.append(f"unknown binding id {binding_id!r} (see forgetui's help screen, F1)")
            continue
        parts = [k.strip() for k in keys.split(",") if k.strip()]
        if not parts:
            problems.append(f"{binding_id}: no key given")
        for key in parts:
            if key.lower() in UNSAFE_KEYS:
                problems.append(f"{binding_id}: {key} does not reach applications through most terminals")
    return problems


def effective_keys(spec: KeySpec, keymap: dict[str, str]) -> str:
    """The keys a binding answers to after the user's keymap."""
    return keymap.get(spec.id, spec.keys)


def display_keys(keys: str) -> str:
    names = {"question_mark": "?", "slash": "/", "colon": ":", "space": "space", "escape": "esc"}
    return ", ".join(names.get(k.strip(), k.strip()) for k in keys.split(","))
