"""Migrations of task files from older schema versions to the current one.

Each migration takes a task dict of version N and returns one of version N+1;
`migrate` chains them. A file from a newer normalize is refused with an upgrade
hint rather than guessed at. Every version has a fixture task file under
`tests/fixtures/tasks/`, and a test loads each one through these migrations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from normalize.errors import SchemaVersionError
from normalize.statuses import SCHEMA_VERSION

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """One `driver_state` → `driver_states` keyed by the driver that wrote it."""
    data = dict(data)
    state = data.pop("driver_state", None) or {}
    if not isinstance(state, dict):
        raise ValueError("driver_state is not an object")
    data["driver_states"] = {str(data.get("driver", "")): state} if state else {}
    return data


# the keys of a version-3 `driver_config` (a `TaskConfig`), as they were when it was made
_V3_CONFIG_KEYS = ("spec", "permissions", "mcp_servers", "permission_notes",
                   "project_instructions", "follow_ups", "approve", "llm")


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """A plain `driver_config` → the typed config's shape: other keys under `extra`."""
    data = dict(data)
    config = data.get("driver_config") or {}
    if not isinstance(config, dict):
        raise ValueError("driver_config is not an object")
    typed = {key: config[key] for key in _V3_CONFIG_KEYS if key in config}
    extra = {key: value for key, value in config.items() if key not in _V3_CONFIG_KEYS}
    if extra:
        typed["extra"] = extra
    data["driver_config"] = typed
    return data


# MIGRATIONS[n] turns a version-n task dict into a version-(n+1) one.
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(data: dict[str, Any], *, source: str) -> dict[str, Any]:
    """Bring `data` to SCHEMA_VERSION; refuse a file written by a newer normalize."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SchemaVersionError(f"{source}: invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}: written by a newer normalize (task schema {version}, this one reads "
            f"up to {SCHEMA_VERSION}); upgrade with `pip install -U normalize`",
            hint="upgrade normalize to resume or list this task; it was left untouched",
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
        data["schema_version"] = version
    return data
