"""The failure inspector: every failed or errored case of a stored run, one key to step through
them, everything the run kept about each (prompt, answer, reasoning, grader evidence, sandbox
output, usage; rendered inertly by :mod:`.failure_view`), copy an answer over SSH (OSC 52) and
re-run one case or all of them.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from .. import keymap
from ..session import profiles_dir, write_adhoc_profile
from .failure_view import GLYPH, STATUS_STYLE, clean, render_case

#: Wider than this, expected and extracted sit side by side.
WIDE = 120


@dataclass(frozen=True)
class Failure:
    model: str
    case: dict[str, Any]

    @property
    def case_id(self) -> str:
        return str(self.case.get("case_id", "?"))

    @property
    def status(self) -> str:
        return str(self.case.get("status", "?"))


def collect(doc: dict[str, Any], model: str | None = None) -> tuple[list[Failure], int]:
    """Failed and errored cases in run order, and the number of skipped ones."""
    failures, skipped = [], 0
    for entry in doc.get("models") or []:
        if model is not None and entry.get("model") != model:
            continue
        for case in entry.get("cases") or []:
            if case.get("status") in ("fail", "error"):
                failures.append(Failure(str(entry.get("model")), case))
            elif case.get("status") == "skipped":
                skipped += 1
    return failures, skipped


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def rerun_profile(doc: dict[str, Any], pairs: list[tuple[str, str]]) -> Path:
    """Write a profile that asks exactly these (model, case id) pairs again, derived from the
    run's own stored profile (so inline providers and limits carry over), with speed off.

    One case selection applies to every target, so with several models the union of the case
    ids is asked of each of them. Raises ValueError when there is nothing to re-run.
    """
    stored = doc.get("profile")
    if not isinstance(stored, dict):
        raise ValueError("this run has no stored profile")
    if not pairs:
        raise ValueError("nothing to re-run")
    models = list(dict.fromkeys(m for m, _ in pairs))
    ids = list(dict.fromkeys(c for _, c in pairs))
    profile = _drop_none(copy.deepcopy(stored))
    profile["models"] = {**(profile.get("models") or {}), "targets": models}
    profile["speed"] = {**(profile.get("speed") or {}), "enabled": False}
    profile["cases"] = {**(profile.get("cases") or {}), "select": [f"id:{c}" for c in ids]}
    base = str(profile.get("name") or doc.get("name") or "run")
    profile["name"] = f"{base[:70]}-rerun"
    profile["description"] = f"Re-run of {len(ids)} case(s) from run {doc.get('run_id', '?')}"
    slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:40] or "run"
    path = profiles_dir() / f"rerun-{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() % 10000:04d}.toml"
    path.write_text(tomli_w.dumps(profile))
    return path


class FailuresScreen(Screen):
    """Pushed over Results or Run: ``FailuresScreen(run_json_doc, model=None)``."""

    KEY_SCOPE = "failures"
    BINDINGS = keymap.bindings("failures")
    HELP = """
# Failure inspector

Every case of the run that **failed** (the model's answer was wrong) or **errored** (the request
itself failed), in run order. Skipped cases are counted in the header, not listed.

- **n / j** next failure, **b / k** previous; the list follows, and arrow keys in the list work too.
- **y** copies the answer with OSC 52, which works over SSH. In tmux, `set -g set-clipboard on`.
- **r** re-runs this case, **a** re-runs every listed failure: a new run from the run's own
  profile, speed off, only those cases. Progress shows on the Run screen.
- **esc** goes back.

