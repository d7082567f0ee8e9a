"""The memory tests start the real CLI against a local model server (the agent helpers)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).parent.parent
if str(TESTS / "agent") not in sys.path:
    sys.path.insert(0, str(TESTS / "agent"))

from agent_helpers import server  # noqa: E402

__all__ = ["server"]
