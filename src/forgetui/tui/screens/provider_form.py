"""Add or edit a provider; the result is validated with the same pydantic model as config.toml."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from ...config import ProviderConfig, ProviderKind

KINDS = list(get_args(ProviderKind))


class ProviderForm(ModalScreen[ProviderConfig | None]):
    """Returns the new ProviderConfig, or None when cancelled. API keys are never typed here:
    only the NAME of the environment variable that holds one."""

    DEFAULT_CSS = """
    ProviderForm { align: center middle; }
    ProviderForm > VerticalScroll { width: 80; max-width: 98%; height: auto; max-height: 95%;
                                    border: thick $primary; background: $surface; padding: 0 1; }
    ProviderForm Label { margin-top: 1; }
    ProviderForm #form-error { color: $error; height: auto; }
    ProviderForm Horizontal { height: auto; margin-top: 1; align: right middle; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="provider_form.cancel"),
        Binding("f5", "save", "Save", id="provider_form.save"),
    ]

    def __init__(self, existing: ProviderConfig | None, taken: set[str]) -> None:
        super().__init__()
        self.existing = existing
        self.taken = taken - ({existing.name} if existing else set())

    def compose(self) -> ComposeResult:
        p = self.existing
        with VerticalScroll():
            yield Static("Edit provider" if p else "Add provider", classes="title")
            yield Label("Name (used in targets as NAME/model)")
            yield Input(p.name if p else "", id="name", placeholder="local")
            yield Label("Base URL (OpenAI-compatible, usually ending in /v1)")
            yield Input(p.base_url if p else "http://127.0.0.1:8080/v1", id="base_url")
            yield Label("Kind (auto = detect from the server's own endpoints)")
            yield Select([("auto", "auto")] + [(k, k) for k in KINDS], value=(p.kind or "auto") if p else "auto",
                         allow_blank=False, id="kind")
            yield Label("API key environment variable (its NAME, never the key; empty for local servers)")
            yield Input((p.api_key_env or "") if p else "", id="api_key_env", placeholder="OPENAI_API_KEY")
            yield Label("Concurrency (parallel case requests; empty = 1 for local servers, 4 for hosted APIs)")
            yield Input(str(p.concurrency) if p and p.concurrency else "", id="concurrency", type="integer",
                        placeholder="by server kind")
            yield Static("", id="form-error")
            with Horizontal():
                yield Button("Save (F5)", id="save", variant="primary")
                yield Button("Cancel (Esc)", id="cancel")

    def values(self) -> dict[str, Any]:
        get = lambda wid: self.query_one(f"#{wid}", Input).value.strip()  # noqa: E731
        kind = self.query_one("#kind", Select).value
        data: dict[str, Any] = dict(self.existing.model_dump(exclude_none=True)) if self.existing else {}
        data.update({"name": get("name"), "base_url": get("base_url")})
        data["kind"] = None if kind == "auto" else kind
        data["api_key_env"] = get("api_key_env") or None
        data["concurrency"] = get("concurrency") or None
        return data

    def validated(self) -> ProviderConfig | None:
        error = self.query_one("#form-error", Static)
        data = self.values()
        if data["name"] in self.taken:
            error.update(f"name: a provider named {data['name']!r} exists already")
            return None
        try:
            return ProviderConfig.model_validate(data)
        except ValidationError as exc:
            error.update("\n".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()))
            return None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_cancel()

    def on_input_submitted(self) -> None:
        self.action_save()

    def action_save(self) -> None:
        provider = self.validated()
        if provider is not None:
            self.dismiss(provider)

    def action_cancel(self) -> None:
        self.dismiss(None)
