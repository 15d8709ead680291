"""The Models screen: configured providers with their status, every model they serve with its
facts, selection for a run, the run kind, and provider add/edit/test."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Select, Static

from ...config import ProviderConfig, save_config
from ...errors import ForgetuiError
from .. import keymap
from ..app import PaletteCommand
from ..session import RUN_KINDS, write_adhoc_profile
from .base import BaseScreen
from ..widgets.table import Table

MODEL_COLUMNS = ("", "model", "state", "context", "quant", "params", "size", "server")
PROVIDER_COLUMNS = ("name", "status", "kind", "version", "models", "base URL")


class ModelsScreen(BaseScreen):
    MODE = "models"
    AUTO_FOCUS = "#models"
    BINDINGS = keymap.bindings("models")
    HELP = """
# Models

Providers come from your config.toml (`forgetui locate config`); each is probed through its
documented endpoints: reachable or not, the server kind (detected when `kind` is not set), its
version, and the models it serves with their state (loaded or not), context, quantization,
parameters and size (from the server, or from the GGUF file when the server names it).

- **space** select the highlighted model, **a** select all / none
- **m** choose the run kind (speed only, quick cases, standard, hard, full, ...)
- **r** run the selected models: a profile is written under the data dir and run exactly like
  `forgetui --run`, so it is stored, resumable and reportable the same way
- **p** run a profile file instead
- **t** test: probe the highlighted provider, and on a model row also send "Say OK." and show the
  reply and its time to first token
- **n** add a provider, **e** edit the highlighted one (saved to config.toml; the previous file
  is kept as config.toml.bak). API keys are never typed in: give the NAME of the environment
  variable that holds one.
