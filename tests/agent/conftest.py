"""Fixtures for the agent tests (defined in agent_helpers, shared with the test modules)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import repo, run_agent, server, venv_path

__all__ = ["repo", "run_agent", "server", "venv_path"]
