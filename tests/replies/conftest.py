"""The replies tests use the durability and agent helpers (real subprocesses, fake models)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).parent.parent
for folder in ("durability", "agent"):
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))

from agent_helpers import repo, run_agent, server  # noqa: E402

__all__ = ["repo", "run_agent", "server"]
