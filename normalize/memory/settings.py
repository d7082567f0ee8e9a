"""How much memory a run reads and what it may write: the config's, the workflow's, the flag's.

Layers, each on top of the one before: the defaults (`top_k = 3`, `mode =
"inbox"`), the user's `[memory]` table in `config.toml`, the workflow's
`memory_top_k` and `memory`, then `--no-memory` (nothing read, nothing
written). A workspace workflow nobody trusted may narrow (`off`, a smaller
`top_k`) but never choose `auto`. Unattended — in CI (`CI` set) or under
`--approve never` — nothing is written unless the workflow itself says
`memory = "inbox"` or `"auto"`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from normalize.errors import ConfigError

MODES = ("inbox", "auto", "off")
DEFAULT_TOP_K = 3
MAX_TOP_K = 20
DEFAULT_STORE = "sqlite"


@dataclass(frozen=True)
class MemorySettings:
    """What one run does with memory."""

    top_k: int = DEFAULT_TOP_K  # entries per model request (0: none retrieved)
    mode: str = "inbox"  # candidates of a success: to the inbox, accepted (auto), or none (off)
    store: str = DEFAULT_STORE  # the `normalize.memory` plugin
    held: str = ""  # why candidates are not written though mode allows (CI, --approve never)

    @property
    def used(self) -> bool:
        return self.top_k > 0 or self.mode != "off"


def user_settings(table: Mapping[str, Any], where: str) -> MemorySettings:
    """The user's `[memory]` table, checked (a bad key or value names the file)."""
    unknown = set(table) - {"top_k", "mode", "store"}
    if unknown:
        raise ConfigError(f"{where}: [memory] has no key {sorted(unknown)[0]!r} "
                          "(top_k, mode, store)")
    top_k = table.get("top_k", DEFAULT_TOP_K)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 0 <= top_k <= MAX_TOP_K:
        raise ConfigError(f"{where}: [memory] top_k = {top_k!r}: must be from 0 to {MAX_TOP_K}")
    mode = table.get("mode", "inbox")
    if mode not in MODES:
        raise ConfigError(f"{where}: [memory] mode = {mode!r}: choose from {', '.join(MODES)}")
    store = table.get("store", DEFAULT_STORE)
    if not isinstance(store, str) or not store:
        raise ConfigError(f"{where}: [memory] store must be a plugin's name")
    return MemorySettings(top_k=top_k, mode=mode, store=store)


def run_settings(user: MemorySettings, *, workflow_top_k: int | None, workflow_mode: str | None,
                 trusted: bool, enabled: bool, unattended: str = "") -> MemorySettings:
    """The settings of one run (see the module docstring); `unattended` says why it is so."""
    if not enabled:
        return MemorySettings(top_k=0, mode="off", store=user.store)
    top_k = user.top_k if workflow_top_k is None else workflow_top_k
    if not trusted and workflow_top_k is not None:
        top_k = min(top_k, user.top_k)
    mode = user.mode
    if workflow_mode is not None and (trusted or workflow_mode != "auto"):
        mode = workflow_mode
    held = unattended if unattended and workflow_mode is None and mode != "off" else ""
    return MemorySettings(top_k=top_k, mode=mode, store=user.store, held=held)
