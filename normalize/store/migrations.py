"""Migrations of task files from older schema versions to the current one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from normalize.errors import SchemaVersionError
from normalize.task import SCHEMA_VERSION

Migration = Callable[[dict[str, Any]], dict[str, Any]]

# MIGRATIONS[n] turns a version-n task dict into a version-(n+1) one.
MIGRATIONS: dict[int, Migration] = {}


def migrate(data: dict[str, Any], *, source: str) -> dict[str, Any]:
    """Bring `data` to SCHEMA_VERSION; refuse a file written by a newer normalize."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise SchemaVersionError(f"{source}: invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}: written by a newer normalize (task schema {version}, this one reads "
            f"up to {SCHEMA_VERSION}); upgrade with `pip install -U normalize`",
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
        data["schema_version"] = version
    return data
