"""Importing the providers must not load the anthropic SDK or httpx (fast start)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("anthropic", "httpx", "httpx2", "httpcore")


def loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_provider_modules_import_no_http_stack() -> None:
    statement = (
        "import normalize.providers, normalize.providers.anthropic, "
        "normalize.providers.openai_compat, normalize.providers.replay, normalize.testing"
    )
    assert loaded_after(statement) == []


def test_prefetch_import_loads_the_sdk_in_the_background() -> None:
    statement = (
        "from normalize.providers.anthropic import prefetch_import\n"
        "thread = prefetch_import()\n"
        "assert thread.daemon\n"
        "thread.join()"
    )
    assert "anthropic" in loaded_after(statement)


MCP_SDK = ("mcp", "mcp_types", "anyio", "jsonschema", "httpx2")


def test_the_mcp_client_and_tool_import_no_mcp_sdk() -> None:
    code = ("import sys\n"
            "import normalize.runner, normalize.permissions, normalize.mcp.client, "
            "normalize.mcp.catalog, normalize.mcp.config, normalize.tools.mcp\n"
            "from normalize.tools import default_tools\n"
            "default_tools()\n"
            "from normalize.cli.app import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            f"print(' '.join(m for m in {MCP_SDK!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == []
