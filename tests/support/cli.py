"""The one way a test starts `normalize`: a subprocess, as a person or CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PYTHON = sys.executable
VENV_BIN = str(Path(PYTHON).parent)
CI_ENV = {"CI": "true", "TERM": "dumb"}
"""What a CI runner's environment says: no terminal to draw on."""


def cli_env(home: Path | str | None, *, env: Mapping[str, str] | None = None,
            drop: Iterable[str] = ("NORMALIZE_CRASH_AT",), term: str | None = "dumb",
            first_on_path: str | None = None) -> dict[str, str]:
    """The environment `cli` runs under: this one, less each name of `drop` (a name ending in
    `_` drops every name it begins), `TERM=term` (None: as it is), its own NORMALIZE_HOME,
    then `env` over all, and `first_on_path` put first on the PATH that makes."""
    prefixes = tuple(name for name in drop if name.endswith("_"))
    names = {name for name in drop if not name.endswith("_")}
    full = {k: v for k, v in os.environ.items()
            if k not in names and not (prefixes and k.startswith(prefixes))}
    if term is not None:
        full["TERM"] = term
    if home is not None:
        full["NORMALIZE_HOME"] = str(home)
    full.update(env or {})
    if first_on_path is not None:
        full["PATH"] = first_on_path + os.pathsep + full.get("PATH", "")
    return full


def cli(*args: str, cwd: Path | None = None, home: Path | str | None = None,
        timeout: float = 60, env: Mapping[str, str] | None = None,
        drop: Iterable[str] = ("NORMALIZE_CRASH_AT",), term: str | None = "dumb",
        first_on_path: str | None = None, prefix: Iterable[str] = (),
        input: str | None = None, **popen: Any) -> subprocess.CompletedProcess[str]:
    """`normalize ARGS` to its end in a subprocess (`python -m normalize.cli.app`), as a person
    or CI runs it, in the environment `cli_env` makes; `prefix` goes before the program (a
    `setsid`, a `timeout`)."""
    return subprocess.run(
        [*prefix, PYTHON, "-m", "normalize.cli.app", *args], cwd=cwd,
        env=cli_env(home, env=env, drop=drop, term=term, first_on_path=first_on_path),
        capture_output=True, text=True, timeout=timeout, input=input, check=False, **popen)