- **F5/u** probe again
"""

    DEFAULT_CSS = """
    ModelsScreen #providers { height: auto; max-height: 8; }
    ModelsScreen #models { height: 1fr; }
    ModelsScreen #run-bar { height: 3; padding: 0 1; }
    ModelsScreen #run-bar Select { width: 36; }
    ModelsScreen #run-hint { width: 1fr; padding: 1 1 0 1; }
    ModelsScreen #models-status { height: auto; max-height: 4; padding: 0 1; color: $text-muted; }
    """

    def compose_body(self) -> ComposeResult:
        with Vertical():
            yield Static("Providers", classes="title")
            yield Table(id="providers", cursor_type="row", zebra_stripes=True)
            yield Static("Models", classes="title")
            yield Table(id="models", cursor_type="row", zebra_stripes=True)
            with Horizontal(id="run-bar"):
                yield Select([(k, k) for k in RUN_KINDS], value=next(iter(RUN_KINDS)), allow_blank=False, id="kind")
                yield Static("", id="run-hint")
            yield Static("", id="models-status")

    def on_mount(self) -> None:
        self.selected: set[str] = set()
        self.rows: dict[str, list[str]] = {}
        self.probe_results: list[Any] = []
        self.refresh_hint()
        self.action_refresh()

    # ------------------------------------------------------------ probing
    def action_refresh(self) -> None:
        providers = self.app.config.providers  # type: ignore[attr-defined]
        table = self.query_one("#providers", DataTable)
        table.clear(columns=True)
        table.add_columns(*PROVIDER_COLUMNS)
        for p in providers:
            table.add_row(p.name, "probing…", p.kind or "auto", "", "", p.base_url, key=p.name)
        if not providers:
            self.set_status(f"No providers configured. Press {self.app.key_for('models.add')} to add one, "  # type: ignore[attr-defined]
                            "or edit config.toml (forgetui locate config).")
            self.query_one("#models", DataTable).clear(columns=True)
            self.query_one("#models", DataTable).add_columns(*MODEL_COLUMNS)
            return
        self.set_status("Probing providers…")
        self.probe(list(providers))

    @work(exclusive=True, group="probe", exit_on_error=False)
    async def probe(self, providers: list[ProviderConfig]) -> None:
        from ...status import model_rows, probe_all

        results = await probe_all(providers, timeout_s=5.0)
        rows = await asyncio.to_thread(model_rows, results)
        self.show_probe(results, rows)

    def show_probe(self, results: list[Any], rows: list[list[str]]) -> None:
        self.probe_results = results
        providers = self.query_one("#providers", DataTable)
        # Columns are rebuilt with the rows: DataTable keeps auto widths from the old rows otherwise.
        providers.clear(columns=True)
        providers.add_columns(*PROVIDER_COLUMNS)
        up = 0
        for prov, kind, detected, info in results:
            if info.reachable:
                up += 1
                status = Text("up", style="bold green")
            else:
                status = Text("DOWN", style="bold red")
            how = f"{kind} (detected)" if detected else kind
            providers.add_row(prov.name, status, how, info.version or "", str(len(info.models)) if info.reachable else (info.error or "")[:40],
                              prov.base_url, key=prov.name)
        self.rows = {row[0]: row for row in rows if not row[0].endswith("/?")}
        self.selected &= set(self.rows)
        self.fill_models()
        self.set_status(f"{up}/{len(results)} provider(s) up, {len(self.rows)} model(s). "
                        f"space selects, {self.app.key_for('models.run')} runs.")  # type: ignore[attr-defined]

    def fill_models(self) -> None:
        table = self.query_one("#models", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_columns(*MODEL_COLUMNS)
        for label, row in self.rows.items():
            mark = Text("[x]", style="bold green") if label in self.selected else Text("[ ]")
            table.add_row(mark, *row, key=label)
        if self.rows:
            table.move_cursor(row=min(cursor, len(self.rows) - 1))
        self.refresh_hint()

    def set_status(self, text: str) -> None:
        self.query_one("#models-status", Static).update(text)

    def refresh_hint(self) -> None:
        n = len(getattr(self, "selected", ()))
        self.query_one("#run-hint", Static).update(
            f"{n} model(s) selected. {self.app.key_for('models.mode')}: run kind, "  # type: ignore[attr-defined]
            f"{self.app.key_for('models.run')}: run, {self.app.key_for('models.profile')}: run a profile file")  # type: ignore[attr-defined]

    # ---------------------------------------------------------- selection
    def highlighted_model(self) -> str | None:
        table = self.query_one("#models", DataTable)
        if not self.rows or table.cursor_row < 0 or table.cursor_row >= table.row_count:
            return None
        return str(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value)

    def highlighted_provider(self) -> ProviderConfig | None:
        config = self.app.config  # type: ignore[attr-defined]
        if self.focused is self.query_one("#models", DataTable):
            label = self.highlighted_model()
            if label:
                return config.provider(label.split("/", 1)[0])
        table = self.query_one("#providers", DataTable)
        if table.row_count == 0:
            return None
        name = table.coordinate_to_cell_key((max(0, table.cursor_row), 0)).row_key.value
        return config.provider(str(name))

    def action_toggle_model(self) -> None:
        label = self.highlighted_model()
        if label is None:
            return
        self.selected ^= {label}
        table = self.query_one("#models", DataTable)
        table.update_cell(label, table.ordered_columns[0].key,
                          Text("[x]", style="bold green") if label in self.selected else Text("[ ]"))
        self.refresh_hint()

    def action_select_all(self) -> None:
        self.selected = set() if self.selected == set(self.rows) else set(self.rows)
        self.fill_models()

    def action_cycle_mode(self) -> None:
        select = self.query_one("#kind", Select)
        kinds = list(RUN_KINDS)
        select.value = kinds[(kinds.index(str(select.value)) + 1) % len(kinds)]
        self.notify(f"Run kind: {select.value}", timeout=2)

    # --------------------------------------------------------------- runs
    def action_start_run(self) -> None:
        if not self.selected:
            label = self.highlighted_model()
            if label is None:
                self.notify("Select models with space first.", severity="warning")
                return
            self.selected = {label}
        kind = str(self.query_one("#kind", Select).value)
        targets = [label for label in self.rows if label in self.selected]
        try:
            path = write_adhoc_profile(targets, kind)
        except OSError as exc:
            self.notify(f"cannot write the profile: {exc}", severity="error")
            return
        self.app.start_run(path)  # type: ignore[attr-defined]

    def action_pick_profile(self) -> None:
        from .profile_picker import ProfilePicker

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.app.start_run(path)  # type: ignore[attr-defined]

        self.app.push_screen(ProfilePicker(), chosen)

    # --------------------------------------------------------- providers
    def action_add_provider(self) -> None:
        self._edit(None)

    def action_edit_provider(self) -> None:
        provider = self.highlighted_provider()
        if provider is None:
            self.notify("No provider highlighted.", severity="warning")
            return
        self._edit(provider)

    def _edit(self, existing: ProviderConfig | None) -> None:
        from .provider_form import ProviderForm

        app = self.app
        if app.config_problem:  # type: ignore[attr-defined]
            self.notify(f"config.toml has a problem, fix it first (saving would lose it): {app.config_problem}",  # type: ignore[attr-defined]
                        severity="error", timeout=10)
            return
        taken = {p.name for p in app.config.providers}  # type: ignore[attr-defined]

        def done(provider: ProviderConfig | None) -> None:
            if provider is None:
                return
            providers = list(app.config.providers)  # type: ignore[attr-defined]
            if existing is not None:
                providers = [provider if p.name == existing.name else p for p in providers]
            else:
                providers.append(provider)
            config = app.config.model_copy(update={"providers": providers})  # type: ignore[attr-defined]
            try:
                save_config(config, app.locations.config_file)  # type: ignore[attr-defined]
            except (ForgetuiError, OSError) as exc:
                self.notify(f"not saved: {getattr(exc, 'message', exc)}", severity="error")
                return
            app.config = config  # type: ignore[attr-defined]
            self.notify(f"Saved provider {provider.name} to {app.locations.config_file}")  # type: ignore[attr-defined]
            self.action_refresh()

        app.push_screen(ProviderForm(existing, taken), done)

    def action_test_provider(self) -> None:
        provider = self.highlighted_provider()
        if provider is None:
            self.notify("No provider highlighted.", severity="warning")
            return
        model = self.highlighted_model() if self.focused is self.query_one("#models", DataTable) else None
        self.set_status(f"Testing {provider.name}…")
        self.test_connection(provider, model.split("/", 1)[1] if model else None)

    @work(exclusive=True, group="test", exit_on_error=False)
    async def test_connection(self, provider: ProviderConfig, model_id: str | None) -> None:
        text = await connection_test(provider, model_id)
        self.set_status(text)
        self.notify(text, title=f"Test {provider.name}", timeout=8)

    def palette_commands(self):
        cmds = [PaletteCommand("Models: run selected", "Run the selected models with the chosen run kind", self.action_start_run),
                PaletteCommand("Models: add provider", "Add a server to config.toml", self.action_add_provider),
                PaletteCommand("Models: run a profile file", "Pick a profile TOML and run it", self.action_pick_profile),
                PaletteCommand("Models: probe again", "Refresh providers and models", self.action_refresh)]
        for kind in RUN_KINDS:
            cmds.append(PaletteCommand(f"Models: run kind {kind}", "Set the ad-hoc run kind",
                                       lambda k=kind: setattr(self.query_one("#kind", Select), "value", k)))
        return cmds


async def connection_test(provider: ProviderConfig, model_id: str | None) -> str:
    """Probe a provider; with a model, also ask it "Say OK." and time the first token."""
    from ...engine.client import ChatRequest, ClientLimits, StreamClient
    from ...engine.metrics import NS
    from ...providers import dialect_for

    limits = ClientLimits(connect_timeout_s=5, idle_timeout_s=30, request_timeout_s=60, retries=0, retry_after_cap_s=1)
    async with StreamClient(limits) as client:
        dialect, detected = await dialect_for(provider, client.http)
        info = await dialect.server_info()
        if not info.reachable:
            return f"{provider.name}: DOWN at {provider.base_url}: {info.error}"
        head = (f"{provider.name}: up, {dialect.kind}{' (detected)' if detected else ''}"
                f"{' ' + info.version if info.version else ''}, {len(info.models)} model(s)")
        if model_id is None:
            return head
        request = dialect.prepare(ChatRequest(base_url=provider.base_url, model=model_id,
                                              messages=[{"role": "user", "content": "Say OK."}], max_tokens=8,
                                              api_key=provider.api_key(), extra_body=dict(provider.extra_body)), "case")
        result = await client.chat_stream(request)
        if not result.ok:
            return f"{head}; {model_id}: {result.outcome}: {result.error}"
        acc = result.acc
        ttft = (acc.t_first_token_ns - result.t_sent_ns) / NS if acc.t_first_token_ns and result.t_sent_ns else None
        reply = " ".join((acc.content or acc.reasoning or "").split())[:60]
        return f"{head}; {model_id} answered {reply!r}" + (f" (TTFT {ttft:.3f} s)" if ttft is not None else "")
