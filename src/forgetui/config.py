"""The user config: providers (servers) forgetui can talk to.

Lives in ``config.toml`` under the config dir (see ``paths``). Secrets never live here: a provider
names the *environment variable* that holds its API key (``api_key_env``), and the key is read from
the environment only when a request is made.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import ConfigError
from .tomlfile import load_toml, validate

ProviderKind = Literal["openai", "lmstudio", "ollama", "llamacpp", "llamacpp-python", "vllm", "sglang"]


class StrictModel(BaseModel):
    """Base for every settings model: unknown keys are errors (they are usually typos)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ProviderConfig(StrictModel):
    """One OpenAI-compatible server (local or hosted)."""

    name: str = Field(description="Short name used in targets: 'NAME/model-id'. No slashes.")
    base_url: str = Field(description="The OpenAI-compatible base URL, usually ending in /v1.")
    kind: ProviderKind | None = Field(
        default=None,
        description=(
            "Server dialect: openai, lmstudio, ollama, llamacpp, llamacpp-python, vllm or sglang."
            " Leave it out to detect it from the server's documented endpoints."
        ),
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (never the key itself).",
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=256,
        description=(
            "Parallel case requests (speed runs always use one stream). Leave it out for the"
            " default by server kind: 1 for local servers, 4 for hosted APIs (lowered on HTTP 429)."
        ),
    )
    price_input_per_mtok: float | None = Field(
        default=None, ge=0, description="Price per million input tokens, for cost estimates."
    )
    price_output_per_mtok: float | None = Field(
        default=None, ge=0, description="Price per million output tokens, for cost estimates."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra fields merged into every request body."
    )
    model_files: dict[str, str] = Field(
        default_factory=dict,
        description="Served model id -> its GGUF file on this machine, for servers that do not say.",
    )
    model_dirs: list[str] = Field(
        default_factory=list,
        description="Folders holding GGUF files; '<model id>.gguf' (any case) is looked up there.",
    )

    def gguf_path(self, model_id: str) -> str | None:
        """The GGUF file for a served model id from model_files or model_dirs, if it exists."""
        if model_id in self.model_files:
            path = os.path.expanduser(self.model_files[model_id])
            return path if os.path.isfile(path) else None
        wanted = model_id.rsplit("/", 1)[-1].lower()
        for folder in self.model_dirs:
            root = os.path.expanduser(folder)
            for dirpath, _dirs, files in os.walk(root):
                for name in files:
                    if name.lower() in (wanted, wanted + ".gguf"):
                        return os.path.join(dirpath, name)
        return None

    @field_validator("name")
    @classmethod
    def _name_has_no_slash(cls, value: str) -> str:
        if not value or "/" in value or value.strip() != value:
            raise ValueError("must be non-empty, without '/' or surrounding spaces")
        return value

    @field_validator("base_url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name_not_key(cls, value: str | None) -> str | None:
        # A pasted key here would end up on disk in every run's profile copy.
        if value is not None and (not value.replace("_", "").isalnum() or value.startswith("sk-")):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key"
            )
        return value

    def api_key(self) -> str | None:
        """The key from the environment, or None. Never stored, never logged."""
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None


class TuiSettings(StrictModel):
    """How the terminal UI looks and behaves."""

    theme: str = Field(default="forgetui-dark", description="Theme name: built-in or from the themes folder.")
    refresh_hz: float = Field(default=8.0, ge=1, le=30, description="Live meter refreshes per second.")
    ssh_refresh_hz: float = Field(default=4.0, ge=1, le=30,
                                  description="Refreshes per second when SSH_CONNECTION is set.")
    animations: Literal["auto", "on", "off"] = Field(
        default="auto", description="auto: off over SSH (SSH_CONNECTION/SSH_TTY set), on locally.")


class JudgeSettings(StrictModel):
    """The judge model for reference-answer cases (``[judge]`` in config.toml or a profile)."""

    model: str | None = Field(
        default=None,
        description="'PROVIDER/MODEL': a configured provider (or one defined inline in the profile).",
    )
    max_tokens: int = Field(default=512, ge=16, le=100_000, description="Tokens the judge may write per verdict.")
    retries: int = Field(default=2, ge=0, le=10,
                         description="Re-asks after an unparseable or failed verdict before it is an error.")
    force: bool = Field(default=False, description="Use the judge even when it fails its calibration probes.")
    seed: int = Field(default=1234, description="Sampling seed sent with every judge request (temperature is 0).")

    @field_validator("model")
    @classmethod
    def _model_has_provider(cls, value: str | None) -> str | None:
        if value is not None:
            provider, _, model = value.partition("/")
            if not provider or not model:
                raise ValueError(f"'{value}' must look like 'PROVIDER/model-id'")
        return value


