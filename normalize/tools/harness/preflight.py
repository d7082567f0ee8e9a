"""Before a task exists: is the harness installed, new enough, and given a key?

Each problem is one line naming the harness and what to do; the CLI turns it
into exit status 2, before anything ran.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping

from normalize.errors import ToolError
from normalize.sandbox import SandboxMode, SandboxPolicy
from normalize.tools.harness.base import Harness
from normalize.tools.harness.tool import find_program, installed
from normalize.tools.run import run_process

__all__ = ["preflight", "version_of"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def version_of(harness: Harness, program: str) -> tuple[int, ...]:
    """The version `PROGRAM --version` prints (run read-only in the sandbox)."""
    with tempfile.TemporaryDirectory(prefix="normalize-preflight-") as place:
        try:
            outcome = run_process([program, "--version"], cwd=place, timeout=30,
                                  sandbox=SandboxPolicy(mode=SandboxMode.READ_ONLY),
                                  visible=[installed(program)])
        except ToolError as exc:
            raise ToolError(f"{harness.name} cannot start: {exc}") from None
    found = _VERSION.search(outcome.output)
    if not outcome.ok or found is None:
        said = outcome.output.strip().splitlines()[-1:] or ["nothing"]
        raise ToolError(f"{harness.name} --version did not say its version (it said: "
                        f"{said[0][:200]}); is {program} {harness.name}?")
    return tuple(int(part) for part in found.groups() if part is not None)


def preflight(harness: Harness, env: Mapping[str, str] | None = None) -> str:
    """The harness's program, once it is found, new enough and has a key; else `ToolError`."""
    program = find_program(harness)
    version = version_of(harness, program)
    if version[:len(harness.minimum_version)] < harness.minimum_version:
        shown = ".".join(map(str, version))
        raise ToolError(f"{harness.name} {shown} is too old: normalize reads its output from "
                        f"{'.'.join(map(str, harness.minimum_version))} on (tested with "
                        f"{harness.tested_version})")
    variables = os.environ if env is None else env
    if not any(variables.get(name) for name in harness.key_variables):
        raise ToolError(f"{harness.name} is not logged in for normalize: set "
                        f"{' or '.join(harness.key_variables)} (it runs with a home of its "
                        f"own, so a login made outside normalize is not seen)")
    return program
