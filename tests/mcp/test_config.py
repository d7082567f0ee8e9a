"""The server tables: `[[mcp]]` in the user's config and `[[workflow.mcp]]`, checked with places;
an untrusted workspace workflow cannot add a server (a program to start)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_helpers import fixture_server, write_config

from normalize.errors import ConfigError
from normalize.permissions import load_mcp_servers, load_user_config, mcp_servers
from normalize.runner import RunOptions, load_spec, start_task
from normalize.store import TaskStore
from normalize.workflow.loader import load_workflow

FLOW = '''[workflow]
name = "flow"
[[workflow.mcp]]
name = "fx"
command = "python"
args = ["server.py"]
tools = ["echo"]
timeout = 5
[[workflow.mcp]]
name = "docs"
url = "http://127.0.0.1:9/mcp"
[[workflow.steps]]
name = "one"
action = "mcp fx echo text=hi"
'''


def test_a_workflow_declares_servers_and_they_reach_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "flow.toml"
    path.write_text(FLOW)
    spec = load_workflow(path)
    assert [s.name for s in spec.mcp] == ["fx", "docs"]
    assert spec.mcp[0].tools == ("echo",)


@pytest.mark.parametrize(("change", "line", "message"), [
    ('timeout = 5', 'timeout = -1', "MCP server 'fx': timeout must be a positive number"),
    ('tools = ["echo"]', 'tool = ["echo"]', "unknown key 'tool' in [workflow.mcp.0]; did you "
                                            "mean 'tools'?"),
    ('url = "http://127.0.0.1:9/mcp"', 'command = "x"\nurl = "http://127.0.0.1:9/mcp"',
     "MCP server 'docs' needs either `command` (a stdio server) or `url` (streamable HTTP), "
     "not both"),
    ('name = "docs"', 'name = "fx"', "MCP server 'fx' is configured twice"),
    ('args = ["server.py"]', 'args = "server.py"', "'args' must be a list of strings"),
])
def test_a_bad_server_table_is_an_error_at_its_line(tmp_path: Path, change: str, line: str,
                                                   message: str) -> None:
    path = tmp_path / "flow.toml"
    path.write_text(FLOW.replace(change, line))
    with pytest.raises(ConfigError) as caught:
        load_workflow(path)
    text = str(caught.value)
    assert text.startswith(f"{path}:") and message in text
    lineno = int(text.split(":")[1])
    assert path.read_text().splitlines()[lineno - 1].split("=")[0].strip() in (
        line.splitlines()[-1].split("=")[0].strip(), "[[workflow.mcp]]", "name", "command")


def test_the_users_config_holds_servers_beside_permissions(normalize_home: Path) -> None:
    config = write_config(normalize_home, '[permissions]\nmode = "auto"\n',
                          fixture_server("fx", timeout=9))
    assert load_user_config().mode == "auto"  # [[mcp]] is a known table
    (server,) = load_mcp_servers()
    assert (server.name, server.timeout, server.transport) == ("fx", 9.0, "stdio")
    config.write_text(config.read_text() + '\n[[mcp]]\nname = "bad"\nurl = "ftp://x"\n')
    with pytest.raises(ConfigError) as caught:
        load_mcp_servers()
    line = config.read_text().splitlines().index('url = "ftp://x"') + 1
    assert str(caught.value) == (f"{config}:{line}: MCP server 'bad': url must start with "
                                 f"http:// or https://")


def test_an_untrusted_workspace_workflow_cannot_add_a_server(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    root = tmp_path / "ws"
    (root / ".normalize" / "workflows").mkdir(parents=True)
    (root / ".normalize" / "workflows" / "flow.toml").write_text(FLOW)
    write_config(normalize_home, fixture_server("mine"))
    options = RunOptions(workspace=root, store=TaskStore(normalize_home, fsync=False))
    spec = load_spec("flow", root)
    assert spec.origin == "workspace"
    servers, notes = mcp_servers(spec, options.workspace)
    assert [s.name for s in servers] == ["mine"]  # the user's own only
    assert notes == ["ignored [[workflow.mcp]] fx, docs from .normalize/workflows/flow.toml: "
                     "untrusted workspace file; `normalize trust FILE` to allow"]
    task = start_task(spec, "go", options)
    assert [s["name"] for s in task.config.mcp_servers] == ["mine"]
    assert notes[0] in task.config.permission_notes

    spec.origin = "trusted"  # as after `normalize trust FILE`
    servers, notes = mcp_servers(spec, options.workspace)
    assert [s.name for s in servers] == ["mine", "fx", "docs"] and notes == []
