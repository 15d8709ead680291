"""A run profile: which models, which measurements, which limits.

A profile is a TOML file validated by pydantic with unknown keys rejected, so a typo never silently
turns into a default. It may define providers inline (a self-contained profile) or use the ones in
the user config; inline providers win on a name clash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from .config import Config, JudgeSettings, ProviderConfig, StrictModel, check_unique_names
from .errors import ConfigError
from .tomlfile import key_lines, line_of, load_toml, validate


class ModelsSection(StrictModel):
    targets: list[str] = Field(
        min_length=1, description="'PROVIDER/served-model-id', split at the first slash."
    )

    @field_validator("targets")
    @classmethod
    def _targets_have_provider(cls, value: list[str]) -> list[str]:
        for target in value:
            provider, _, model = target.partition("/")
            if not provider or not model:
                raise ValueError(f"'{target}' must look like 'PROVIDER/model-id'")
        if len(set(value)) != len(value):
            raise ValueError("a target is listed twice")
        return value


class SpeedSection(StrictModel):
    enabled: bool = Field(default=True, description="Run the speed benchmark.")
    prompts: list[str] = Field(
        default_factory=lambda: ["short", "medium", "long"],
        min_length=1,
        description="Prompt names: built-in short/medium/long, or names from [speed.prompt_text].",
    )
    prompt_text: dict[str, str] = Field(
        default_factory=dict, description="Your own prompts by name (add the name to prompts)."
    )
    warmup: int = Field(default=1, ge=0, le=20, description="Uncounted requests per prompt.")
    repeats: int = Field(default=3, ge=1, le=1000, description="Counted requests per prompt.")
    max_tokens: int = Field(default=256, ge=1, le=1_000_000, description="Tokens to generate.")
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    prefill_baseline: bool = Field(
        default=True,
        description="Measure a 1-token request so prefill can be estimated without server timings.",
    )

    @model_validator(mode="after")
    def _prompts_known(self) -> "SpeedSection":
        from .engine.speed import BUILTIN_PROMPTS

        for name in self.prompts:
            if name not in BUILTIN_PROMPTS and name not in self.prompt_text:
                known = ", ".join([*BUILTIN_PROMPTS, *self.prompt_text])
                raise ValueError(f"prompt '{name}' is neither built in nor in prompt_text ({known})")
        return self


class CasesSection(StrictModel):
    select: list[str] = Field(
        default_factory=list,
        description="Case sets, categories, tags or ids ('-x' removes); empty = speed only.",
    )
    max_tokens: int | None = Field(
        default=None, ge=16,
        description="Cap every case's max_tokens (a cut-off answer fails as TRUNCATED, never silently).",
    )
    repeats: int = Field(
        default=1, ge=1, le=20,
        description="Attempts per case (k): reports show pass@1 with its spread and pass^k (all k pass).",
    )


class LimitsSection(StrictModel):
    idle_timeout_s: float = Field(default=120, gt=0, description="No bytes this long ends a request.")
    request_timeout_s: float = Field(default=900, gt=0, description="Total time allowed per request.")
    connect_timeout_s: float = Field(default=10, gt=0, description="Time allowed to connect.")
    retries: int = Field(default=2, ge=0, le=10, description="Retries before the first event.")
    retry_after_cap_s: float = Field(
        default=60, ge=0, description="Longest Retry-After honoured; longer means give up."
    )


class LifecycleSection(StrictModel):
    isolate: bool = Field(
        default=True,
        description="Before a model's speed run, unload other models where the server can "
        "(Ollama, LM Studio, llama-swap) and load the target, recording its load time.",
    )
    restore: bool = Field(
        default=False, description="Afterwards, reload what was unloaded and unload the target."
    )


class Profile(StrictModel):
    """The whole profile file."""

    name: str = Field(default="run", min_length=1, max_length=80, description="Run name.")
    description: str = Field(default="", description="Free text, kept with the run.")
    providers: list[ProviderConfig] = Field(
        default_factory=list, description="Providers defined inline (override the config's)."
    )
    models: ModelsSection
    speed: SpeedSection = Field(default_factory=SpeedSection)
    cases: CasesSection = Field(default_factory=CasesSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    lifecycle: LifecycleSection = Field(default_factory=LifecycleSection)
    judge: JudgeSettings | None = Field(
        default=None, description="The judge for judged cases; keys set here win over config.toml's [judge].")

    def content_hash(self) -> str:
        """A stable hash of what the profile asks for: resume refuses a changed profile.

        The judge is left out: it does not change what a model is asked, so a run may be resumed
        (or re-judged) with another judge. ``cases.repeats`` is left out while it is 1 (the default),
        so profiles written before repeats existed keep their hash."""
        exclude: dict[str, Any] = {"judge": True}
        if self.cases.repeats == 1:
            exclude["cases"] = {"repeats"}
        blob = json.dumps(self.model_dump(mode="json", exclude=exclude), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class Target:
    """One model to benchmark, resolved to its provider."""

    label: str  # "provider/model-id", as written in the profile
    provider: ProviderConfig
    model_id: str


def resolve_targets(
    profile: Profile, config: Config, path: Path | None = None, source: str = ""
) -> list[Target]:
    """Pair each target with its provider (inline first, then the config's)."""
    providers = {p.name: p for p in config.providers}
    providers.update({p.name: p for p in profile.providers})
    targets = []
    for index, label in enumerate(profile.models.targets):
        name, _, model_id = label.partition("/")
        provider = providers.get(name)
        if provider is None:
            line = line_of(key_lines(source), ("models", "targets")) if source else None
            where = f"{path or 'profile'}" + (f":{line}" if line else "")
            known = ", ".join(sorted(providers)) or "none configured"
            raise ConfigError(
                f"{where}: models.targets[{index}]: unknown provider '{name}' in '{label}'"
                f" (known providers: {known}; define it under [[providers]] or in the config)"
            )
        targets.append(Target(label=label, provider=provider, model_id=model_id))
    return targets


@dataclass(frozen=True)
class JudgeSpec:
    """The judge of a run: its settings (config's [judge] with the profile's keys on top) and model."""

    settings: JudgeSettings
    target: Target


def judge_settings(profile: Profile | None, config: Config) -> JudgeSettings:
    """Config's ``[judge]`` with every key the profile's ``[judge]`` sets on top."""
    merged = config.judge.model_dump()
    if profile is not None and profile.judge is not None:
        merged.update({k: getattr(profile.judge, k) for k in profile.judge.model_fields_set})
    return JudgeSettings.model_validate(merged)


def resolve_judge(profile: Profile | None, config: Config, path: Path | None = None, source: str = "",
                  model: str | None = None, config_path: Path | None = None) -> JudgeSpec | None:
    """The run's judge, or None when no ``[judge] model`` is set. ``model`` (``--judge``) replaces
    the configured one. An unknown provider is a ConfigError naming the file and line it came from."""
    settings = judge_settings(profile, config)
    if model is not None:
        provider_name, _, model_id = model.partition("/")
        if not provider_name or not model_id:
            raise ConfigError(f"--judge: '{model}' must look like 'PROVIDER/model-id'")
        settings = settings.model_copy(update={"model": model})
    if settings.model is None:
        return None
    providers = {p.name: p for p in config.providers}
    providers.update({p.name: p for p in (profile.providers if profile else [])})
    name, _, model_id = settings.model.partition("/")
    provider = providers.get(name)
    if provider is None:
        if model is not None:
            where = "--judge"
        elif profile is not None and profile.judge is not None and "model" in profile.judge.model_fields_set:
            line = line_of(key_lines(source), ("judge", "model")) if source else None
            where = f"{path or 'profile'}" + (f":{line}" if line else "")
        else:
            where = str(config_path or "config.toml")
            if config_path is not None and config_path.is_file():
                line = line_of(key_lines(config_path.read_text(encoding="utf-8")), ("judge", "model"))
                where += f":{line}" if line else ""
        known = ", ".join(sorted(providers)) or "none configured"
        raise ConfigError(f"{where}: judge.model: unknown provider '{name}' in '{settings.model}'"
                          f" (known providers: {known})")
    return JudgeSpec(settings, Target(label=settings.model, provider=provider, model_id=model_id))


def load_profile(path: Path) -> tuple[Profile, str]:
    """Load and validate a profile file; returns the profile and its source text."""
    data, source = load_toml(path)
    profile = validate(Profile, data, path, source)
    check_unique_names(profile.providers, path)
    return profile, source


def profile_from_dict(data: dict[str, Any]) -> Profile:
    """Rebuild a profile stored inside a run (for resume)."""
    return Profile.model_validate(data)


def stored_profile(doc: dict[str, Any] | None, run_id: str, purpose: str) -> Profile:
    """The profile a stored run was made with (``run.json["profile"]``), or a ConfigError saying
    why the run cannot be ``purpose`` (judged, recovered)."""
    from pydantic import ValidationError

    if doc is None or not isinstance(doc.get("profile"), dict):
        raise ConfigError(f"run {run_id} has no run.json with its profile; it cannot be {purpose}")
    try:
        return profile_from_dict(doc["profile"])
    except ValidationError as exc:
        raise ConfigError(f"run {run_id}: its stored profile is not valid for this version: "
                          f"{exc.errors()[0].get('msg')}") from exc
