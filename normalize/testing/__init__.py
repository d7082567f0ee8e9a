"""Test helpers users can import: a strict scripted model and fake model servers.

The scripted model is a provider like the others (`scripted:FILE`, defined in
`normalize.providers.scripted`); it is shown here beside the fake servers, so
tests find every double in one place. `FakeModelServer`, `Fault`, `Reply` and `ToolUse`
load `http.server` on first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from normalize.providers.scripted import ScriptedModel, ScriptExhaustedError

if TYPE_CHECKING:
    from normalize.testing.servers import FakeModelServer, Fault, RecordedRequest, Reply, ToolUse

__all__ = [
    "FakeModelServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ToolUse",
]

_LAZY = {"FakeModelServer", "Fault", "RecordedRequest", "Reply", "ToolUse"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from normalize.testing import servers

        return getattr(servers, name)
    raise AttributeError(f"module 'normalize.testing' has no attribute {name!r}")