class Config(StrictModel):
    """The whole user config file."""

    providers: list[ProviderConfig] = Field(
        default_factory=list, description="Servers forgetui may benchmark."
    )
    case_dirs: list[str] = Field(
        default_factory=list, description="Your own case folders, loaded after the built-in library."
    )
    tui: TuiSettings = Field(default_factory=TuiSettings, description="Terminal UI settings.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings,
                                 description="The judge model for judged cases (a profile's [judge] wins).")
    keymap: dict[str, str] = Field(
        default_factory=dict,
        description="Binding id -> keys, e.g. \"run.stop\" = \"s,f8\" (ids are listed on the help screen).",
    )

    def provider(self, name: str) -> ProviderConfig | None:
        return next((p for p in self.providers if p.name == name), None)


def load_config(path: Path) -> Config:
    """Load the config file; a missing file is an empty config, a broken one a ConfigError."""
    if not path.exists():
        return Config()
    data, source = load_toml(path)
    config = validate(Config, data, path, source)
    check_unique_names(config.providers, path)
    return config


def save_config(config: Config, path: Path) -> None:
    """Write the config (atomically). The previous file is kept as ``config.toml.bak`` because
    rewriting TOML drops its comments."""
    import tomli_w

    from .store import atomic_write_bytes

    check_unique_names(config.providers, path)
    data = config.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    if config.providers:
        # Name and base_url are what a person looks for first; keep them even when defaults.
        data["providers"] = [p.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
                             | {"name": p.name, "base_url": p.base_url} for p in config.providers]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        atomic_write_bytes(path.with_name(path.name + ".bak"), path.read_bytes())
    atomic_write_bytes(path, (CONFIG_WRITTEN_HEADER + tomli_w.dumps(data)).encode())


CONFIG_WRITTEN_HEADER = ("# Written by forgetui (the previous version is config.toml.bak).\n"
                         "# Keys are described by `forgetui config --init` and docs/configuration.md.\n\n")


def check_unique_names(providers: list[ProviderConfig], path: Path) -> None:
    """Targets name providers, so two with one name would make a target ambiguous."""
    names = [p.name for p in providers]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}: provider names must be unique; repeated: {', '.join(dupes)}")


CONFIG_TEMPLATE_HEADER = """\
# forgetui user config.
# Each [[providers]] entry is an OpenAI-compatible server. Target a model in a profile as
# "PROVIDER_NAME/served-model-id" (split at the first slash).
#
# Keys:
#   name                  short name, no slashes
#   base_url              OpenAI-compatible base URL, usually ending in /v1
#   kind                  openai | lmstudio | ollama | llamacpp | llamacpp-python | vllm | sglang
#                         (leave it out to detect it from the server's own endpoints)
#   api_key_env           NAME of the environment variable holding the key (never the key itself)
#   concurrency           parallel case requests; default 1 for local servers, 4 for hosted APIs
#                         (halved on HTTP 429, raised back slowly; speed runs always use one stream)
#   price_input_per_mtok  price per million input tokens (optional)
#   price_output_per_mtok price per million output tokens (optional)
#   extra_body            extra JSON fields merged into every request, e.g. { top_k = 1 }
#   model_files           served model id -> GGUF path, e.g. { "qwen3-8b" = "~/models/qwen3-8b-q4_k_m.gguf" }
#   model_dirs            folders searched for "<model id>.gguf" (for facts: size, quantization, experts)
#
# [judge] (optional) decides judged cases: does the answer mean the same as the reference?
#   model      "PROVIDER/MODEL"; max_tokens (512), retries (2), seed (1234),
#   force      true = use it even when it fails its calibration probes (default false)
"""


def config_template() -> str:
    """The commented starter config written by ``forgetui config --init``."""
    import tomli_w

    example = {
        "providers": [
            {
                "name": "local",
                "base_url": "http://127.0.0.1:1234/v1",
                "kind": "lmstudio",
                "concurrency": 1,
            },
            {
                "name": "hosted",
                "base_url": "https://api.example.com/v1",
                "kind": "openai",
                "api_key_env": "EXAMPLE_API_KEY",
                "concurrency": 4,
                "price_input_per_mtok": 0.15,
                "price_output_per_mtok": 0.6,
            },
        ]
    }
    Config.model_validate(example)  # the template must always be a valid config
    return CONFIG_TEMPLATE_HEADER + "\n" + tomli_w.dumps(example)
