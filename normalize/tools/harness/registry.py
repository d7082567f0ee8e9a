"""The harnesses normalize can drive, by name, and the model host each talks to by default."""

from __future__ import annotations

from importlib import import_module

from normalize.errors import UsageError
from normalize.tools.harness.base import Harness

__all__ = ["DEFAULT_HOSTS", "HARNESSES", "harness_named"]

HARNESSES: dict[str, str] = {
    "claude": "normalize.tools.harness.claude:ClaudeHarness",
    "codex": "normalize.tools.harness.codex:CodexHarness",
    "aider": "normalize.tools.harness.aider:AiderHarness",
}
"""Harness name → `module:Class` (imported when used)."""

DEFAULT_HOSTS: dict[str, str] = {
    "claude": "api.anthropic.com",
    "codex": "api.openai.com",
    "aider": "api.openai.com",
}


def harness_named(name: str) -> Harness:
    """The adapter of the harness called `name`; a `UsageError` naming the known ones."""
    where = HARNESSES.get(name)
    if where is None:
        raise UsageError(f"unknown harness {name!r} (choose from {', '.join(HARNESSES)})")
    module, _, cls = where.partition(":")
    harness: Harness = getattr(import_module(module), cls)()
    return harness
