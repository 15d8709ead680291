"""Where forgetui keeps things on disk.

Everything goes through this module so that one environment variable, ``FORGETUI_HOME``, can move
all of it (tests use it; so does anyone running several setups side by side). Without it the
platformdirs locations are used: config in the user config dir, runs in the user data dir.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "forgetui"


@dataclass(frozen=True)
class Locations:
    """The directories forgetui reads and writes."""

    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def themes_dir(self) -> Path:
        return self.config_dir / "themes"


def locations() -> Locations:
    """Resolve the locations now (reads ``FORGETUI_HOME`` on every call, so tests can set it)."""
    home = os.environ.get("FORGETUI_HOME")
    if home:
        root = Path(home).expanduser()
        return Locations(root / "config", root / "data", root / "cache")
    import platformdirs

    return Locations(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
    )
