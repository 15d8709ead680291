"""Profiles and config: validation errors name file, line and field; secrets stay out of files."""

from __future__ import annotations

from pathlib import Path

import pytest

from forgetui.cli import main
from forgetui.config import Config, config_template, load_config
from forgetui.errors import ConfigError
from forgetui.profile import load_profile, resolve_targets

GOOD = """\
name = "nightly"
[[providers]]
name = "rig"
base_url = "http://127.0.0.1:1234/v1"
kind = "lmstudio"
[models]
targets = ["rig/qwen3-27b", "rig/qwen/qwen3-8b"]
[speed]
enabled = true
prompts = ["short", "medium", "long"]
warmup = 1
repeats = 3
max_tokens = 256
[cases]
select = []
[limits]
idle_timeout_s = 120
request_timeout_s = 900
"""


def test_issue_example_profile_loads_and_splits_targets_at_first_slash(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(GOOD)
    profile, source = load_profile(path)
    targets = resolve_targets(profile, Config(), path, source)
    assert [(t.provider.name, t.model_id) for t in targets] == [("rig", "qwen3-27b"), ("rig", "qwen/qwen3-8b")]
    assert profile.speed.repeats == 3 and profile.limits.idle_timeout_s == 120


@pytest.mark.parametrize(
    ("old", "new", "line", "needle"),
    [
        ("warmup = 1", "warmpu = 1", 11, "unknown key 'speed.warmpu'"),
        ('kind = "lmstudio"', 'kind = "lmstudoi"', 5, "providers[0].kind"),
        ("repeats = 3", "repeats = 0", 12, "speed.repeats"),
        ("idle_timeout_s = 120", "idle_timeout_s = -1", 17, "limits.idle_timeout_s"),
        ('name = "nightly"', 'name = "nightly"\ncolour = "red"', 2, "unknown key 'colour'"),
        ('targets = ["rig/qwen3-27b", "rig/qwen/qwen3-8b"]', 'targets = ["qwen3"]', 7, "PROVIDER/model-id"),
    ],
)
def test_bad_profile_names_file_line_and_field(tmp_path: Path, old: str, new: str, line: int, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert f"{path}:{line}:" in str(err.value)
    assert needle in str(err.value)


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace("max_tokens = 256", "max_token = 256"))
    with pytest.raises(ConfigError, match=r"allowed: .*max_tokens"):
        load_profile(path)


def test_toml_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace("repeats = 3", "repeats = = 3"))
    with pytest.raises(ConfigError, match=r"bad.toml: TOML syntax error: .*line 12"):
        load_profile(path)


def test_unknown_provider_in_target_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(GOOD.replace('"rig/qwen3-27b"', '"nowhere/qwen3-27b"'))
    profile, source = load_profile(path)
    with pytest.raises(ConfigError, match=r"p.toml:7: models.targets\[0\]: unknown provider 'nowhere'"):
        resolve_targets(profile, Config(), path, source)


def test_profile_uses_config_providers_and_inline_wins(tmp_path: Path) -> None:
    cfg = Config.model_validate({"providers": [
        {"name": "rig", "base_url": "http://10.9.9.9:1/v1"},
        {"name": "cloud", "base_url": "https://api.example.com/v1", "api_key_env": "CLOUD_KEY"},
    ]})
    path = tmp_path / "p.toml"
    path.write_text(GOOD.replace('"rig/qwen/qwen3-8b"', '"cloud/gpt-x"'))
    profile, source = load_profile(path)
    targets = resolve_targets(profile, cfg, path, source)
    assert targets[0].provider.base_url == "http://127.0.0.1:1234/v1"  # inline beats config
    assert targets[1].provider.name == "cloud"


def test_api_key_env_refuses_a_pasted_key() -> None:
    with pytest.raises(Exception, match="NAME of an environment variable"):
        Config.model_validate({"providers": [{"name": "x", "base_url": "http://h/v1", "api_key_env": "sk-abc123"}]})


def test_prompt_names_must_be_known(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(GOOD.replace('["short", "medium", "long"]', '["short", "huge"]'))
    with pytest.raises(ConfigError, match="prompt 'huge'"):
        load_profile(path)
    path.write_text(GOOD.replace('prompts = ["short", "medium", "long"]',
                                 'prompts = ["huge"]\nprompt_text = { huge = "Write a lot." }'))
    profile, _ = load_profile(path)
    assert profile.speed.prompt_text["huge"] == "Write a lot."


def test_config_init_writes_valid_commented_template_and_locate(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--init"]) == 0
    path = home / "config" / "config.toml"
    text = path.read_text()
    assert text.startswith("# forgetui user config.")
    assert load_config(path).providers[1].api_key_env == "EXAMPLE_API_KEY"
    assert main(["config", "--init"]) == 2  # refuses to overwrite
    assert main(["config", "--init", "--force"]) == 0
    capsys.readouterr()
    for what, expected in [("config", path), ("runs", home / "data" / "runs"), ("themes", home / "config" / "themes")]:
        assert main(["locate", what]) == 0
        assert capsys.readouterr().out.strip() == str(expected)


def test_broken_config_names_line(home: Path) -> None:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[[providers]]\nname = "a"\nbase_url = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"config.toml:3: providers\[0\].base_url"):
        load_config(path)


def test_template_is_valid() -> None:
    import tomllib

    Config.model_validate(tomllib.loads(config_template()))


def test_duplicate_provider_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(GOOD.replace("[models]", '[[providers]]\nname = "rig"\nbase_url = "http://127.0.0.1:2/v1"\n[models]'))
    with pytest.raises(ConfigError, match="provider names must be unique; repeated: rig"):
        load_profile(path)