Model text is shown literally: markup and escape sequences in an answer are displayed, not obeyed
(control characters appear as symbols such as ␛).
"""
    DEFAULT_CSS = """
    FailuresScreen #fail-header { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    FailuresScreen #fail-body { height: 1fr; }
    FailuresScreen #fail-list { width: 38; height: 1fr; border: round $panel-lighten-1; }
    FailuresScreen #fail-list:focus { border: round $primary; }
    FailuresScreen.narrow #fail-list { width: 28; }
    FailuresScreen #fail-detail { width: 1fr; height: 1fr; padding: 0 1; }
    FailuresScreen #fail-detail > Static, FailuresScreen #fail-compare { height: auto; margin: 0 0 1 0; }
    FailuresScreen #fail-compare { layout: horizontal; }
    FailuresScreen #fail-compare > Static { width: 1fr; height: auto; padding: 0 1 0 0; }
    FailuresScreen.narrow #fail-compare { layout: vertical; }
    """
    SECTIONS = ("summary", "prompt", "response", "reasoning", "tools", "sandbox", "judge", "details", "usage")

    def __init__(self, doc: dict[str, Any], model: str | None = None) -> None:
        super().__init__()
        self.doc = doc
        self.model = model
        self.failures, self.skipped = collect(doc, model)
        self.index = 0
        #: Detail rebuilds so far (one per step; tests check that stepping does not redraw twice).
        self.renders = 0

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Static(id="fail-header", markup=False)
        with Horizontal(id="fail-body"):
            yield OptionList(*self._options(), id="fail-list")
            with VerticalScroll(id="fail-detail"):
                yield Static(id="fail-summary", markup=False)
                with Horizontal(id="fail-compare"):
                    yield Static(id="fail-expected", markup=False)
                    yield Static(id="fail-extracted", markup=False)
                for name in self.SECTIONS[1:]:
                    yield Static(id=f"fail-{name}", markup=False)
        yield Footer()

    def _options(self) -> list[Option]:
        several = len({f.model for f in self.failures}) > 1
        out = []
        for i, f in enumerate(self.failures):
            prompt = Text.assemble((GLYPH.get(f.status, "?") + " ", STATUS_STYLE.get(f.status, "")), clean(f.case_id),
                                   no_wrap=True, overflow="ellipsis")
            if several:
                prompt.append("\n  " + clean(f.model), style="dim")
            out.append(Option(prompt, id=f"failure-{i}"))
        return out

    def on_mount(self) -> None:
        self.query_one("#fail-list", OptionList).border_title = "✗ fail  ! error"
        self.set_class(self.size.width < WIDE, "narrow")
        self.show(0)
        self.query_one("#fail-list", OptionList).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < WIDE, "narrow")

    # ------------------------------------------------------------- showing
    @property
    def current(self) -> Failure | None:
        return self.failures[self.index] if 0 <= self.index < len(self.failures) else None

    def show(self, index: int) -> None:
        """Make failure ``index`` current and rebuild the detail pane (once)."""
        self.index = index
        listing = self.query_one("#fail-list", OptionList)
        if self.failures and listing.highlighted != index:
            listing.highlighted = index  # its OptionHighlighted comes back with this index: ignored
        self.query_one("#fail-header", Static).update(self._header())
        self.renders += 1
        texts = self._detail(self.current)
        for name, text in texts.items():
            self.query_one(f"#fail-{name}", Static).update(text)
        self.query_one("#fail-detail", VerticalScroll).scroll_home(animate=False)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_index != self.index:
            self.show(event.option_index)

    def _header(self) -> Text:
        fails = sum(f.status == "fail" for f in self.failures)
        errors = len(self.failures) - fails
        pos = f"{self.index + 1}/{len(self.failures)}" if self.failures else "0/0"
        where = " · ".join(str(x) for x in (self.doc.get("name"), self.doc.get("run_id")) if x)
        parts = [f"Failures {pos}", f"{fails} fail · {errors} error · {self.skipped} skipped (not listed)"]
        if self.model:
            parts.insert(1, self.model)
        return Text(clean(" │ ".join(parts) + (f" │ {where}" if where else "")), no_wrap=True, overflow="ellipsis")

    def _detail(self, f: Failure | None) -> dict[str, Text]:
        if f is not None:
            return render_case(f.model, f.case)
        blank = {name: Text("") for name in (*self.SECTIONS, "expected", "extracted")}
        blank["summary"] = Text("No failed or errored cases in this run." +
                                (f" {self.skipped} case(s) were skipped." if self.skipped else ""))
        return blank

    # ------------------------------------------------------------- actions
    def _step(self, delta: int) -> None:
        if not self.failures:
            self.notify("No failures in this run.", timeout=3)
            return
        target = self.index + delta
        if not 0 <= target < len(self.failures):
            which = "last" if delta > 0 else "first"
            self.notify(f"This is the {which} failure ({self.index + 1}/{len(self.failures)}).", timeout=3)
            return
        self.show(target)

    def action_next_failure(self) -> None:
        self._step(1)

    def action_prev_failure(self) -> None:
        self._step(-1)

    def action_copy_response(self) -> None:
        f = self.current
        text = (f.case.get("response") or "") if f is not None else ""
        if not text:
            self.notify("Nothing to copy: this case has no response.", severity="warning", timeout=4)
            return
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied {len(text)} chars (OSC 52; in tmux set -g set-clipboard on)", timeout=4)

    def action_rerun_case(self) -> None:
        f = self.current
        if f is None:
            self.notify("No failure to re-run.", timeout=3)
            return
        self._rerun([(f.model, f.case_id)])

    def action_rerun_all(self) -> None:
        if not self.failures:
            self.notify("No failures to re-run.", timeout=3)
            return
        self._rerun([(f.model, f.case_id) for f in self.failures])

    def _rerun(self, pairs: list[tuple[str, str]]) -> None:
        app: Any = self.app
        inline = {p.get("name") for p in (self.doc.get("profile") or {}).get("providers") or [] if isinstance(p, dict)}
        configured = {p.name for p in app.config.providers}
        for model in dict.fromkeys(m for m, _ in pairs):
            provider = model.partition("/")[0]
            if provider not in inline and provider not in configured:
                self.notify(f"cannot re-run: provider {provider} is not in config.toml "
                            "(nor defined in the run's profile)", severity="error", timeout=8, markup=False)
                return
        try:
            if isinstance(self.doc.get("profile"), dict):
                path = rerun_profile(self.doc, pairs)
            else:
                path = write_adhoc_profile(targets=list(dict.fromkeys(m for m, _ in pairs)), kind="quick cases",
                                           case_ids=list(dict.fromkeys(c for _, c in pairs)),
                                           name=f"rerun {self.doc.get('name') or 'run'}")
        except (OSError, ValueError) as exc:
            self.notify(f"cannot re-run: {exc}", severity="error", timeout=8, markup=False)
            return
        if app.start_run(path) is not None:
            if app.screen is self:  # pushed over the Run screen itself: uncover the new run's progress
                app.pop_screen()
            cases = len({c for _, c in pairs})
            app.notify(f"Re-running {cases} case(s); profile {path.name}", timeout=5, markup=False)

    def action_back(self) -> None:
        self.app.pop_screen()

    def palette_commands(self) -> list:
        from ..app import PaletteCommand

        return [
            PaletteCommand("Failures: re-run this case", "Ask the model this case again (a new run)", self.action_rerun_case),
            PaletteCommand("Failures: re-run all", "Ask every listed failure again (a new run)", self.action_rerun_all),
            PaletteCommand("Failures: copy response", "Copy the answer with OSC 52 (works over SSH)", self.action_copy_response),
        ]
