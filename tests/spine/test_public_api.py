"""The public API is pinned: every exported name resolves, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import normalize

EXPECTED = {
    "Action", "ActionResult", "Branch", "ConfigError", "Decision", "Driver", "DriverConfig",
    "DriverFactory", "DriverServices", "EVENT_VERSION", "Emitter", "Engine", "ExitStatus", "Limits",
    "Loop", "NormalizeError", "Notice", "ProviderError", "Reply", "ResultStatus", "RunContext",
    "RunOptions", "RunOutcome", "Scope", "Sequence", "Step", "Task", "TaskConfig", "TaskStatus",
    "TaskStore",
    "Tool", "ToolContext", "ToolRegistry", "Usage", "UsageError", "Wait", "create_driver",
    "default_tools", "event_from_dict", "load_spec", "open_task", "parse", "parse_command",
    "run_flow", "run_task", "start_task", "to_toml",
}


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert set(normalize.__all__) == EXPECTED
    for name in normalize.__all__:
        assert getattr(normalize, name) is not None
    assert "Task" in dir(normalize)


def test_importing_normalize_loads_nothing_heavy() -> None:
    code = ("import sys, normalize\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('anthropic', 'httpx', 'rich', 'typer', 'prompt_toolkit', 'tree_sitter') "
            "or m.startswith('normalize.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
