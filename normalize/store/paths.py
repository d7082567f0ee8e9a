"""Where normalize keeps its data: `NORMALIZE_HOME`, else the platform's user data dir."""

from __future__ import annotations

import os
from pathlib import Path


def data_home(env: dict[str, str] | None = None) -> Path:
    """The user's normalize data directory (not created)."""
    environ = os.environ if env is None else env
    override = environ.get("NORMALIZE_HOME")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("normalize"))


def config_home(env: dict[str, str] | None = None) -> Path:
    """The user's normalize config directory (workflows live in `workflows/` under it)."""
    environ = os.environ if env is None else env
    override = environ.get("NORMALIZE_CONFIG")
    if override:
        return Path(override).expanduser()
    if environ.get("NORMALIZE_HOME"):
        return Path(environ["NORMALIZE_HOME"]).expanduser() / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir("normalize"))
