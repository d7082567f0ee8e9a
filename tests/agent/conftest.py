"""Fixtures for the agent tests (defined in agent_helpers, shared with the test modules;
pytest puts this directory on sys.path, as it does each test module's)."""

from __future__ import annotations

from agent_helpers import repo, run_agent, server, venv_path

__all__ = ["repo", "run_agent", "server", "venv_path"]
