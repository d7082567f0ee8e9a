"""Other agents' CLIs (Claude Code, Codex, aider) run one turn at a time under normalize."""

from __future__ import annotations

from normalize.tools.harness.registry import HARNESSES, harness_named
from normalize.tools.harness.tool import HarnessTool, find_program

__all__ = ["HARNESSES", "HarnessTool", "find_program", "harness_named"]
